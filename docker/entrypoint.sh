#!/bin/sh
# Entry point of the comb images: finds the relay secret key, then runs the
# command (comb-relay, comb-capture, comb-admin, or scripts/bootstrap.sh).
# The key is COMB_RELAY_SECRET_KEY when set; otherwise the services read
# COMB_RELAY_SECRET_KEY_FILE, by default the key the `migrate` service
# generated once in the shared state volume (/var/lib/comb/relay.key).
set -eu

if [ -z "${COMB_RELAY_SECRET_KEY:-}" ]; then
	unset COMB_RELAY_SECRET_KEY
	: "${COMB_RELAY_SECRET_KEY_FILE:=/var/lib/comb/relay.key}"
	export COMB_RELAY_SECRET_KEY_FILE
fi

case "${1:-}" in
comb-relay)
	if [ -z "${COMB_RELAY_SECRET_KEY:-}" ] && [ ! -s "$COMB_RELAY_SECRET_KEY_FILE" ]; then
		echo "comb-entrypoint: no relay key: set COMB_RELAY_SECRET_KEY or run the migrate service first" >&2
		exit 1
	fi
	;;
esac

exec "$@"
