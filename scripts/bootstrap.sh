#!/usr/bin/env bash
#
# Prepares a database and a state directory for a comb stack; shared by
# `make run` (state in ./var) and the compose file's one-shot `migrate`
# service (state in a volume), so both stacks start the same way:
#
#   1. comb-admin migrate (with --dir $COMB_MIGRATIONS_DIR when set);
#   2. STATE/relay.key: the relay's secret key (64 hex), generated once;
#   3. STATE/dev-owner.key and STATE/dev-owner.pub: the dev community
#      owner's key pair, generated once; the secret is printed that once;
#   4. the dev community bound to $COMB_DEV_HOSTS (default
#      "localhost 127.0.0.1"), created once per database: STATE/dev-community
#      remembers its id and $COMB_BOOTSTRAP_DB_ID (default COMB_DATABASE_URL),
#      the database it was created in.
#
# usage: scripts/bootstrap.sh STATE_DIR
# env:   COMB_DATABASE_URL (required), COMB_ADMIN (default comb-admin from
#        $BUILD_DIR/bin, else PATH), COMB_MIGRATIONS_DIR, COMB_DEV_HOSTS,
#        COMB_DEV_COMMUNITY_NAME, COMB_BOOTSTRAP_DB_ID
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 STATE_DIR" >&2
	exit 2
fi
state=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ -z "${COMB_DATABASE_URL:-}" ]; then
	echo "bootstrap: COMB_DATABASE_URL is not set" >&2
	exit 1
fi
admin=${COMB_ADMIN:-}
if [ -z "$admin" ]; then
	if [ -x "$root/${BUILD_DIR:-build}/bin/comb-admin" ]; then
		admin="$root/${BUILD_DIR:-build}/bin/comb-admin"
	else
		admin=$(command -v comb-admin || true)
	fi
fi
if [ -z "$admin" ] || [ ! -x "$admin" ]; then
	echo "bootstrap: comb-admin not found (run make build)" >&2
	exit 1
fi

mkdir -p "$state"
umask 077

migrate_args=(migrate)
if [ -n "${COMB_MIGRATIONS_DIR:-}" ]; then
	migrate_args+=(--dir "$COMB_MIGRATIONS_DIR")
fi
"$admin" "${migrate_args[@]}"

# Prints the secret (line 1) and public (line 2) key of a new key pair.
new_keypair() {
	local out
	out=$("$admin" key generate)
	if ! printf '%s\n' "$out" | sed -n 1p | grep -Eq '^[0-9a-f]{64}$' ||
	   ! printf '%s\n' "$out" | sed -n 2p | grep -Eq '^[0-9a-f]{64}$'; then
		echo "bootstrap: unexpected output from comb-admin key generate" >&2
		return 1
	fi
	printf '%s\n' "$out"
}

if [ ! -s "$state/relay.key" ]; then
	new_keypair | sed -n 1p >"$state/relay.key.tmp"
	mv "$state/relay.key.tmp" "$state/relay.key"
	echo "bootstrap: generated the relay key in $state/relay.key"
fi

if [ ! -s "$state/dev-owner.key" ] || [ ! -s "$state/dev-owner.pub" ]; then
	pair=$(new_keypair)
	printf '%s\n' "$pair" | sed -n 2p >"$state/dev-owner.pub"
	printf '%s\n' "$pair" | sed -n 1p >"$state/dev-owner.key.tmp"
	mv "$state/dev-owner.key.tmp" "$state/dev-owner.key"
	echo "bootstrap: dev community owner key generated (shown once, kept in $state/dev-owner.key)"
	echo "  owner pubkey: $(cat "$state/dev-owner.pub")"
	echo "  owner secret: $(cat "$state/dev-owner.key")"
fi
owner=$(cat "$state/dev-owner.pub")

db_id=${COMB_BOOTSTRAP_DB_ID:-$COMB_DATABASE_URL}
if [ -s "$state/dev-community" ] && [ "$(sed -n 2p "$state/dev-community")" = "$db_id" ]; then
	echo "bootstrap: dev community $(sed -n 1p "$state/dev-community") already exists"
	exit 0
fi

read -r -a hosts <<<"${COMB_DEV_HOSTS:-localhost 127.0.0.1}"
args=(community create --owner "$owner" --name "${COMB_DEV_COMMUNITY_NAME:-dev}")
for h in "${hosts[@]}"; do
	args+=(--host "$h")
done
if out=$("$admin" "${args[@]}" 2>"$state/community.err"); then
	id=$(printf '%s\n' "$out" | tail -n 1)
	printf '%s\n%s\n' "$id" "$db_id" >"$state/dev-community"
	rm -f "$state/community.err"
	echo "bootstrap: created dev community $id on ${hosts[*]}, owner $owner"
elif grep -qi 'already bound\|taken' "$state/community.err"; then
	# An earlier run whose state was lost created it: that community keeps
	# serving these hosts, and this state's owner key becomes one of its
	# admins, so that what make run does as the owner still works.
	echo "bootstrap: $(cat "$state/community.err")" >&2
	echo "bootstrap: keeping the community that holds ${hosts[*]}; adding $owner as its admin" >&2
	rm -f "$state/community.err"
	if ! "$admin" community add-admin --host "${hosts[0]}" "$owner" >/dev/null 2>"$state/community.err" &&
		! grep -qi 'already' "$state/community.err"; then
		echo "bootstrap: adding the admin failed:" >&2
		cat "$state/community.err" >&2
		rm -f "$state/community.err"
		exit 1
	fi
	rm -f "$state/community.err"
else
	echo "bootstrap: creating the dev community failed:" >&2
	cat "$state/community.err" >&2
	rm -f "$state/community.err"
	exit 1
fi
