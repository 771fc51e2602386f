#!/bin/sh
# Entry point of compose.yaml's postgres-standby (docs/operations.md, "Read
# standbys"): a PostgreSQL streaming standby of PRIMARY_HOST. On first
# start it copies the primary with pg_basebackup -R (which also makes it
# stream from it), retrying while the primary is not up yet; then it runs
# as a hot standby, with the arguments given (compose's command) added.
# PGPASSWORD is the primary's password, kept in the environment, where
# the standby's WAL receiver finds it too. It runs in the official
# postgres image and in the test stand-in (docker/test/postgres.Dockerfile).
set -eu

data=${PGDATA:-/var/lib/postgresql/data}

as_postgres() {
	setpriv --reuid=postgres --regid=postgres --init-groups "$@"
}

mkdir -p "$data"
chown postgres:postgres "$data"
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
	# connect_timeout lands in primary_conninfo (-R): a replication
	# connection that cannot be made is retried instead of hanging.
	until as_postgres pg_basebackup \
		-d "host=$PRIMARY_HOST user=$PRIMARY_USER connect_timeout=5" \
		-D "$data" -R -X stream -c fast; do
		echo "pg-standby: waiting for the primary at $PRIMARY_HOST"
		find "$data" -mindepth 1 -delete
		sleep 2
	done
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups \
	postgres -D "$data" -c listen_addresses='*' -c hot_standby=on \
	-c hot_standby_feedback=on -c max_standby_streaming_delay=5s "$@"
