#!/bin/sh
# Entry point of the postgres stand-in (postgres.Dockerfile): on first
# start, a cluster in $PGDATA whose superuser POSTGRES_USER has the
# password POSTGRES_PASSWORD, and the database POSTGRES_DB; then the
# command, as the postgres user, listening on every address.
set -eu

as_postgres() {
	setpriv --reuid=postgres --regid=postgres --init-groups "$@"
}

if [ "${1:-}" = postgres ]; then
	shift
	mkdir -p "$PGDATA"
	chown postgres:postgres "$PGDATA"
	chmod 700 "$PGDATA"
	if [ ! -s "$PGDATA/PG_VERSION" ]; then
		printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/pwfile
		chown postgres /tmp/pwfile
		as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile \
			--auth-local=trust --auth-host=scram-sha-256 >/dev/null
		rm /tmp/pwfile
		echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
		# as the official image with compose.yaml's docker/pg-replication.sh
		echo "host replication all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
		echo "CREATE DATABASE \"$POSTGRES_DB\"" |
			as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
	fi
	exec setpriv --reuid=postgres --regid=postgres --init-groups \
		postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
