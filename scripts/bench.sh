#!/usr/bin/env bash
#
# `make bench` and `make bench-quick` (docs/benchmarks.md): builds optimized
# binaries in build-bench/ (CMake Release) and comb-bench (tests/bench/),
# starts a private PostgreSQL 15 and Redis under build-bench/benchstack
# with the settings below, then hands over to tests/bench/run.mjs, which
# loads the fixtures, starts comb-capture and the relay nodes and runs
# every scenario of BENCHMARKS.md. stdout carries one JSON object per
# scenario and nothing else; progress goes to stderr. The servers are
# stopped whatever happens.
#
# usage: scripts/bench.sh [--quick] [--only SCENARIO[,SCENARIO...]] [--keep]
#        scripts/bench.sh --migration [--keep]
#        scripts/bench.sh --stop
#
# --migration runs, on the same stack, the online migration test instead
# (tests/bench/migration.mjs, docs/operations.md "Upgrading to 0021"): a
# database at the migrations before 0018 filled by the fixture, migrated
# with writes running; one JSON object on stdout.
#
# --keep leaves PostgreSQL and Redis running after the run (with the loaded
# database comb_bench, for EXPLAIN and profiling; BUILD/benchstack/env says
# where), --stop stops such a kept stack.
#
# Environment: BENCH_BUILD_DIR (default build-bench), BENCH_SEED (default
# comb-bench-1), BENCH_OUT (where plans and logs go; default
# BUILD/bench-out), BENCH_ENFORCE=1 to exit 1 when a target is missed
# (by default only a wrong answer fails), BENCH_PG_SETTINGS (extra
# PostgreSQL settings, see below), BENCH_REVISION_CACHE_MB (the relays'
# COMB_REVISION_CACHE_MB; 0 runs every scenario without the cache),
# BENCH_REVISION_CACHE_WARM_MB (the relays' COMB_REVISION_CACHE_WARM_MB; 0
# starts them without the warm of their cache), JOBS.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/servers.sh
. "$root/scripts/servers.sh"

mode=full
only=""
keep=0
stop_only=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick ;;
	--migration) mode=migration ;;
	--keep) keep=1 ;;
	--stop) stop_only=1 ;;
	--only)
		only=$2
		shift
		;;
	*)
		echo "usage: $0 [--quick] [--only SCENARIO[,...]] [--keep] | --migration [--keep] | --stop" >&2
		exit 2
		;;
	esac
	shift
done

build=${BENCH_BUILD_DIR:-build-bench}
case $build in
/*) ;;
*) build="$root/$build" ;;
esac
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
stack="$build/benchstack"
out=${BENCH_OUT:-$build/bench-out}

log() {
	printf 'bench: %s\n' "$*" >&2
}

# PostgreSQL settings for this machine (2 cores, about 23 GB of memory,
# SSD). Durability stays as in production: fsync and synchronous_commit
# on. jit off: JIT compilation adds tens of milliseconds to the first
# execution of queries the planner thinks expensive, which short reads
# never recover. auto_explain is loaded in every session but stays off
# (log_min_duration -1) until run.mjs turns it on to capture the plans of
# the relay's own queries with their real parameters.
pg_settings=(
	"shared_buffers = '1GB'"
	"effective_cache_size = '8GB'"
	"work_mem = '32MB'"
	"maintenance_work_mem = '512MB'"
	"max_wal_size = '4GB'"
	"min_wal_size = '1GB'"
	"checkpoint_timeout = '15min'"
	"random_page_cost = 1.1"
	"effective_io_concurrency = 200"
	"jit = off"
	"track_io_timing = on"
	"synchronous_commit = on"
	"fsync = on"
	"pg_stat_statements.max = 2000"
	"session_preload_libraries = 'auto_explain'"
)

# Extra settings for experiments, ';'-separated, e.g.
# BENCH_PG_SETTINGS="synchronous_commit = off".
if [ -n "${BENCH_PG_SETTINGS:-}" ]; then
	IFS=';' read -ra extra <<<"$BENCH_PG_SETTINGS"
	pg_settings+=("${extra[@]}")
fi

pg_dir=""
redis_dir="$stack/redis"

# Stops the servers (unless the run asked to keep them) and keeps the
# PostgreSQL log beside the results.
stop_stack() {
	if [ "$keep" = 1 ]; then
		log "stack kept: $(tr '\n' ' ' <"$stack/env" 2>/dev/null)- stop it with $0 --stop"
		return
	fi
	if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
		comb_pg_stop "$pg_dir" || true
		if [ -f "$pg_dir/server.log" ]; then
			cp "$pg_dir/server.log" "$out/postgres.log"
		fi
		rm -rf "$pg_dir"
		case $pg_dir in
		/tmp/comb-benchstack-pg.*/data) rmdir "$(dirname "$pg_dir")" 2>/dev/null || true ;;
		esac
	fi
	comb_redis_stop "$redis_dir" || true
	rm -f "$stack/pg" "$stack/env"
}

