#!/usr/bin/env bash
#
# `make fuzz`: builds the libFuzzer targets with clang (-DCOMB_FUZZ=ON, ASan
# and UBSan on) in $FUZZ_BUILD_DIR and runs each build-fuzz/bin/fuzz_<name>
# for $FUZZ_SECONDS seconds on a scratch copy of its seed corpus
# tests/fuzz/corpus/<name>/, so that the checked-in corpus never changes
# behind the developer's back. A crash leaves its input in
# $FUZZ_BUILD_DIR/artifacts/ and fails the run.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-30}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ ! -f tests/fuzz/CMakeLists.txt ]; then
	echo "fuzz: tests/fuzz/CMakeLists.txt is missing: no fuzz targets to run"
	exit 0
fi

CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCOMB_FUZZ=ON -DCOMB_SANITIZE=ON
cmake --build "$build" -j"$jobs"

shopt -s nullglob
targets=("$build"/bin/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no $build/bin/fuzz_* targets were built"
	exit 1
fi

mkdir -p "$build/artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

failed=()
for bin in "${targets[@]}"; do
	target=$(basename "$bin")
	name=${target#fuzz_}
	corpus="$scratch/$name"
	mkdir -p "$corpus"
	if [ -d "tests/fuzz/corpus/$name" ]; then
		cp -R "tests/fuzz/corpus/$name/." "$corpus/"
	fi
	echo "fuzz: $target for ${seconds}s on $(find "$corpus" -type f | wc -l) seed inputs"
	if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" \
		"$corpus" >"$build/$target.log" 2>&1; then
		echo "fuzz: $target FAILED; last lines of $build/$target.log:"
		tail -n 40 "$build/$target.log"
		failed+=("$target")
	else
		grep -E '^(stat::number_of_executed_units|Done )' "$build/$target.log" | tail -n 2 | sed 's/^/  /'
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${seconds}s each without a finding"
