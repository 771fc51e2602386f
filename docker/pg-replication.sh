#!/bin/sh
# Run once by the postgres image when it creates its cluster
# (/docker-entrypoint-initdb.d): the comb user may also connect for
# replication, so that compose.yaml's postgres-standby can stream from the
# primary (the image's own pg_hba.conf admits only ordinary connections).
set -eu
echo "host replication all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