mkdir -p "$stack" "$out"
stack=$(cd "$stack" && pwd -P)
redis_dir="$stack/redis"
# A stack an earlier run kept (--keep) is stopped first.
if [ -e "$stack/pg" ]; then
	pg_dir=$(readlink -f "$stack/pg")
fi
keep_wanted=$keep
keep=0
stop_stack
keep=$keep_wanted
pg_dir=""
if [ "$stop_only" = 1 ]; then
	log "stopped"
	exit 0
fi

log "building Release binaries in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null
cmake -S tests/bench -B "$build/bench-tools" -DCMAKE_BUILD_TYPE=Release \
	-DCOMB_WERROR=ON >/dev/null
cmake --build "$build/bench-tools" -j"$jobs" >/dev/null

# Thousands of connections need as many descriptors on both ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

trap stop_stack EXIT
rm -rf "$stack/pg" "$stack/logs"
mkdir -p "$stack/logs"
pg_dir="$stack/pg"
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$stack"; then
	pg_dir=$(mktemp -d /tmp/comb-benchstack-pg.XXXXXX)
	chmod 755 "$pg_dir"
	pg_dir="$pg_dir/data"
	ln -s "$pg_dir" "$stack/pg"
fi

pgport=$(comb_free_port)
log "starting PostgreSQL on 127.0.0.1:$pgport"
comb_pg_start "$pg_dir" "$pgport" 1
for s in "${pg_settings[@]}"; do
	comb_pg_psql "$pgport" postgres -c "ALTER SYSTEM SET $s"
done
comb_pg_stop "$pg_dir"
comb_pg_start "$pg_dir" "$pgport" 1
redisport=$(comb_free_port)
comb_redis_start "$redis_dir" "$redisport" 0
printf '%s\n' "${pg_settings[@]}" >"$out/postgresql-settings.txt"
cat >"$stack/env" <<EOF
PGHOST=127.0.0.1
PGPORT=$pgport
PGUSER=postgres
PGDATABASE=comb_bench
COMB_REDIS_URL=redis://127.0.0.1:$redisport/0
EOF

set +e
if [ "$mode" = migration ]; then
	log "running the online migration test (result on stdout)"
	BENCH_PGPORT=$pgport BENCH_BUILD_DIR="$build" BENCH_OUT="$out" \
		node tests/bench/migration.mjs
	exit $?
fi
log "running the $mode benchmark (results on stdout, one JSON object per scenario)"
BENCH_PGPORT=$pgport \
BENCH_PG_LOG="$pg_dir/server.log" \
BENCH_REDIS_URL="redis://127.0.0.1:$redisport/0" \
BENCH_BUILD_DIR="$build" \
BENCH_OUT="$out" \
BENCH_STACK="$stack" \
	node tests/bench/run.mjs --mode "$mode" ${only:+--only "$only"}
status=$?
set -e
exit "$status"
