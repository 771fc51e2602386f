#!/usr/bin/env bash
#
# Checks that the README's configuration table is exactly what
# `comb-admin config-table` prints from the code, so that the documented
# settings never drift from the real ones.
#
# usage: scripts/check-readme-config.sh BUILD_DIR
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
table=$("$1/bin/comb-admin" config-table)
if ! grep -qxF -- "$(printf '%s\n' "$table" | head -n 1)" "$root/README.md"; then
	echo "README.md has no configuration table" >&2
	exit 1
fi
missing=0
while IFS= read -r line; do
	if ! grep -qxF -- "$line" "$root/README.md"; then
		echo "README.md lacks: $line" >&2
		missing=1
	fi
done <<<"$table"
documented=$(grep -c '^| `COMB_' "$root/README.md")
actual=$(printf '%s\n' "$table" | grep -c '^| `COMB_')
if [ "$documented" != "$actual" ]; then
	echo "README.md documents $documented settings, the code has $actual" >&2
	missing=1
fi
exit "$missing"
