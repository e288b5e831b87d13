#!/bin/bash
# The server, its cluster made at the first start: user POSTGRES_USER with POSTGRES_PASSWORD (SCRAM) owning the
# databases in POSTGRES_DATABASES. The password reaches initdb in a file, never on a command line.
set -euo pipefail
: "${POSTGRES_USER:?}" "${POSTGRES_DATABASES:?}"
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  : "${POSTGRES_PASSWORD:?the first start sets the password}"
  umask 077
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  pg_ctl -w -o "-c listen_addresses=''" start >/dev/null
  for db in $POSTGRES_DATABASES; do
    PGPASSWORD=$POSTGRES_PASSWORD psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" -d postgres -qc "CREATE DATABASE \"$db\""
  done
  pg_ctl -w stop >/dev/null
  echo "cluster made in $PGDATA: databases $POSTGRES_DATABASES"
fi
unset POSTGRES_PASSWORD
exec postgres -c listen_addresses='*' "$@"
