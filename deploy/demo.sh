#!/usr/bin/env bash
# One command: install what is missing, build, start the vault on an embedded SQLite file,
# and play both sides on the Adult dataset — the regulator loads `sex` and `race`, a company
# trains a plain logistic regression without them, asks for a DP equalized-odds
# post-processor at epsilon = 1, and the regulator measures fairness before and after.
# Usage: deploy/demo.sh   (no arguments; FAIRVAULT_DATASETS=DIR if the benchmark datasets are
#   not at ../shared/datasets). Its files land in var/demo/ (0700; the keys, the secret and the
#   database 0600).
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
if (($# > 0)); then
  echo "demo: takes no arguments (got $1; see --help)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${FAIRVAULT_DATASETS:-$root/../shared/datasets}"
work="$root/var/demo"

"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" fairvault-server fairvault
server_bin="$root/build/server/fairvault-server"
fv="$root/build/client/fairvault"

if [[ ! -f "$data/adult/adult.data" ]]; then
  echo "demo: Adult not found at $data/adult (set FAIRVAULT_DATASETS)" >&2
  exit 1
fi
# Everything the demo writes from here on (the database, the keys, the pseudonym secret, the
# pages) is its owner's only: var/demo is 0700, its files 0600.
umask 077
rm -rf "$work" && mkdir -p "$work" && chmod 0700 "$work"
# Step titles in bold on a terminal only: a file or a pipe gets plain text.
if [[ -t 1 ]]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi

step "Regulator: bootstrap the first regulator key (printed once; the vault keeps a salted hash)"
"$server_bin" bootstrap --db "$work/vault.db" --name regulator > "$work/regulator.key"
echo "regulator key saved to $work/regulator.key"
# bootstrap made the transparency log's key next to the database; its verifier key is public.
"$server_bin" log-key --key "$work/vault.db.log-key" > "$work/log.pub"
echo "the log's verifier key, for companies and auditors, saved to $work/log.pub"

step "Start the vault on $work/vault.db (SQLite, WAL, synchronous=FULL)"
"$server_bin" serve --db "$work/vault.db" --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening on port" "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/server.out")
export FAIRVAULT_SERVER="127.0.0.1:$port"
echo "listening on $FAIRVAULT_SERVER"
"$root/deploy/demo-steps.sh" --server "$FAIRVAULT_SERVER" --regulator-key "$work/regulator.key" \
  --work "$work" --datasets "$data" --log-key "$work/log.pub"
handle=$(cat "$work/table.handle")

# The vault stops with this script; what it holds stays in vault.db and the keys in var/demo/.
cat <<EOF
The vault stops with the demo; its database and the keys it handed out are kept:
  $work/vault.db            datasets, accounts, ledger, artifacts (SQLite)
  $work/regulator.key       the regulator's API key
  $work/acme.key            company 'acme'
  $work/watchdog.key        auditor 'watchdog'
  $work/pseudonym.secret    the HMAC secret both sides pseudonymise keys with
  $work/log.pub             the transparency log's verifier key (public)
  $work/kept.note           the signed checkpoint the auditor kept

Restart it on the same database (another terminal, or in the background as here):
  $server_bin serve --db $work/vault.db --listen 127.0.0.1:50051 &
  export FAIRVAULT_SERVER=127.0.0.1:50051
  $fv health

Then try (acme's table handle $handle lasts a day; after that, upload again):
  # what a release would cost and how noisy it would be, without paying
  $fv --key-file $work/acme.key counts --table $handle \\
      --columns prediction --attributes sex --epsilon 0.5 --dry-run
  # a private audit by sex and race, as a web page
  $fv --key-file $work/acme.key audit classifier --table $handle \\
      --prediction-column prediction --label-column label --attributes sex,race \\
      --epsilon 0.5 --out $work/audit2.json
  $fv --key-file $work/acme.key report audit --audit $work/audit2.json --table $handle \\
      --out $work/audit2.html
  # an epsilon sweep of the post-processor, measured on the public test set with sex as the
  # evaluation group (the regulator raises acme's grant first: the sweep costs 3.75)
  $fv --key-file $work/regulator.key grant --company acme --dataset adult --epsilon 12 --delta 1e-6
  $fv --key-file $work/acme.key sweep eo --dataset adult --table $handle \\
      --prediction-column prediction --label-column label --attributes sex --gamma 0.01 \\
      --epsilons 0.25,0.5,1,2 --run-id demo-sweep --holdout $work/test_predictions.csv \\
      --group-column sex --out $work/sweep.csv
  $fv report sweep --csv $work/sweep.csv --out $work/sweep.html --log-x
  # the auditor's page: spend over time, grants and caps, head hash, Decide volume; with the
  # verifier key, every ledger row checked against the signed checkpoint, which must extend
  # the one kept
  $fv --key-file $work/watchdog.key report budgets --out $work/budgets.html \\
      --log-key $work/log.pub --kept $work/kept.note
  # the Python client (client/python/README.md)
  PYTHONPATH=$root/build/client/python /usr/bin/python3 -c 'import fairvault; print(fairvault.Vault("127.0.0.1:50051", key_file="$work/acme.key").get_budget())'
EOF
