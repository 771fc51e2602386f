# comb developer entry points. The build itself is CMake; this file only
# names the usual ways to drive it.
#
#   make build   Release-with-debug-info build in build/ (binaries in build/bin)
#   make run     install what is missing, build, start a local stack (scripts/run.sh)
#   make test    install what is missing, sanitizer + -Werror build in
#                build-test/, then every CTest entry
#   make fuzz    clang libFuzzer build in build-fuzz/, each target FUZZ_SECONDS
#   make lint    refuse banned C functions (scripts/checksrc.sh), includes
#                that break the layers of services/ (scripts/checklayers.sh)
#                and circles of calls between files or folders
#                (scripts/checkcircles.py)
#   make soak    long runs: 2,000 syncs under load, then the convergence
#                checker with faults over several seeds, DURATION seconds
#                each (default 600), SEED to repeat them; SOAK_PARTS adds
#                `histories`, many short fault-free histories
#                (scripts/soak.sh, docs/reliability.md)
#   make bench   Release build in build-bench/, every benchmark at the
#                reference scale (scripts/bench.sh, docs/benchmarks.md)
#   make bench-quick  the same at 1/10 scale, in under two minutes
#   make compose-test  start compose.yaml with podman, write, sync and fail
#                capture over through it, then remove it (scripts/compose-test.sh)
#   make deps    install the Debian and npm packages (scripts/install-deps.sh)
#   make clean   remove the build trees (keeps var/ and node_modules/)

BUILD_DIR ?= build
TEST_BUILD_DIR ?= build-test
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 30
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS ?= 2

export BUILD_DIR FUZZ_BUILD_DIR FUZZ_SECONDS JOBS

# The Node.js scripts/install-deps.sh unpacks when the system's is too old
# comes first, as in scripts/node-env.sh and tests/e2e/tests.cmake.
export PATH := $(CURDIR)/.tools/node/bin:$(PATH)

.PHONY: all build run test fuzz lint soak deps clean distclean bench bench-quick compose-test

all: build

build:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD_DIR) -j$(JOBS)

run:
	scripts/run.sh

# The end-to-end tests import nostr-tools and ws from node_modules.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

test: deps node_modules/.package-lock.json
	cmake -S . -B $(TEST_BUILD_DIR) -DCMAKE_BUILD_TYPE=Debug \
		-DCOMB_SANITIZE=ON -DCOMB_WERROR=ON
	cmake --build $(TEST_BUILD_DIR) -j$(JOBS)
	ctest --test-dir $(TEST_BUILD_DIR) --output-on-failure -j$(CTEST_JOBS)

fuzz:
	scripts/fuzz.sh

lint:
	scripts/checksrc.sh
	scripts/checklayers.sh
	scripts/checkcircles.py

soak: node_modules/.package-lock.json
	SEED=$(SEED) DURATION=$(DURATION) scripts/soak.sh

bench:
	@scripts/bench.sh

bench-quick:
	@scripts/bench.sh --quick

compose-test: node_modules/.package-lock.json
	scripts/compose-test.sh

deps:
	scripts/install-deps.sh

clean:
	rm -rf $(BUILD_DIR) $(TEST_BUILD_DIR) $(FUZZ_BUILD_DIR)

# Also forgets the local stack's data, the npm packages and .tools/node.
distclean: clean
	rm -rf var node_modules .tools
