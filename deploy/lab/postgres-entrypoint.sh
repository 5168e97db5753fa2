#!/bin/sh
# Entry point of the lab's PostgreSQL image (Dockerfile.postgres). The first start makes
# the cluster in $PGDATA: superuser POSTGRES_USER with POSTGRES_PASSWORD, database
# POSTGRES_DB, password (SCRAM) logins from any address. Every start then runs the server
# in the foreground, listening on every address. Arguments go to `postgres`, after a
# leading `postgres` as the official image takes them (`postgres -c fsync=off`).
set -eu
[ "${1:-}" != postgres ] || shift
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
  echo "platter-postgres: POSTGRES_PASSWORD is not set (the superuser's password)" >&2
  exit 1
fi
export PGDATA
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "platter-postgres: no cluster in $PGDATA yet: making one (user $POSTGRES_USER, database $POSTGRES_DB)"
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    # Single-user mode: no server to start and stop for one statement.
    printf 'CREATE DATABASE "%s" OWNER "%s"\n' "$POSTGRES_DB" "$POSTGRES_USER" |
      postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp -c jit=off "$@"
