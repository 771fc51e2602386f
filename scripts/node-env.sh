# shellcheck shell=bash
#
# The Node.js every script, the Makefile and the CTest entries use: the one
# scripts/install-deps.sh unpacked into .tools/node when the system's node
# is missing or older than COMB_NODE_MIN (nostr-tools' cryptography needs
# 20.19), else the first node on PATH. Sourcing this file puts .tools/node/bin
# first on PATH; the Makefile does the same and tests/e2e/tests.cmake looks
# there first, so that all three agree.
#
# Functions:
#   comb_node_ok   status 0 when `node` runs and is COMB_NODE_MIN or newer

COMB_NODE_MIN=20.19.0
COMB_NODE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tools/node
case ":$PATH:" in
*":$COMB_NODE_DIR/bin:"*) ;;
*) PATH="$COMB_NODE_DIR/bin:$PATH" ;;
esac
export PATH

comb_node_ok() {
	local have
	have=$(node -p process.versions.node 2>/dev/null) || return 1
	[ "$(printf '%s\n%s\n' "$COMB_NODE_MIN" "$have" | sort -V | head -n 1)" = "$COMB_NODE_MIN" ]
}
