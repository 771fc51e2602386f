#!/bin/sh
# The compose file's one-shot `migrate` service: runs scripts/bootstrap.sh
# (schema, relay key, dev community; every step is idempotent) until it
# succeeds, so that a database still starting up, or restarting once
# after its first initialisation, only delays the stack.
#
# usage: migrate.sh STATE_DIR
# env:   COMB_MIGRATE_TIMEOUT seconds to keep trying (default 120), and
#        whatever scripts/bootstrap.sh reads
set -eu

deadline=$(($(date +%s) + ${COMB_MIGRATE_TIMEOUT:-120}))
until /opt/comb/scripts/bootstrap.sh "$@"; do
	if [ "$(date +%s)" -ge "$deadline" ]; then
		echo "migrate: giving up after ${COMB_MIGRATE_TIMEOUT:-120} s" >&2
		exit 1
	fi
	echo "migrate: bootstrap failed, trying again in 2 s" >&2
	sleep 2
done
