#!/usr/bin/env bash
# deploy/docker-compose.yml without a Docker engine: `docker-compose config` (Debian 12's
# docker-compose 1.29) must accept it with the secrets and .env that deploy/compose-secrets.sh
# makes (here in a temporary directory), and the rendered configuration must have the promised
# topology: postgres (volume, password from a secret file, pg_isready health check), the
# one-shot bootstrap, vault-1 and vault-2 (TLS, PostgreSQL, different host ports, health checks
# with `fairvault health`, started after postgres is healthy and bootstrap succeeded), and no
# literal password. Then the bootstrap service's own script runs against the real server
# binary (on SQLite): it writes the key once and never makes a second regulator key.
# Usage: compose_config_test.sh FAIRVAULT_SERVER_BINARY
# Exit 77 (skipped) when docker-compose is missing, unless FAIRVAULT_REQUIRE_DOCKER_COMPOSE=1
# (deploy/test.sh installs it and sets that).
set -euo pipefail
server_bin=$1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
compose_file="$root/deploy/docker-compose.yml"
if ! command -v docker-compose > /dev/null; then
  if [[ ${FAIRVAULT_REQUIRE_DOCKER_COMPOSE:-0} == 1 ]]; then
    echo "FAIL: docker-compose is not installed (apt-get install docker-compose)" >&2
    exit 1
  fi
  echo "SKIP: docker-compose is not installed" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset FAIRVAULT_UID FAIRVAULT_GID

# ---- the secrets script ----
"$root/deploy/compose-secrets.sh" --secrets-dir "$work/secrets" --env-file "$work/env" \
  > "$work/secrets.out"
for f in postgres_password pgpass tls/ca.pem tls/server.pem tls/server.key; do
  [[ -s $work/secrets/$f ]] || { echo "FAIL: compose-secrets.sh made no $f" >&2; exit 1; }
done
for f in postgres_password pgpass tls/server.key tls/ca.key log.key; do
  mode=$(stat -c %a "$work/secrets/$f")
  [[ $mode == 600 ]] || { echo "FAIL: $f has mode $mode, want 600" >&2; exit 1; }
done
password=$(cat "$work/secrets/postgres_password")
[[ $(cat "$work/secrets/pgpass") == "*:*:fairvault:fairvault:$password" ]] ||
  { echo "FAIL: pgpass does not carry postgres_password" >&2; exit 1; }
sum_before=$(find "$work/secrets" "$work/env" -type f -exec cat {} + | sha256sum)
"$root/deploy/compose-secrets.sh" --secrets-dir "$work/secrets" --env-file "$work/env" > /dev/null
[[ $(find "$work/secrets" "$work/env" -type f -exec cat {} + | sha256sum) == "$sum_before" ]] ||
  { echo "FAIL: a second compose-secrets.sh run changed a file" >&2; exit 1; }
echo "ok: compose-secrets.sh makes the secrets once (0600) and keeps them"
# The log key made with OpenSSL is one the server reads, and log.pub is its verifier key.
verifier=$("$server_bin" log-key --key "$work/secrets/log.key") ||
  { echo "FAIL: fairvault-server refuses the log key compose-secrets.sh made" >&2; exit 1; }
[[ $verifier == "$(cat "$work/secrets/log.pub")" && $verifier == fairvault/ledger+* ]] ||
  { echo "FAIL: log.pub ('$(cat "$work/secrets/log.pub")') is not the key's verifier key ('$verifier')" >&2; exit 1; }
echo "ok: compose-secrets.sh makes a log key the server reads, and its verifier key"

# ---- docker-compose config ----
: > "$work/empty.env"
if docker-compose --env-file "$work/empty.env" -f "$compose_file" config > /dev/null \
  2> "$work/noenv.err"; then
  echo "FAIL: config passed without FAIRVAULT_UID/GID" >&2
  exit 1
fi
grep -q "compose-secrets.sh" "$work/noenv.err" ||
  { echo "FAIL: the missing-.env error does not say what to run:" >&2; cat "$work/noenv.err" >&2; exit 1; }
echo "ok: without deploy/.env, config fails and names compose-secrets.sh"

