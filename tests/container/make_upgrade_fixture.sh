#!/usr/bin/env bash
# Writes tests/testdata/upgrade/: a small vault as a fairvault-server release leaves it on
# PostgreSQL (a plain pg_dump of the database), the API keys of its accounts, and what the CLI
# printed for its releases; the container test restores it under the new image's replicas and
# checks that they serve it (docs/operations.md, "Upgrading the compose stack"). Run it with the
# release's build before a change of the PostgreSQL schema, and commit the result.
# Usage: tests/container/make_upgrade_fixture.sh [BUILD_DIR]   (default: build)
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build=$(cd "${1:-$root/build}" && pwd)
out="$root/tests/testdata/upgrade"
server="$build/server/fairvault-server"
fv="$build/client/fairvault"
pgbin=/usr/lib/postgresql/15/bin  # Debian 12's, as in deploy/postgres/
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then as_postgres=(runuser -u postgres --); fi

tmp=$(mktemp -d /tmp/fvupgrade.XXXXXX)
chmod 0755 "$tmp"
mkdir "$tmp/pg" "$tmp/socket"
if [[ $(id -u) -eq 0 ]]; then chown postgres "$tmp/pg" "$tmp/socket"; fi
cleanup() {
  if [[ -n ${server_pid:-} ]]; then
    { kill "$server_pid" && wait "$server_pid"; } 2> /dev/null || true
  fi
  "${as_postgres[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -m fast -w stop > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"${as_postgres[@]}" "$pgbin/initdb" -D "$tmp/pg" -U fairvault --auth=trust > /dev/null
"${as_postgres[@]}" "$pgbin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg/log" -w \
  -o "-c listen_addresses='' -c unix_socket_directories=$tmp/socket" start > /dev/null
"${as_postgres[@]}" "$pgbin/createdb" -h "$tmp/socket" -U fairvault fairvault
db="postgresql://fairvault@/fairvault?host=$tmp/socket"

# Made in $tmp/out, moved over the committed fixture only once complete.
final=$out
out="$tmp/out"
mkdir -p "$out"
"$server" bootstrap --db "$db" --name regulator > "$out/regulator.key"
"$server" serve --db "$db" --listen 127.0.0.1:0 > "$tmp/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  grep -q "listening on port" "$tmp/server.out" && break
  sleep 0.1
done
export FAIRVAULT_SERVER="127.0.0.1:$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/server.out")"
reg=(--key-file "$out/regulator.key")

# 400 synthetic subjects: sex alternates, the company's prediction is right on 3 rows of 4.
awk 'BEGIN { print "key,sex,prediction,label";
  for (i = 0; i < 400; i++) printf "s%04d,%s,%d,%d\n", i, (i % 2 ? "M" : "F"), (i % 4 == 0) != (i % 3 == 0), i % 3 == 0 }' \
  > "$tmp/people.csv"
fv() { "$fv" "$@"; }
fv "${reg[@]}" dataset create --name pop --attribute sex=F,M > /dev/null
fv "${reg[@]}" import --dataset pop --csv "$tmp/people.csv" --key-column key --attributes sex > /dev/null
fv "${reg[@]}" account create --name acme --role company > "$out/acme.key"
fv "${reg[@]}" account create --name watchdog --role auditor > "$out/watchdog.key"
fv "${reg[@]}" grant --company acme --dataset pop --epsilon 5 > /dev/null
acme=(--key-file "$out/acme.key")
handle=$(fv "${acme[@]}" table upload --dataset pop --csv "$tmp/people.csv" --key-column key \
  --numeric prediction,label)
echo "$handle" > "$out/table.handle"
fv "${acme[@]}" counts --table "$handle" --columns prediction,label --attributes sex \
  --epsilon 0.5 --idempotency-key upgrade-counts > "$out/counts.txt"
fv "${acme[@]}" postprocess eo --table "$handle" --prediction-column prediction \
  --label-column label --attributes sex --epsilon 1 --gamma 0.01 \
  --idempotency-key upgrade-eo --out "$out/eo_artifact.json" > /dev/null
fv --key-file "$out/watchdog.key" auditor verify > "$out/verify.txt"
"${as_postgres[@]}" "$pgbin/pg_dump" -h "$tmp/socket" -U fairvault --no-owner --no-privileges fairvault \
  > "$out/vault.sql"
git -C "$root" rev-parse --short HEAD > "$out/written_by_commit"
rm -rf "$final" && mkdir -p "$(dirname "$final")" && cp -r "$out" "$final"
echo "make_upgrade_fixture: wrote $final ($(wc -c < "$final/vault.sql") bytes of SQL)"
