#!/usr/bin/env bash
#
# `make run`: a complete local comb stack from a fresh Debian 12 machine.
# Installs what is missing, builds into build/, starts a private PostgreSQL
# (var/pg) and Redis (var/redis, append-only) on loopback ports unless
# COMB_DATABASE_URL / COMB_REDIS_URL name existing servers, migrates, creates
# the dev community on localhost and 127.0.0.1 (scripts/bootstrap.sh), writes
# var/env, then runs comb-capture (when built) and comb-relay on COMB_LISTEN
# (default 127.0.0.1:7447) with incremental reads on, in the foreground.
# SIGINT, SIGTERM, SIGHUP or SIGQUIT, to this script or its whole process
# group, once or many times, stops the relay, capture, Redis and PostgreSQL,
# in that order. A later run reuses var/ and its data.
#
# COMB_STANDBYS=N (0 by default, at most 8) also starts N PostgreSQL streaming
# standbys of the private PostgreSQL (scripts/standby.sh: pg_basebackup -R,
# data in var/standbyI) and has the relay read from them
# (COMB_READ_DATABASE_URLS, written to var/env too); they stop with the rest.
#
# Set COMB_SKIP_DEPS=1 or COMB_SKIP_BUILD=1 to skip those steps, and
# COMB_VAR_DIR to keep the state somewhere other than ./var. A second stack
# started while one runs (with another COMB_LISTEN) keeps its state in
# var/<port>; PostgreSQL, Redis and capture always take free ports.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/node-env.sh
. "$root/scripts/node-env.sh"
cd "$root"
# shellcheck source=scripts/servers.sh
. "$root/scripts/servers.sh"

