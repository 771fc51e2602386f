# shellcheck shell=bash
#
# Private PostgreSQL 15 and Redis servers for development and tests, sourced
# by scripts/run.sh (`make run`, data kept under ./var) and
# scripts/test-stack.sh (the CTest fixture, throw-away data). Each server
# listens on a free loopback port and keeps its data, socket, pid file and log
# inside the directory it is given, so several stacks can run side by side.
#
# PostgreSQL refuses to run as root: when we are root, initdb and pg_ctl run
# as the `postgres` OS user through runuser, and the data directory is owned
# by that user (and kept in its home when it cannot reach the one asked for,
# see comb__pg_place). Clients always connect over TCP to 127.0.0.1 as the
# `postgres` database role with trust authentication.
#
# Functions (all return non-zero with a message on stderr on failure):
#   comb_free_port                       print a free loopback TCP port
#   comb_port_free PORT [HOST]           status 0 when nothing listens there
#   comb_pg_start DATADIR PORT DURABLE   init DATADIR if empty, start on PORT;
#                                        DURABLE=0 turns fsync off
#   comb_pg_stop DATADIR                 fast shutdown, no-op when stopped
#   comb_pg_running DATADIR              status 0 when a server runs there
#   comb_pg_port DATADIR                 port of the running server
#   comb_pg_psql PORT DB ARGS...         psql as postgres on 127.0.0.1:PORT
#   comb_pg_standby_start DATADIR PORT PRIMARY_PORT DURABLE
#                                        a streaming standby (hot standby) of
#                                        the primary on PRIMARY_PORT: when
#                                        DATADIR is empty, pg_basebackup -R
#                                        copies the primary into it first
#   comb_redis_start DIR PORT DURABLE [DATABASES]
#                                        daemonized redis-server; DURABLE=1
#                                        turns the append-only file on;
#                                        DATABASES defaults to 16
#   comb_redis_stop DIR                  shutdown, no-op when stopped

COMB_PG_BIN=${COMB_PG_BIN:-/usr/lib/postgresql/15/bin}

# The project's node first (scripts/node-env.sh), for every script that
# sources this file.
# shellcheck source=scripts/node-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/node-env.sh"

comb__log() {
	printf '%s\n' "$*" >&2
}

# Prints a TCP port that was free on 127.0.0.1 a moment ago.
comb_free_port() {
	local port=""
	if command -v python3 >/dev/null 2>&1; then
		port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null) || port=""
	fi
	if [ -z "$port" ] && command -v node >/dev/null 2>&1; then
		port=$(node -e 'const s = require("net").createServer();
s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });' 2>/dev/null) || port=""
	fi
	if [ -z "$port" ]; then
		# Probe: a port is free when nothing accepts a connection on it.
		local i
		for i in $(seq 1 50); do
			port=$((20000 + RANDOM % 30000))
			if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
				break
			fi
			port=""
		done
	fi
	if [ -z "$port" ]; then
		comb__log "servers: cannot find a free port"
		return 1
	fi
	printf '%s\n' "$port"
}

# Status 0 when we must hand PostgreSQL commands to the postgres OS user.
comb__pg_as_postgres() {
	[ "$(id -u)" -eq 0 ]
}

