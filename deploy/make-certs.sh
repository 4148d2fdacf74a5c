#!/usr/bin/env bash
# Makes a private certificate authority and a server certificate signed by it, for the vault's
# TLS: `fairvault-server serve --tls-cert OUTDIR/server.pem --tls-key OUTDIR/server.key`, and
# clients trust OUTDIR/ca.pem (`fairvault --tls-ca OUTDIR/ca.pem ...`).
#
# Usage: deploy/make-certs.sh OUTDIR [NAME ...]
#   NAME: a host name or an IP address the clients will connect to, written into the server
#   certificate's subjectAltName (IP addresses as IP entries). Default: localhost 127.0.0.1
#   vault-1 vault-2 vault (the docker-compose service names, and loopback for health probes).
#
# Writes, with openssl (EC P-256 keys, SHA-256):
#   OUTDIR/ca.key      the CA's private key (0600): keep it offline, it can mint server certs
#   OUTDIR/ca.pem      the CA certificate, valid 10 years: give it to clients (--tls-ca)
#   OUTDIR/server.key  the server's private key (0600)
#   OUTDIR/server.pem  the server certificate, valid 825 days, for the NAMEs
# Refuses (exit 1, nothing written) when any of these files exists: a new CA would invalidate
# every client's --tls-ca. To renew, make a new OUTDIR and hand out its ca.pem.
set -euo pipefail

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then usage; exit 0; fi
done
if (($# < 1)) || [[ $1 == -* ]]; then
  usage >&2
  exit 2
fi
out=$1
shift
names=("$@")
if ((${#names[@]} == 0)); then names=(localhost 127.0.0.1 vault-1 vault-2 vault); fi

san=""
for name in "${names[@]}"; do
  if [[ $name =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ || $name == *:* ]]; then
    entry="IP:$name"
  elif [[ $name =~ ^[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
    entry="DNS:$name"
  else
    echo "make-certs: '$name' is neither a host name nor an IP address" >&2
    exit 2
  fi
  san="${san:+$san,}$entry"
done

for f in ca.key ca.pem server.key server.pem; do
  if [[ -e $out/$f ]]; then
    echo "make-certs: $out/$f exists; refusing to overwrite a CA or certificate (use a new OUTDIR)" >&2
    exit 1
  fi
done

umask 077
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Everything goes to $work first, so that a failure leaves OUTDIR untouched.
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
  -days 3650 -subj "/CN=fairvault private CA" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>"$work/log" || { cat "$work/log" >&2; exit 1; }

openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
  -subj "/CN=${names[0]}" -keyout "$work/server.key" -out "$work/server.csr" \
  2>"$work/log" || { cat "$work/log" >&2; exit 1; }

cat > "$work/server.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$san
EOF
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 825 -sha256 -extfile "$work/server.ext" -out "$work/server.pem" \
  2>"$work/log" || { cat "$work/log" >&2; exit 1; }
openssl verify -CAfile "$work/ca.pem" "$work/server.pem" >/dev/null

chmod 0600 "$work/ca.key" "$work/server.key"
chmod 0644 "$work/ca.pem" "$work/server.pem"
for f in ca.key ca.pem server.key server.pem; do
  # -n: never replace a file that appeared meanwhile.
  mv -n "$work/$f" "$out/$f"
done
echo "make-certs: wrote $out/{ca.key,ca.pem,server.key,server.pem}; server names: $san"
