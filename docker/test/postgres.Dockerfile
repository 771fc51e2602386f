# Test stand-in for the official postgres:15 image, built from Debian's
# PostgreSQL 15 for `make compose-test` (Docker Hub is out of reach
# there). It takes what compose.yaml gives the official image: the
# POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB variables, data in
# /var/lib/postgresql/data, and `postgres -c ...` as the command.
FROM debian:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
EXPOSE 5432
ENTRYPOINT ["postgres-entrypoint"]
CMD ["postgres"]