docker-compose --env-file "$work/env" -f "$compose_file" config > "$work/config.yml"
echo "ok: docker-compose config accepts deploy/docker-compose.yml"
# The evidence for the issue's closing note.
echo "---- docker-compose config (rendered) ----"
cat "$work/config.yml"
echo "----"

/usr/bin/python3 - "$work/config.yml" "$work/env" "$password" "$work/bootstrap.sh" <<'EOF'
import re
import sys

import yaml

config_path, env_path, password, bootstrap_path = sys.argv[1:5]
text = open(config_path).read()
cfg = yaml.safe_load(text)
env = dict(l.split("=", 1) for l in open(env_path).read().split("\n") if "=" in l and not l.startswith("#"))
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


services = cfg["services"]
check(set(services) == {"postgres", "bootstrap", "vault-1", "vault-2"},
      f"services are postgres, bootstrap, vault-1, vault-2 (got {sorted(services)})")

# No literal password anywhere: not the generated one, no *PASSWORD*/SECRET/TOKEN variable
# with a value, no password in a connection URI.
check(password not in text, "the generated password does not appear in the rendered config")
for name, service in services.items():
    for var, value in (service.get("environment") or {}).items():
        if re.search(r"PASSWORD|PASSWD|SECRET|TOKEN|API_KEY", var) and not var.endswith("_FILE"):
            check(False, f"{name}: environment variable {var} carries a secret literally")
uris = re.findall(r"postgres(?:ql)?://[^\s\"']*", text)
check(uris and all(not re.match(r"postgres(?:ql)?://[^/@]*:[^/@]*@", u) for u in uris),
      f"connection URIs carry no password ({sorted(set(uris))})")
for sname, secret in cfg.get("secrets", {}).items():
    check(set(secret) == {"file"} and "/deploy/secrets/" in secret["file"],
          f"secret {sname} is a file under deploy/secrets/ ({secret})")

pg = services["postgres"]
check(pg["build"]["dockerfile"] == "deploy/postgres/Dockerfile"
      and "postgresql-15" in open(pg["build"]["context"] + "/deploy/postgres/Dockerfile").read(),
      f"postgres is Debian's PostgreSQL 15, built from deploy/postgres/ ({pg['build']})")
check(pg["environment"].get("POSTGRES_PASSWORD_FILE") == "/run/secrets/postgres_password"
      and "postgres_password" in [s["source"] for s in pg["secrets"]],
      "postgres reads its password from the postgres_password secret")
check(any(v.startswith("pgdata:/var/lib/postgresql/data") for v in pg["volumes"])
      and "pgdata" in cfg["volumes"], "postgres keeps its data in the named volume pgdata")
check("pg_isready" in pg["healthcheck"]["test"], "postgres has a pg_isready health check")

user = f"{env['FAIRVAULT_UID']}:{env['FAIRVAULT_GID']}"
boot = services["bootstrap"]
check(boot["depends_on"] == {"postgres": {"condition": "service_healthy"}},
      "bootstrap waits for a healthy postgres")
check(boot.get("restart") == "no", "bootstrap is not restarted")
check(any(v.endswith("/deploy/secrets:/secrets:rw") for v in boot["volumes"]),
      "bootstrap mounts deploy/secrets")
check(boot.get("user") == user, f"bootstrap runs as the owner of the secrets ({user})")
script = boot["command"][0].replace("$$", "$")
check("fairvault-server bootstrap" in script and "--name regulator" in script,
      "bootstrap runs fairvault-server bootstrap --name regulator")
check(boot["environment"]["FAIRVAULT_DB"].startswith("postgresql://"),
      "bootstrap creates the key in PostgreSQL")
open(bootstrap_path, "w").write(script)

