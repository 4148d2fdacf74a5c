#!/usr/bin/env bash
# `fairvault health` against real fairvault-server processes, and deploy/make-certs.sh:
#  - plaintext: SERVING (exit 0, no API key), each service by name, an unknown service name
#    (exit 1, NOT_FOUND, names the known ones), --json, a stopped server (exit 1, UNAVAILABLE),
#    a listener that never answers (DEADLINE_EXCEEDED after the 5 s default, not 600 s);
#  - make-certs.sh: files, 0600 keys, subjectAltNames, refusal to overwrite a CA;
#  - TLS: SERVING with --tls-ca ca.pem by name and by IP; refused without the CA, with another
#    CA, and with a server name the certificate does not carry.
# Usage: health_probe_test.sh FAIRVAULT_SERVER_BINARY FAIRVAULT_CLI_BINARY
set -euo pipefail
server_bin=$1
fv=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
unset FAIRVAULT_API_KEY FAIRVAULT_SERVER

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# Runs the CLI; sets $code, $out (stdout) and $err (stderr).
run() {
  code=0
  "$fv" "$@" > "$work/out" 2> "$work/err" || code=$?
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}
expect() {  # expect CODE STDOUT-SUBSTRING STDERR-SUBSTRING DESCRIPTION (after run)
  if [[ $code != "$1" || $out != *"$2"* || $err != *"$3"* ]]; then
    fail "$4: exit $code (want $1); stdout '$out' (want '$2'); stderr '$err' (want '$3')"
  else
    echo "ok: $4"
  fi
}

# Starts `fairvault-server serve` on 127.0.0.1:0 with extra flags; sets $port and $pid.
start_server() {
  local name=$1
  shift
  "$server_bin" serve --db "$work/$name.db" --listen 127.0.0.1:0 "$@" \
    > "$work/$name.out" 2> "$work/$name.log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do  # up to 30 s: CI runs this beside other tests
    grep -q "listening on port" "$work/$name.out" 2>/dev/null && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/$name.out")
  if [[ -z $port ]]; then
    echo "server $name did not start:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
}

# ---- plaintext ----
start_server plain
plain_pid=$pid
run health --server "127.0.0.1:$port"
expect 0 SERVING "" "plaintext server as a whole is SERVING, without an API key"
[[ $out == SERVING ]] || fail "stdout is exactly 'SERVING' (got '$out')"
for service in fairvault.v1.RegulatorService fairvault.v1.CompanyService \
  fairvault.v1.AuditorService; do
  run health --server "127.0.0.1:$port" --service "$service"
  expect 0 SERVING "" "$service is SERVING"
done
run health --server "127.0.0.1:$port" --service no.such.Service
expect 1 "" "NOT_FOUND: 127.0.0.1:$port has no service 'no.such.Service'" \
  "an unknown service name fails with NOT_FOUND"
[[ $err == *fairvault.v1.CompanyService* ]] || fail "the NOT_FOUND message lists the known services"
[[ -z $out ]] || fail "nothing on stdout for an unknown service (got '$out')"
run --json health --server "127.0.0.1:$port"
expect 0 '"status": "SERVING"' "" "--json prints the response"
run health --server "127.0.0.1:$port" --bogus-flag x
expect 2 "" "unknown flag --bogus-flag" "a usage error exits 2"

kill -TERM "$plain_pid"
wait "$plain_pid" || true
run health --server "127.0.0.1:$port"
expect 1 "" "UNAVAILABLE" "a stopped server fails with UNAVAILABLE"

# A TCP listener that accepts and never speaks: the probe gives up after its 5 s default.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' > "$work/mute.port" &
pids+=("$!")
for _ in $(seq 50); do [[ -s $work/mute.port ]] && break; sleep 0.1; done
start=$SECONDS
run health --server "127.0.0.1:$(cat "$work/mute.port")"
expect 1 "" "DEADLINE_EXCEEDED" "a server that never answers times out"
((SECONDS - start <= 30)) || fail "the probe took $((SECONDS - start)) s (default deadline 5 s)"

# ---- make-certs.sh ----
certs="$work/certs"
"$root/deploy/make-certs.sh" "$certs" > "$work/make-certs.out"
for f in ca.key ca.pem server.key server.pem; do
  [[ -s $certs/$f ]] || fail "make-certs wrote $f"
done
for f in ca.key server.key; do
  mode=$(stat -c %a "$certs/$f")
  [[ $mode == 600 ]] && echo "ok: $f is 0600" || fail "$f has mode $mode, want 600"
done
san=$(openssl x509 -in "$certs/server.pem" -noout -ext subjectAltName)
for want in DNS:localhost "IP Address:127.0.0.1" DNS:vault-1 DNS:vault-2 DNS:vault; do
  [[ $san == *"$want"* ]] && echo "ok: SAN has $want" || fail "SAN lacks $want: $san"
done
openssl verify -CAfile "$certs/ca.pem" "$certs/server.pem" > /dev/null ||
  fail "server.pem verifies against ca.pem"
sum_before=$(cat "$certs"/* | sha256sum)
if "$root/deploy/make-certs.sh" "$certs" > /dev/null 2> "$work/again.err"; then
  fail "make-certs overwrote an existing CA"
else
  grep -q refusing "$work/again.err" && echo "ok: make-certs refuses an existing CA" ||
    fail "refusal message: $(cat "$work/again.err")"
fi
[[ $(cat "$certs"/* | sha256sum) == "$sum_before" ]] || fail "a refused run changed the files"
other="$work/other"
"$root/deploy/make-certs.sh" "$other" only.example > /dev/null
san=$(openssl x509 -in "$other/server.pem" -noout -ext subjectAltName)
[[ $san == *DNS:only.example* && $san != *localhost* ]] &&
  echo "ok: given names replace the defaults" || fail "names given: SAN is $san"

# ---- TLS ----
start_server tls --tls-cert "$certs/server.pem" --tls-key "$certs/server.key"
run health --server "localhost:$port" --tls-ca "$certs/ca.pem"
expect 0 SERVING "" "TLS: SERVING with the CA, by host name"
run health --server "127.0.0.1:$port" --tls-ca "$certs/ca.pem"
expect 0 SERVING "" "TLS: SERVING with the CA, by IP address"
run health --server "127.0.0.1:$port" --tls-ca "$certs/ca.pem" --tls-server-name vault-2
expect 0 SERVING "" "TLS: SERVING when checking the name vault-2"
run health --server "127.0.0.1:$port" --tls-ca "$certs/ca.pem" --tls-server-name evil.example
expect 1 "" "UNAVAILABLE" "TLS: a name not in the certificate is refused"
run health --server "localhost:$port"
expect 1 "" "UNAVAILABLE" "TLS: plaintext probe of a TLS server fails"
run health --server "localhost:$port" --tls-ca "$other/ca.pem"
expect 1 "" "UNAVAILABLE" "TLS: another CA is refused"
run health --server "localhost:$port" --tls-ca "$work/missing.pem"
expect 1 "" "missing.pem" "TLS: an unreadable CA file is named"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all health probe checks passed"
