#!/bin/sh
# Entrypoint of deploy/postgres/Dockerfile. Runs as root: makes the data and socket directories
# the postgres user's, initialises an empty data directory once, then becomes the postgres user
# and runs the command (`postgres`, serving on every address of the container).
#
# First start only (no PG_VERSION in $PGDATA): initdb with the superuser POSTGRES_USER (default
# postgres), whose password is read from POSTGRES_PASSWORD_FILE (required); password
# authentication (scram-sha-256) over TCP from any address, trust on the container's own Unix
# socket (`docker exec ... pg_dump`); then the database POSTGRES_DB (default: the user's name),
# created by a server that listens on the socket only. All of it happens in a directory outside
# the volume, copied in at the end with PG_VERSION last: a start interrupted anywhere leaves no
# PG_VERSION in the volume, and the next start initialises again from scratch.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
staging=/var/lib/postgresql/initialising

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
  rm -rf "$staging"
  install -d -m 0700 -o postgres -g postgres "$staging" "$staging/data"
  pwfile="$staging/password"
  trap 'rm -f "$pwfile"' EXIT
  (umask 077 && head -n 1 "$POSTGRES_PASSWORD_FILE" > "$pwfile")
  chown postgres "$pwfile"
  as_postgres initdb -D "$staging/data" --username="$user" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 > /dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$staging/data/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$staging/data/postgresql.conf"
  if [ "$db" != postgres ]; then
    as_postgres pg_ctl -D "$staging/data" -o "-c listen_addresses=''" -w start > /dev/null
    as_postgres psql -v ON_ERROR_STOP=1 --quiet --username "$user" --dbname postgres \
      --command "CREATE DATABASE \"$db\" OWNER \"$user\""
    as_postgres pg_ctl -D "$staging/data" -m fast -w stop > /dev/null
  fi
  (cd "$staging/data" && tar --exclude=./PG_VERSION -cf - .) | tar -xpf - -C "$PGDATA"
  cp -p "$staging/data/PG_VERSION" "$PGDATA/PG_VERSION.new"
  mv "$PGDATA/PG_VERSION.new" "$PGDATA/PG_VERSION"
  rm -rf "$staging"
  echo "fairvault-postgres: initialised $PGDATA (user $user, database $db)"
fi

exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