ports = set()
for name in ("vault-1", "vault-2"):
    s = services[name]
    check(s["build"]["dockerfile"] == "deploy/Dockerfile" and s["image"] == boot["image"],
          f"{name} is built from deploy/Dockerfile, the bootstrap's image")
    cmd = s["command"]
    db = cmd[cmd.index("--db") + 1] if "--db" in cmd else ""
    check(cmd[0] == "serve" and db.startswith("postgresql://")
          and "passfile=/run/secrets/pgpass" in db,
          f"{name} serves from PostgreSQL with the password file ({db})")
    check("--tls-cert" in cmd and "--tls-key" in cmd
          and cmd[cmd.index("--tls-key") + 1].startswith("/run/secrets/"),
          f"{name} serves TLS with the key from a secret")
    check({"pgpass", "tls_cert", "tls_key", "tls_ca", "log_key"} <= {x["source"] for x in s["secrets"]},
          f"{name} gets pgpass, tls_cert, tls_key, tls_ca, log_key")
    check("--log-key" in cmd and cmd[cmd.index("--log-key") + 1] == "/run/secrets/log_key",
          f"{name} signs checkpoints with the log key from a secret")
    check(s["depends_on"] == {"postgres": {"condition": "service_healthy"},
                              "bootstrap": {"condition": "service_completed_successfully"}},
          f"{name} starts after postgres is healthy and bootstrap succeeded")
    hc = s["healthcheck"]["test"]
    check(hc[:3] == ["CMD", "fairvault", "health"] and "--tls-ca" in hc
          and hc[hc.index("--tls-server-name") + 1] == name,
          f"{name}'s health check is `fairvault health` over TLS, checking the name {name}")
    check(s.get("user") == user, f"{name} runs as the owner of the secrets")
    check(len(s["ports"]) == 1 and s["ports"][0]["target"] == 50051,
          f"{name} publishes the gRPC port 50051")
    ports.add(s["ports"][0]["published"])
check(len(ports) == 2, f"the replicas use different host ports ({sorted(ports)})")
sys.exit(1 if failures else 0)
EOF

# ---- the bootstrap service's script, against the real server binary on SQLite ----
grep -q '^key=/secrets/regulator.key$' "$work/bootstrap.sh" ||
  { echo "FAIL: the bootstrap script no longer writes /secrets/regulator.key" >&2; exit 1; }
sed -i "s#^key=/secrets/regulator.key\$#key=$work/boot/regulator.key#" "$work/bootstrap.sh"
mkdir -p "$work/boot" "$work/bin"
ln -s "$(realpath "$server_bin")" "$work/bin/fairvault-server"
bootstrap() {
  FAIRVAULT_DB="$work/boot/vault.db" PATH="$work/bin:$PATH" sh "$work/bootstrap.sh" \
    > "$work/boot.out" 2> "$work/boot.err"
}
bootstrap || { echo "FAIL: first bootstrap run:" >&2; cat "$work/boot.err" >&2; exit 1; }
key=$(cat "$work/boot/regulator.key")
[[ $key =~ ^fv_[A-Za-z0-9_-]+$ ]] || { echo "FAIL: regulator.key holds '$key'" >&2; exit 1; }
[[ $(stat -c %a "$work/boot/regulator.key") == 600 ]] ||
  { echo "FAIL: regulator.key is not 0600" >&2; exit 1; }
echo "ok: bootstrap writes the regulator key once (0600)"
bootstrap || { echo "FAIL: second bootstrap run failed:" >&2; cat "$work/boot.err" >&2; exit 1; }
[[ $(cat "$work/boot/regulator.key") == "$key" ]] && grep -q "no new regulator key" "$work/boot.out" ||
  { echo "FAIL: a second run changed the key or said nothing" >&2; exit 1; }
echo "ok: with the key file present, bootstrap does nothing"
rm "$work/boot/regulator.key"
if bootstrap; then
  echo "FAIL: without the key file, a second regulator 'regulator' was made" >&2
  exit 1
fi
[[ ! -e $work/boot/regulator.key && ! -e $work/boot/regulator.key.new ]] ||
  { echo "FAIL: a failed bootstrap left a key file" >&2; exit 1; }
grep -q "put it back" "$work/boot.err" ||
  { echo "FAIL: the failed bootstrap does not say what to do:" >&2; cat "$work/boot.err" >&2; exit 1; }
echo "ok: with the account present and the key file gone, bootstrap fails and says why"
echo "all compose checks passed"
