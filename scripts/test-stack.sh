#!/usr/bin/env bash
#
# The servers the end-to-end and integration tests share: one private
# PostgreSQL 15 (fsync off) and one Redis, both on free loopback ports, under
# a stack directory (the CTest fixture uses BUILD/teststack). `start` also
# creates the database comb_template and migrates it with comb-admin, so each
# test can clone a fresh schema with CREATE DATABASE ... TEMPLATE comb_template
# in a few milliseconds. Tests read the connection details from STACK/env.
#
# usage: scripts/test-stack.sh start STACK_DIR
#        scripts/test-stack.sh stop STACK_DIR
#
# comb-admin is taken from $COMB_BUILD_DIR/bin, else from the parent of
# STACK_DIR (BUILD/teststack -> BUILD/bin).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/servers.sh
. "$here/servers.sh"

usage() {
	echo "usage: $0 start|stop STACK_DIR" >&2
	exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
stack=$2
started=0

# The PostgreSQL data directory: STACK/pg, or a directory under /tmp (linked
# from STACK/pg) when the postgres OS user could not reach STACK, as happens
# for a checkout inside /root. Tests never need the data after `stop`.
pg_dir() {
	if [ -L "$stack/pg" ]; then
		readlink "$stack/pg"
	else
		printf '%s\n' "$stack/pg"
	fi
}

# Kills services and servers a test process left behind (the harness records
# their pids in STACK/pids and removes them when they exit).
reap_services() {
	local f pid exe
	for f in "$stack"/pids/*; do
		[ -f "$f" ] || continue
		pid=$(basename "$f")
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
		case $exe in
		*/comb-* | */redis-server)
			echo "test-stack: killing leftover $exe ($pid)" >&2
			kill -KILL "$pid" 2>/dev/null || true
			;;
		esac
		rm -f "$f"
	done
}

stop_stack() {
	local dir
	[ -d "$stack" ] || return 0
	stack=$(cd "$stack" && pwd -P)
	reap_services
	comb_redis_stop "$stack/redis" || true
	dir=$(pg_dir)
	if [ -d "$dir" ]; then
		# Keep the server log for a post-mortem, drop the data.
		comb_pg_stop "$dir" || true
		if [ -f "$dir/server.log" ]; then
			cp "$dir/server.log" "$stack/postgres.log"
		fi
		rm -rf "$dir"
	fi
	case $dir in
	/tmp/comb-teststack-pg.*/data | /tmp/comb-standby-pg.*/data)
		rmdir "$(dirname "$dir")" 2>/dev/null || true
		;;
	esac
	rm -f "$stack/pg"
	rm -rf "$stack/redis/dump.rdb" "$stack/env"
}

start_stack() {
	local build admin pgport redisport dir base redis_databases=1024

	mkdir -p "$stack"
	stack=$(cd "$stack" && pwd -P)
	stop_stack
	# Whatever fails below, leave no server running behind.
	trap 'if [ "$started" = 0 ]; then stop_stack; fi' EXIT
	rm -rf "$stack/logs" "$stack/env" "$stack/postgres.log"
	mkdir -p "$stack/logs"

	build=${COMB_BUILD_DIR:-$(dirname "$stack")}
	admin="$build/bin/comb-admin"
	if [ ! -x "$admin" ]; then
		echo "test-stack: $admin is missing (build the project first)" >&2
		exit 1
	fi

	dir="$stack/pg"
	if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$stack"; then
		dir=$(mktemp -d /tmp/comb-teststack-pg.XXXXXX)
		chmod 755 "$dir"
		dir="$dir/data"
		ln -s "$dir" "$stack/pg"
	fi

	pgport=$(comb_free_port)
	comb_pg_start "$dir" "$pgport" 0
	redisport=$(comb_free_port)
	# a database per test stack (tests/e2e/lib/harness.mjs privateRedis)
	comb_redis_start "$stack/redis" "$redisport" 0 "$redis_databases"

	base="postgresql://postgres@127.0.0.1:$pgport"
	comb_pg_psql "$pgport" postgres -c "CREATE DATABASE comb_template"
	if ! COMB_DATABASE_URL="$base/comb_template" "$admin" migrate \
		>"$stack/logs/migrate.log" 2>&1; then
		echo "test-stack: comb-admin migrate failed:" >&2
		cat "$stack/logs/migrate.log" >&2
		exit 1
	fi
	# No connection may stay open on a template while it is being cloned.
	comb_pg_psql "$pgport" postgres \
		-c "ALTER DATABASE comb_template WITH ALLOW_CONNECTIONS false"

	cat >"$stack/env.tmp" <<EOF
PGHOST=127.0.0.1
PGPORT=$pgport
PGUSER=postgres
COMB_TEST_DATABASE_URL_BASE=$base
COMB_TEST_TEMPLATE_DB=comb_template
COMB_REDIS_URL=redis://127.0.0.1:$redisport/0
COMB_TEST_REDIS_PORT=$redisport
COMB_TEST_REDIS_DATABASES=$redis_databases
EOF
	mv "$stack/env.tmp" "$stack/env"
	started=1
	echo "test-stack: PostgreSQL on 127.0.0.1:$pgport, Redis on 127.0.0.1:$redisport, template migrated"
}

# Stops the private stacks tests start beside this one (STACK-<name>, see
# tests/e2e/faults.test.mjs, and the streaming standbys of
# tests/e2e/lib/harness.mjs startStandby) that a killed test process left
# running.
stop_private_stacks() {
	local dir
	for dir in "$stack"-*/; do
		[ -f "$dir/env" ] || [ -e "$dir/pg" ] || continue
		echo "test-stack: stopping the private stack left in $dir" >&2
		"$here/test-stack.sh" stop "$dir" >/dev/null || true
		rm -rf "$dir"
	done
}

case $cmd in
start) start_stack ;;
stop)
	stop_stack
	stop_private_stacks
	echo "test-stack: stopped"
	;;
*) usage ;;
esac
