#!/usr/bin/env bash
#
# `make soak`: the long reliability runs of docs/reliability.md. Builds
# comb (RelWithDebInfo, in $BUILD_DIR, default build/), starts a private
# PostgreSQL and Redis under $BUILD_DIR/soakstack (scripts/test-stack.sh;
# the checker restarts them, so they are never shared), runs
# tests/soak/soak.mjs and always stops the servers again.
#
# usage: [SEED=N] [DURATION=seconds] [SOAK_PARTS=load,checker,histories]
#        [SOAK_SYNCS=2000] [SOAK_RATE=10] scripts/soak.sh
#
# DURATION applies to each part (default 600 s). A failure prints its seed;
# the full report lands in $BUILD_DIR/soak-report.json.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-build}
case $build in
/*) ;;
*) build="$root/$build" ;;
esac
stack="$build/soakstack"
# shellcheck source=scripts/node-env.sh
. "$here/node-env.sh"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"${JOBS:-$(nproc 2>/dev/null || echo 2)}"
if [ ! -d "$root/node_modules/ws" ]; then
	(cd "$root" && npm ci --no-audit --no-fund)
fi

# Every sync is a socket on both ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

trap 'COMB_BUILD_DIR="$build" "$here/test-stack.sh" stop "$stack" >/dev/null || true' EXIT
COMB_BUILD_DIR="$build" "$here/test-stack.sh" start "$stack"

cd "$root"
COMB_BUILD_DIR="$build" COMB_TEST_STACK="$stack" COMB_SOURCE_DIR="$root" \
	COMB_E2E_LOG_LEVEL="${COMB_E2E_LOG_LEVEL:-warn}" \
	SOAK_REPORT="${SOAK_REPORT:-$build/soak-report.json}" \
	node tests/soak/soak.mjs
