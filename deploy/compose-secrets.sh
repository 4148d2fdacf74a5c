#!/usr/bin/env bash
# Makes what deploy/docker-compose.yml reads and nothing in git holds, once; a file that exists
# is kept (re-running is safe and changes nothing):
#   SECRETS_DIR/postgres_password  a random PostgreSQL password (0600)
#   SECRETS_DIR/pgpass             the same password as a libpq password file (0600), for the
#                                  vault's --db postgresql://...?passfile=/run/secrets/pgpass
#   SECRETS_DIR/tls/               a private CA and the server certificate (deploy/make-certs.sh;
#                                  names: localhost 127.0.0.1 vault-1 vault-2 vault, plus NAMEs)
#   SECRETS_DIR/log.key            the transparency log's Ed25519 signing key (0600), in the
#                                  format of `fairvault-server log-key`; origin fairvault/ledger
#   SECRETS_DIR/log.pub            its verifier key, to publish to companies and auditors
#   ENV_FILE                       FAIRVAULT_UID / FAIRVAULT_GID: the user the vault containers
#                                  run as, the owner of SECRETS_DIR
# Usage: deploy/compose-secrets.sh [--secrets-dir DIR] [--env-file FILE] [NAME ...]
#   defaults: deploy/secrets and deploy/.env (where docker-compose looks for them)
#   NAME: extra host names or IP addresses for the server certificate (the names clients use)
# Run as root, it gives the files to uid/gid 10001 (the image's `fairvault` user) instead of root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
secrets="$here/secrets"
env_file="$here/.env"
names=()
while (($# > 0)); do
  case $1 in
    --secrets-dir) secrets=$2; shift 2 ;;
    --env-file) env_file=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compose-secrets: unknown flag $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done

umask 077
mkdir -p "$secrets"
chmod 0700 "$secrets"

if [[ ! -e $secrets/postgres_password ]]; then
  # Hex: nothing to escape in the libpq password file.
  openssl rand -hex 32 > "$secrets/postgres_password.new"
  mv -n "$secrets/postgres_password.new" "$secrets/postgres_password"
  echo "compose-secrets: wrote $secrets/postgres_password"
fi
if [[ ! -e $secrets/pgpass ]]; then
  # host:port:database:user:password (libpq's format; wildcards for host and port).
  printf '*:*:fairvault:fairvault:%s\n' "$(tr -d '\n' < "$secrets/postgres_password")" \
    > "$secrets/pgpass.new"
  mv -n "$secrets/pgpass.new" "$secrets/pgpass"
  echo "compose-secrets: wrote $secrets/pgpass"
fi
if [[ ! -e $secrets/log.key ]]; then
  # The key `fairvault-server log-key` would make, with OpenSSL (no vault binary on the host):
  # "PRIVATE+KEY+<origin>+<hex key hash>+<base64(0x01 || seed)>", the key hash being the first
  # 4 bytes of SHA-256(<origin> "\n" 0x01 <public key>) (Go's sumdb/note format).
  origin=fairvault/ledger
  tmp=$(mktemp -d)
  openssl genpkey -algorithm ed25519 -outform DER -out "$tmp/key.der"
  tail -c 32 "$tmp/key.der" > "$tmp/seed"  # PKCS#8: the 32-byte seed comes last
  openssl pkey -inform DER -in "$tmp/key.der" -pubout -outform DER | tail -c 32 > "$tmp/pub"
  hash=$({ printf '%s\n\001' "$origin"; cat "$tmp/pub"; } | openssl dgst -sha256 -binary |
    head -c 4 | od -An -tx1 | tr -d ' \n')
  printf 'PRIVATE+KEY+%s+%s+%s\n' "$origin" "$hash" \
    "$({ printf '\001'; cat "$tmp/seed"; } | base64 -w0)" > "$secrets/log.key.new"
  printf '%s+%s+%s\n' "$origin" "$hash" "$({ printf '\001'; cat "$tmp/pub"; } | base64 -w0)" \
    > "$secrets/log.pub"
  rm -rf "$tmp"
  mv -n "$secrets/log.key.new" "$secrets/log.key"
  chmod 0644 "$secrets/log.pub"
  echo "compose-secrets: wrote $secrets/log.key; publish its verifier key: $(cat "$secrets/log.pub")"
fi
if [[ ! -e $secrets/tls/ca.pem ]]; then
  "$here/make-certs.sh" "$secrets/tls" localhost 127.0.0.1 vault-1 vault-2 vault ${names[@]+"${names[@]}"}
fi

uid=$(id -u)
gid=$(id -g)
if ((uid == 0)); then
  # Not root in the containers: the image's own user, which must then own the files.
  uid=10001
  gid=10001
  chown -R "$uid:$gid" "$secrets"
fi
if [[ ! -e $env_file ]]; then
  printf '# Written by deploy/compose-secrets.sh: the user the vault containers run as.\nFAIRVAULT_UID=%s\nFAIRVAULT_GID=%s\n' \
    "$uid" "$gid" > "$env_file"
  chmod 0644 "$env_file"
  echo "compose-secrets: wrote $env_file (containers run as $uid:$gid)"
fi
echo "compose-secrets: $secrets is ready. Keep $secrets/tls/ca.key offline once you are done" \
  "making certificates; clients need only $secrets/tls/ca.pem."
