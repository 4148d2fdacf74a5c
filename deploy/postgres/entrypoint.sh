#!/bin/sh
# Entrypoint of deploy/postgres/Dockerfile. Runs as root: makes the data and socket directories
# the postgres user's, initialises an empty data directory once, then becomes the postgres user
# and runs the command (`postgres`, serving on every address of the container).
#
# First start only (no PG_VERSION in $PGDATA): initdb with the superuser POSTGRES_USER (default
# postgres), whose password is read from POSTGRES_PASSWORD_FILE (required); password
# authentication (scram-sha-256) over TCP from any address, trust on the container's own Unix
# socket (`docker exec ... pg_dump`); then the database POSTGRES_DB (default: the user's name),
# created by a server that listens on the socket only, so the compose health check over TCP
# never sees a half-initialised database.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"

as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }

if [ "$(id -u)" != 0 ]; then
  echo "fairvault-postgres: run the container as root (it becomes the postgres user)" >&2
  exit 1
fi
install -d -m 0700 -o postgres -g postgres "$PGDATA"
install -d -m 2775 -o postgres -g postgres /var/run/postgresql

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD_FILE:-}" ] || [ ! -s "$POSTGRES_PASSWORD_FILE" ]; then
    echo "fairvault-postgres: the data directory is empty and POSTGRES_PASSWORD_FILE names no" \
      "non-empty file; set it to the superuser's password file (compose: secrets)" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  chown postgres "$pwfile"
  chmod 0600 "$pwfile"
  head -n 1 "$POSTGRES_PASSWORD_FILE" > "$pwfile"
  as_postgres initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 > /dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start > /dev/null
    as_postgres psql -v ON_ERROR_STOP=1 --quiet --username "$user" --dbname postgres \
      --command "CREATE DATABASE \"$db\" OWNER \"$user\""
    as_postgres pg_ctl -D "$PGDATA" -m fast -w stop > /dev/null
  fi
  echo "fairvault-postgres: initialised $PGDATA (user $user, database $db)"
fi

exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