# Runs a command as the PostgreSQL OS user (ourselves unless we are root).
comb__pg_run() {
	if comb__pg_as_postgres; then
		# from /, as the postgres user may not enter our working directory
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# When we are root and the postgres user cannot reach the folder meant to
# hold DATADIR (a checkout inside /root, whose mode is 700), DATADIR becomes
# a link to <postgres home>/comb/<hash of DATADIR's path>, so that no mode
# of a folder outside the project is changed. The same path always maps to
# the same folder, so the data outlives the run; data already in DATADIR is
# moved there.
comb__pg_place() {
	local datadir=$1 parent home target
	comb__pg_as_postgres || return 0
	[ -L "$datadir" ] && return 0
	parent=$(dirname "$datadir")
	mkdir -p "$parent" || return 1
	parent=$(cd "$parent" && pwd -P) || return 1
	runuser -u postgres -- test -x "$parent" && return 0
	home=$(getent passwd postgres | cut -d: -f6)
	if [ -z "$home" ] || [ ! -d "$home" ]; then
		comb__log "servers: the postgres user cannot reach $parent and has no home folder to keep its data in"
		return 1
	fi
	target="$home/comb/$(printf '%s' "$parent/$(basename "$datadir")" | sha256sum | cut -c1-16)"
	comb__log "servers: the postgres user cannot reach $parent; keeping the PostgreSQL data in $target (linked from $datadir)"
	mkdir -p "$home/comb" || return 1
	if [ -e "$datadir" ]; then
		if [ -e "$target" ]; then
			comb__log "servers: both $datadir and $target exist; remove one"
			return 1
		fi
		mv "$datadir" "$target" || return 1
	fi
	mkdir -p "$target" || return 1
	chown postgres: "$target" || return 1
	ln -s "$target" "$datadir"
}

# The data directory with links resolved: the postgres user may not be able
# to follow the path we were given (see comb__pg_place).
comb__pg_real() {
	(cd "$1" 2>/dev/null && pwd -P) || printf '%s\n' "$1"
}

comb_pg_running() {
	[ -f "$1/postmaster.pid" ] || return 1
	comb__pg_run "$COMB_PG_BIN/pg_ctl" -D "$(comb__pg_real "$1")" status >/dev/null 2>&1
}

comb_pg_port() {
	sed -n 4p "$1/postmaster.pid"
}

# Unix sockets live in the data directory unless its path is too long for
# sun_path (107 bytes with the ".s.PGSQL.PORT" name), then in /tmp.
comb__pg_socket_dir() {
	local datadir=$1
	if [ "${#datadir}" -le 80 ]; then
		printf '%s\n' "$datadir"
	else
		printf '/tmp\n'
	fi
}

comb_pg_start() {
	local datadir=$1 port=$2 durable=${3:-1}
	local log opts sockdir

	if [ ! -x "$COMB_PG_BIN/initdb" ]; then
		comb__log "servers: $COMB_PG_BIN/initdb not found (install postgresql-15)"
		return 1
	fi
	comb__pg_place "$datadir" || return 1
	mkdir -p "$datadir" || return 1
	datadir=$(cd "$datadir" && pwd -P) || return 1
	if comb__pg_as_postgres; then
		chown postgres: "$datadir" || return 1
	fi
	chmod 700 "$datadir" || return 1
	if [ ! -f "$datadir/PG_VERSION" ]; then
		if ! comb__pg_run "$COMB_PG_BIN/initdb" --no-sync -D "$datadir" \
			-U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
			>"$datadir.initdb.log" 2>&1; then
			comb__log "servers: initdb failed:"
			cat "$datadir.initdb.log" >&2
			return 1
		fi
		rm -f "$datadir.initdb.log"
	fi
	if comb_pg_running "$datadir"; then
		comb__log "servers: stopping the PostgreSQL left running in $datadir"
		comb_pg_stop "$datadir" || return 1
	fi

	comb__pg_launch "$datadir" "$port" "$durable"
}

# Starts the server of DATADIR on PORT with the options every server here
# shares (a standby needs the primary's max_connections, at least).
comb__pg_launch() {
	local datadir=$1 port=$2 durable=$3 extra=${4:-}
	local log opts sockdir

	log="$datadir/server.log"
	sockdir=$(comb__pg_socket_dir "$datadir")
	opts="-k $sockdir -h 127.0.0.1 -p $port"
	opts="$opts -c shared_preload_libraries=pg_stat_statements"
	opts="$opts -c max_connections=300 -c logging_collector=off"
	if [ "$durable" = 0 ]; then
		opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
		# a test primary copied by two pg_basebackups at once: each
		# one's fast checkpoint must not remove the WAL the other's
		# stream starts from (seen: "requested WAL segment ... has
		# already been removed")
		opts="$opts -c wal_keep_size=256MB"
	fi
	if ! comb__pg_run "$COMB_PG_BIN/pg_ctl" -D "$datadir" -l "$log" -w -t 60 \
		-o "$opts $extra" start >/dev/null; then
		comb__log "servers: PostgreSQL did not start; last lines of $log:"
		tail -n 20 "$log" >&2
		return 1
	fi
}

comb_pg_standby_start() {
	local datadir=$1 port=$2 primary=$3 durable=${4:-1}

	comb__pg_place "$datadir" || return 1
	mkdir -p "$datadir" || return 1
	datadir=$(cd "$datadir" && pwd -P) || return 1
	if comb__pg_as_postgres; then
		chown postgres: "$datadir" || return 1
	fi
	chmod 700 "$datadir" || return 1
	if [ ! -f "$datadir/PG_VERSION" ]; then
		# -R writes primary_conninfo and standby.signal: a streaming
		# standby from its first start.
		if ! comb__pg_run "$COMB_PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$primary" \
			-U postgres -D "$datadir" -R -X stream -c fast --no-sync \
			>"$datadir.basebackup.log" 2>&1; then
			comb__log "servers: pg_basebackup from port $primary failed:"
			cat "$datadir.basebackup.log" >&2
			return 1
		fi
		rm -f "$datadir.basebackup.log"
	fi
	if comb_pg_running "$datadir"; then
		comb__log "servers: stopping the PostgreSQL left running in $datadir"
		comb_pg_stop "$datadir" || return 1
	fi
	# Feedback keeps the primary from vacuuming rows a standby's reads
	# still see, rather than cancelling those reads.
	comb__pg_launch "$datadir" "$port" "$durable" "-c hot_standby=on -c hot_standby_feedback=on -c max_standby_streaming_delay=5s"
}

comb_pg_stop() {
	local datadir
	comb_pg_running "$1" || return 0
	datadir=$(comb__pg_real "$1")
	comb__pg_run "$COMB_PG_BIN/pg_ctl" -D "$datadir" -m fast -w -t 60 stop >/dev/null
}

comb_pg_psql() {
	local port=$1 db=$2
	shift 2
	PGCONNECT_TIMEOUT=10 psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" \
		-U postgres -d "$db" "$@"
}

# Prints the pid recorded in DIR/redis.pid when that process is alive.
comb__redis_pid() {
	local pid
	[ -f "$1/redis.pid" ] || return 1
	pid=$(cat "$1/redis.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	printf '%s\n' "$pid"
}

comb_redis_start() {
	local dir=$1 port=$2 durable=${3:-1} databases=${4:-16}
	local persist i

	if ! command -v redis-server >/dev/null 2>&1; then
		comb__log "servers: redis-server not found (install redis-server)"
		return 1
	fi
	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd -P) || return 1
	if comb__redis_pid "$dir" >/dev/null; then
		comb__log "servers: stopping the Redis left running in $dir"
		comb_redis_stop "$dir" || return 1
	fi
	rm -f "$dir/redis.pid"
	if [ "$durable" = 1 ]; then
		persist=(--appendonly yes --appendfsync everysec --save "")
	else
		persist=(--appendonly no --save "")
	fi
	if ! redis-server --bind 127.0.0.1 --port "$port" --daemonize yes \
		--pidfile "$dir/redis.pid" --dir "$dir" --logfile "$dir/redis.log" \
		--protected-mode yes --databases "$databases" "${persist[@]}"; then
		comb__log "servers: redis-server failed to start"
		return 1
	fi
	for i in $(seq 1 100); do
		if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
			return 0
		fi
		sleep 0.1
	done
	comb__log "servers: Redis did not answer on port $port; last lines of $dir/redis.log:"
	tail -n 20 "$dir/redis.log" >&2
	return 1
}

comb_redis_stop() {
	local dir=$1 pid i
	pid=$(comb__redis_pid "$dir") || return 0
	# SIGTERM makes Redis flush its append-only file and exit cleanly.
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$dir/redis.pid"; return 0; }
		sleep 0.1
	done
	comb__log "servers: Redis $pid ignored SIGTERM; killing it"
	kill -KILL "$pid" 2>/dev/null
	rm -f "$dir/redis.pid"
}

# Status 0 when nothing listens on HOST:PORT (HOST default 127.0.0.1), so
# that a server setting SO_REUSEADDR can bind it.
comb_port_free() {
	local port=$1 host=${2:-127.0.0.1}
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind((sys.argv[2], int(sys.argv[1])))
except OSError:
    sys.exit(1)
s.close()' "$port" "$host" 2>/dev/null
		return
	fi
	! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}