build=${BUILD_DIR:-build}
case $build in
/*) build_path=$build ;;
*) build_path="$root/$build" ;;
esac
bin="$build_path/bin"
var="${COMB_VAR_DIR:-$root/var}"

say() {
	printf 'run: %s\n' "$*"
}

relay_pid=""
capture_pid=""
board_pid=""
started_pg=0
started_redis=0
standby_dirs=()

# Stops a child with SIGTERM, then SIGKILL after 15 seconds.
stop_child() {
	local pid=$1 name=$2 i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	say "stopping $name"
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 150); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "$name ignored SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# Set by cleanup when it starts.
stopping=0

# Stops what this script started and exits with status $1, else $?. It is
# the EXIT trap and the trap of INT, TERM, HUP and QUIT, and stops once
# however many signals come: a signal to the process group reaches this
# script twice (GNU make passes its own on) and more may follow (another
# Ctrl-C). bash runs a pending trap before every command, an EXIT trap's
# first ones included, and an `exit` while the EXIT trap runs ends the
# script on the spot, nothing stopped: so no signal trap exits before
# cleanup has begun. A call that comes before `stopping=1` does the whole
# stop itself; a later one returns at once.
# Signals are then ignored rather than caught, and what cleanup runs
# inherits that: a later signal to the group cannot end a `$(...)`, sleep or
# pg_ctl half way and make a server look stopped. A closed stdout (a pipe
# whose reader died) makes a message fail instead of killing the script.
cleanup() {
	local rc=${1:-$?}
	[ "$stopping" = 0 ] || return 0
	stopping=1
	trap '' INT TERM HUP QUIT PIPE
	trap - EXIT
	set +e
	stop_child "$board_pid" "the task board"
	stop_child "$relay_pid" comb-relay
	stop_child "$capture_pid" comb-capture
	if [ "$started_redis" = 1 ]; then
		say "stopping Redis"
		comb_redis_stop "$var/redis" || true
	fi
	for dir in "${standby_dirs[@]}"; do
		say "stopping the standby in ${dir#"$root"/}"
		setsid -w bash "$root/scripts/standby.sh" stop "$dir"
	done
	if [ "$started_pg" = 1 ]; then
		say "stopping PostgreSQL"
		# As root pg_ctl runs under runuser, which catches SIGTERM, SIGINT
		# and SIGQUIT even when they are ignored and then ends pg_ctl early:
		# in a session of its own no signal to our group reaches it.
		setsid -w bash -c '. "$1/scripts/servers.sh" && comb_pg_stop "$2"' \
			_ "$root" "$var/pg"
	fi
	if [ "$(cat "$var/run.pid" 2>/dev/null)" = $$ ]; then
		rm -f "$var/run.pid"
	fi
	say "stopped"
	exit "$rc"
}
trap cleanup EXIT
trap 'cleanup 129' HUP
trap 'cleanup 130' INT
trap 'cleanup 131' QUIT
trap 'cleanup 143' TERM

if [ "${COMB_SKIP_DEPS:-0}" != 1 ]; then
	"$root/scripts/install-deps.sh"
fi
if [ "${COMB_SKIP_BUILD:-0}" != 1 ]; then
	make --no-print-directory -C "$root" build BUILD_DIR="$build"
fi
for b in comb-admin comb-relay; do
	if [ ! -x "$bin/$b" ]; then
		echo "run: $bin/$b is missing" >&2
		exit 1
	fi
done

mkdir -p "$var"

# Prints the port NAME used last time when it is still free, else a free
# one (remembered in var/NAME.port), so that stacks in other state folders
# never collide.
pick_port() {
	local name=$1 port=""
	if [ -s "$var/$name.port" ]; then
		port=$(cat "$var/$name.port")
	fi
	if [ -z "$port" ] || ! comb_port_free "$port"; then
		port=$(comb_free_port)
	fi
	printf '%s\n' "$port" >"$var/$name.port"
	printf '%s\n' "$port"
}

listen=${COMB_LISTEN:-127.0.0.1:7447}
listen_host=${listen%:*}
listen_port=${listen##*:}
if ! comb_port_free "$listen_port" "$listen_host"; then
	echo "run: $listen is in use; stop what holds it or set COMB_LISTEN" >&2
	exit 1
fi

# Status 0 when another make run, alive, uses the state folder DIR.
state_in_use() {
	local pid
	pid=$(cat "$1/run.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$pid" != $$ ] && kill -0 "$pid" 2>/dev/null &&
		grep -qa 'run\.sh' "/proc/$pid/cmdline" 2>/dev/null
}

# One stack per state folder: a second make run while one runs (another
# COMB_LISTEN) keeps its own state in var/<port> instead of taking over the
# first one's servers.
if state_in_use "$var"; then
	var="$var/$listen_port"
	mkdir -p "$var"
	if state_in_use "$var"; then
		echo "run: another make run uses $var" >&2
		exit 1
	fi
	say "another make run uses the state folder; this one keeps its state in $var"
fi
printf '%s\n' $$ >"$var/run.pid"
shown=${var#"$root"/}

if [ -z "${COMB_DATABASE_URL:-}" ]; then
	pgport=$(pick_port pg)
	say "starting PostgreSQL on 127.0.0.1:$pgport (data in $shown/pg)"
	started_pg=1
	comb_pg_start "$var/pg" "$pgport" 1
	if [ -z "$(comb_pg_psql "$pgport" postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'comb'")" ]; then
		comb_pg_psql "$pgport" postgres -c "CREATE DATABASE comb"
	fi
	COMB_DATABASE_URL="postgresql://postgres@127.0.0.1:$pgport/comb"
	db_id="var/pg"
else
	say "using PostgreSQL at COMB_DATABASE_URL"
	db_id=$COMB_DATABASE_URL
fi

standbys=${COMB_STANDBYS:-0}
case $standbys in
[0-8]) ;;
*)
	echo "run: COMB_STANDBYS must be a number from 0 to 8" >&2
	exit 1
	;;
esac
read_urls=${COMB_READ_DATABASE_URLS:-}
if [ "$standbys" -gt 0 ] && [ "$started_pg" = 0 ]; then
	echo "run: COMB_STANDBYS starts standbys of the private PostgreSQL only; with COMB_DATABASE_URL, list yours in COMB_READ_DATABASE_URLS" >&2
	exit 1
fi
for i in $(seq 1 "$standbys"); do
	dir="$var/standby$i"
	say "starting PostgreSQL standby $i of 127.0.0.1:$pgport (data in $shown/standby$i)"
	standby_dirs+=("$dir")
	port=$(bash "$root/scripts/standby.sh" start "$dir" "$pgport" 1 | tail -n 1)
	read_urls="${read_urls:+$read_urls,}postgresql://postgres@127.0.0.1:$port/comb"
done

if [ -z "${COMB_REDIS_URL:-}" ]; then
	redisport=$(pick_port redis)
	say "starting Redis on 127.0.0.1:$redisport (data in $shown/redis)"
	started_redis=1
	comb_redis_start "$var/redis" "$redisport" 1
	COMB_REDIS_URL="redis://127.0.0.1:$redisport/0"
else
	say "using Redis at COMB_REDIS_URL"
fi

COMB_DATABASE_URL=$COMB_DATABASE_URL COMB_ADMIN="$bin/comb-admin" \
	COMB_BOOTSTRAP_DB_ID="$db_id" "$root/scripts/bootstrap.sh" "$var"

if [ -z "${COMB_CAPTURE_ENDPOINT:-}" ]; then
	COMB_CAPTURE_ENDPOINT="tcp://127.0.0.1:$(pick_port capture)"
fi
relay_key=${COMB_RELAY_SECRET_KEY:-$(cat "$var/relay.key")}

# var/env: what the services run with, for scripts that drive the stack.
{
	printf '%s=%q\n' COMB_DATABASE_URL "$COMB_DATABASE_URL"
	printf '%s=%q\n' COMB_REDIS_URL "$COMB_REDIS_URL"
	printf '%s=%q\n' COMB_LISTEN "$listen"
	printf '%s=%q\n' COMB_RELAY_SECRET_KEY_FILE "$var/relay.key"
	printf '%s=%q\n' COMB_RELAY_SECRET_KEY "$relay_key"
	printf '%s=%q\n' COMB_POLICY_PLUGIN "${COMB_POLICY_PLUGIN:-$build_path/lib/policy_default.so}"
	printf '%s=%q\n' COMB_INCREMENTAL_ENABLED "${COMB_INCREMENTAL_ENABLED:-true}"
	printf '%s=%q\n' COMB_CAPTURE_ENDPOINT "$COMB_CAPTURE_ENDPOINT"
	printf '%s=%q\n' COMB_READ_DATABASE_URLS "$read_urls"
} >"$var/env.tmp"
chmod 600 "$var/env.tmp"
mv "$var/env.tmp" "$var/env"
set -a
# shellcheck source=/dev/null
. "$var/env"
set +a

if [ -x "$bin/comb-capture" ]; then
	say "starting comb-capture on $COMB_CAPTURE_ENDPOINT"
	"$bin/comb-capture" &
	capture_pid=$!
else
	say "comb-capture is not built: live sync signals are off"
fi

say "starting comb-relay on $COMB_LISTEN"
"$bin/comb-relay" &
relay_pid=$!

# Wait for /healthz so that the banner is only printed for a working relay.
probe_host=$listen_host
case $probe_host in 0.0.0.0 | '' | '*') probe_host=127.0.0.1 ;; esac
healthy=0
for _ in $(seq 1 100); do
	kill -0 "$relay_pid" 2>/dev/null || break
	if timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2" &&
		printf "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3 &&
		head -n 1 <&3 | grep -q " 200 "' _ "$probe_host" "$listen_port" 2>/dev/null; then
		healthy=1
		break
	fi
	sleep 0.1
done
if [ "$healthy" != 1 ]; then
	echo "run: comb-relay did not become healthy" >&2
	exit 1
fi

# The task board (clients/board): an open channel of the dev community
# for it, and its pages served beside the relay.
relay_url="http://127.0.0.1:$listen_port"
node "$root/clients/board/channel.mjs" --relay "$relay_url" \
	--key "$var/dev-owner.key" --name board >/dev/null
[ -s "$var/board.port" ] || printf '7448\n' >"$var/board.port"
board_port=$(pick_port board)
node "$root/clients/board/serve.mjs" --host 127.0.0.1 --port "$board_port" \
	--relay "$relay_url" >/dev/null &
board_pid=$!

cat <<EOF

comb is running: http://localhost:$listen_port  (ws://localhost:$listen_port)
  dev community owner: $(cat "$var/dev-owner.pub")  (secret key in $shown/dev-owner.key)
  environment:         $shown/env
board: http://127.0.0.1:$board_port/?relay=$relay_url
Press Ctrl-C to stop.

EOF

# Run until a service exits or a signal arrives (the traps then clean up).
pids=("$relay_pid" "$board_pid")
[ -n "$capture_pid" ] && pids+=("$capture_pid")
set +e
wait -n "${pids[@]}"
status=$?
set -e
name=comb-relay
if kill -0 "$relay_pid" 2>/dev/null; then
	name=comb-capture
	kill -0 "$board_pid" 2>/dev/null || name="the task board"
fi
if [ "$status" -eq 0 ]; then
	# A Ctrl-C reaches the services too, which may stop before we do.
	say "$name stopped; stopping the rest"
	exit 0
fi
echo "run: $name exited with status $status" >&2
exit 1
