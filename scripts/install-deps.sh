#!/usr/bin/env bash
#
# Installs what building, running and testing comb needs on Debian 12: the
# Debian packages below (only those missing, so a ready machine makes no
# network call and needs no root), Node.js 20 into .tools/node when the
# system's node is older than 20.19 (Debian 12's is 18.20), then the npm
# packages of package.json into ./node_modules when that folder is missing.
# Used by `make deps`, `make run` and .ci/run.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/node-env.sh
. scripts/node-env.sh

packages=(
	build-essential cmake pkg-config clang libclang-rt-14-dev
	dpkg-dev patch libpq-dev postgresql-15 libhiredis-dev redis-server
	libzmq3-dev libmsgpack-dev libsecp256k1-dev libjansson-dev libcmocka-dev
	libssl-dev python3-yaml iproute2 procps ca-certificates
	# the task board's browser tests: playwright-core drives /usr/bin/chromium
	chromium
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	if [ "$status" != "install ok installed" ]; then
		missing+=("$p")
	fi
done
# Node may come from Debian (nodejs + npm), from a vendor package that
# bundles npm, which conflicts with Debian's npm, or from .tools/node (which
# has no npm): ask for commands, not names.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The build downloads Debian's civetweb source from where apt finds the
# civetweb package (shared/civetweb/CMakeLists.txt): that needs the
# package lists.
if ! apt-get download --print-uris civetweb >/dev/null 2>&1; then
	echo "install-deps: apt-get update (package lists for civetweb's source)"
	"${sudo[@]}" apt-get update -q
fi

# Debian's postgresql-15 starts a system cluster on port 5432; comb never
# uses it (make run and the tests start private servers), so it is left as is.

# The npm registry's node-linux-<arch> package holds the official build.
if ! comb_node_ok; then
	case $(uname -m) in
	x86_64) arch=x64 ;;
	aarch64) arch=arm64 ;;
	*)
		echo "install-deps: no Node.js build for $(uname -m); install Node $COMB_NODE_MIN or newer" >&2
		exit 1
		;;
	esac
	echo "install-deps: node $(node -p process.versions.node 2>/dev/null || echo '(none)') is older than $COMB_NODE_MIN; fetching node-linux-$arch@^$COMB_NODE_MIN into .tools/node"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && npm pack --loglevel=error "node-linux-$arch@^$COMB_NODE_MIN" >/dev/null)
	mkdir "$tmp/node"
	tar -xzf "$tmp"/node-linux-*.tgz -C "$tmp/node" --strip-components=1 --no-same-owner
	rm -rf "$COMB_NODE_DIR"
	mkdir -p "$(dirname "$COMB_NODE_DIR")"
	mv "$tmp/node" "$COMB_NODE_DIR"
	if ! comb_node_ok; then
		echo "install-deps: $COMB_NODE_DIR/bin/node does not run" >&2
		exit 1
	fi
fi
echo "install-deps: node $(node -p process.versions.node) ($(command -v node))"

if [ ! -d node_modules ]; then
	if [ -f package-lock.json ]; then
		echo "install-deps: npm ci"
		npm ci --no-audit --no-fund
	else
		echo "install-deps: npm install"
		npm install --no-audit --no-fund
	fi
fi
echo "install-deps: everything is installed"
