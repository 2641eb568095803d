#!/bin/sh
# Create the cluster in the data volume on first start (user POSTGRES_USER with POSTGRES_PASSWORD, database
# POSTGRES_DB, password logins from other hosts), then run the server in the foreground.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (see .env.example)}"
    user="${POSTGRES_USER:-rcb}"
    pwfile="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "CREATE DATABASE \"${POSTGRES_DB:-rcb}\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
    echo "created the database cluster in $PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
