#!/usr/bin/env bash
#
# A PostgreSQL streaming standby of a running primary, for tests
# (tests/e2e/lib/harness.mjs startStandby) and `make run` with
# COMB_STANDBYS=1: pg_basebackup -R from the primary into DIR/pg, then a hot
# standby on a free loopback port. Prints the port on stdout.
#
# usage: scripts/standby.sh start DIR PRIMARY_PORT [DURABLE]
#        scripts/standby.sh stop DIR        (stops it; keeps the data)
#        scripts/standby.sh kill DIR        (SIGKILL, as a crash; keeps the data)
#        scripts/standby.sh promote DIR     (pg_ctl promote, waiting for it)
#        scripts/standby.sh remove DIR      (stops it and deletes DIR)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/servers.sh
. "$here/servers.sh"

usage() {
	echo "usage: $0 start DIR PRIMARY_PORT [DURABLE] | stop|kill|promote|remove DIR" >&2
	exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2

# The data directory (as test-stack.sh does: under /tmp when the postgres
# OS user cannot reach DIR).
data_dir() {
	if [ -L "$dir/pg" ]; then
		readlink "$dir/pg"
	else
		printf '%s\n' "$dir/pg"
	fi
}

case $cmd in
start)
	[ $# -ge 3 ] || usage
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	data="$dir/pg"
	if [ ! -e "$data" ] && [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$dir"; then
		data=$(mktemp -d /tmp/comb-standby-pg.XXXXXX)
		chmod 755 "$data"
		data="$data/data"
		ln -s "$data" "$dir/pg"
	fi
	port=$(comb_free_port)
	comb_pg_standby_start "$(data_dir)" "$port" "$3" "${4:-0}"
	printf '%s\n' "$port"
	;;
stop)
	comb_pg_stop "$(data_dir)"
	;;
kill)
	data=$(data_dir)
	if [ -f "$data/postmaster.pid" ]; then
		kill -KILL "$(head -n 1 "$data/postmaster.pid")" 2>/dev/null || true
	fi
	;;
promote)
	comb__pg_run "$COMB_PG_BIN/pg_ctl" -D "$(comb__pg_real "$(data_dir)")" -w -t 60 promote >/dev/null
	;;
remove)
	data=$(data_dir)
	comb_pg_stop "$data" 2>/dev/null || true
	rm -rf "$data"
	case $data in
	/tmp/comb-standby-pg.*/data) rmdir "$(dirname "$data")" 2>/dev/null || true ;;
	esac
	rm -rf "$dir"
	;;
*) usage ;;
esac
