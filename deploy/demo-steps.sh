#!/usr/bin/env bash
# The demo's work on a running vault: the regulator loads `sex` and `race` of Adult, a company
# trains without them and asks for a DP equalized-odds post-processor, fair models and an audit,
# the vault decides for its customers, and an auditor checks the budgets and the ledger.
# Usage: deploy/demo-steps.sh --server HOST:PORT --regulator-key FILE --work DIR
#          [--company-server HOST:PORT] [--tls-ca FILE] [--datasets DIR] [--log-key FILE]
#   --company-server: where the company's calls go (default --server: another replica on the
#   same database shows they share it); --tls-ca: the CA of a TLS vault; --datasets: where
#   adult/ is (default ../shared/datasets); --log-key: the vault's verifier key, with which the
#   auditor checks every ledger row against the signed checkpoint. deploy/demo.sh runs it on its own SQLite vault;
#   README, "Running with docker-compose", on the compose stack.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server="" company_server="" tls_ca="" regulator_key="" work="" log_key=""
data="${FAIRVAULT_DATASETS:-$root/../shared/datasets}"
while (($# > 0)); do
  case $1 in
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --server|--company-server|--tls-ca|--regulator-key|--work|--datasets|--log-key)
      if (($# < 2)); then echo "demo-steps: $1 needs a value (see --help)" >&2; exit 2; fi
      case $1 in
        --server) server=$2 ;;
        --company-server) company_server=$2 ;;
        --tls-ca) tls_ca=$2 ;;
        --regulator-key) regulator_key=$2 ;;
        --work) work=$2 ;;
        --datasets) data=$2 ;;
        --log-key) log_key=$2 ;;
      esac
      shift 2 ;;
    *) echo "demo-steps: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for required in server regulator_key work; do
  if [[ -z ${!required} ]]; then
    echo "demo-steps: --${required//_/-} is required (see --help)" >&2
    exit 2
  fi
done
if [[ ! -f "$data/adult/adult.data" ]]; then
  echo "demo-steps: Adult not found at $data/adult (set --datasets or FAIRVAULT_DATASETS)" >&2
  exit 1
fi
company_server=${company_server:-$server}
umask 077
mkdir -p "$work" && chmod 0700 "$work"
# Step titles in bold on a terminal only: a file or a pipe gets plain text.
if [[ -t 1 ]]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi

# The CLI: local commands as they are; the regulator's and the auditor's calls to --server, the
# company's to --company-server, over TLS when --tls-ca names the CA.
cli="$root/build/client/fairvault"
tls=()
if [[ -n $tls_ca ]]; then tls=(--tls-ca "$tls_ca"); fi
fv() { "$cli" "$@"; }
reg=(--server "$server" "${tls[@]}" --key-file "$regulator_key")
echo "vault: $server (company: $company_server)${tls_ca:+, TLS with CA $tls_ca}"


# The regulator's view of each model on the held-out test set (it holds sex): `fairvault
# metrics`, printed whole or its last three lines (`brief`), and recorded for the comparison
# at the end.
summary="$work/summary.tsv"
printf 'model\ttest error\tEO violation\tDP violation\n' > "$summary"
view() {  # NAME CSV PREDICTION_COLUMN [brief]
  local out
  out=$(fv metrics --csv "$2" --prediction-column "$3" --label-column label --group-column sex)
  if [[ ${4:-} == brief ]]; then tail -n 3 <<< "$out"; else echo "$out"; fi
  printf '%s\t%s\t%s\t%s\n' "$1" $(tail -n 3 <<< "$out" | sed 's/.*: //') >> "$summary"
}

# Both sides hold this secret: raw identifiers are replaced by HMAC-SHA256 pseudonyms before
# they leave either side. Adult has no identifier, so the row number stands in for one.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/pseudonym.secret"

step "Regulator: create dataset 'adult' and import sex and race for 32,561 people"
fv "${reg[@]}" dataset create --name adult \
  --attribute sex=Female,Male \
  --attribute race=White,Black,Asian-Pac-Islander,Amer-Indian-Eskimo,Other
fv "${reg[@]}" import --dataset adult --csv "$data/adult/adult.data" --key-column @row \
  --attributes sex,race --hmac-secret-file "$work/pseudonym.secret"

step "Regulator: create a company and an auditor; grant the company epsilon 7 on 'adult'"
fv "${reg[@]}" account create --name acme --role company > "$work/acme.key"
fv "${reg[@]}" account create --name watchdog --role auditor > "$work/watchdog.key"
fv "${reg[@]}" grant --company acme --dataset adult --epsilon 7 --delta 1e-6
fv "${reg[@]}" cap --dataset adult --epsilon 12 --delta 1e-6
acme=(--server "$company_server" "${tls[@]}" --key-file "$work/acme.key")
watchdog=(--server "$server" "${tls[@]}" --key-file "$work/watchdog.key")

step "Company: train a logistic regression on its own columns (no sex, no race)"
features=(--numeric age,education-num,capital-gain,capital-loss,hours-per-week
  --categorical workclass,education,marital-status,occupation,relationship,native-country)
fv train-logreg --csv "$data/adult/adult.data" --label-column Y --positive-label '>50K,>50K.' \
  "${features[@]}" --key-column @row --out "$work/train_predictions.csv"

step "Company: upload predictions and labels keyed by pseudonym"
handle=$(fv "${acme[@]}" table upload --dataset adult --csv "$work/train_predictions.csv" \
  --key-column key --numeric prediction,label --hmac-secret-file "$work/pseudonym.secret")
echo "table handle: $handle"
echo "$handle" > "$work/table.handle"

step "Company: noisy counts of prediction x sex (discrete Laplace, epsilon 0.5)"
fv "${acme[@]}" counts --table "$handle" --columns prediction,label --attributes sex \
  --epsilon 0.5 --idempotency-key demo-counts

step "Company: DP equalized-odds post-processor for sex at epsilon 1, gamma 0.01"
fv "${acme[@]}" postprocess eo --table "$handle" --prediction-column prediction \
  --label-column label --attributes sex --epsilon 1 --gamma 0.01 \
  --idempotency-key demo-eo --out "$work/eo_artifact.json"
echo "artifact saved to $work/eo_artifact.json:"
cat "$work/eo_artifact.json"; echo

step "Regulator's view: fairness of the company's model on the held-out Adult test set"
# The regulator holds sex, so it can measure what the company cannot.
fv train-logreg --csv "$data/adult/adult.data" --test-csv "$data/adult/adult.test" \
  --label-column Y --positive-label '>50K,>50K.' "${features[@]}" --keep-columns sex \
  --out "$work/test_predictions.csv" 2>/dev/null
echo "-- before post-processing:"
view "logistic regression (no fairness)" "$work/test_predictions.csv" prediction
fv apply-eo --artifact "$work/eo_artifact.json" --csv "$work/test_predictions.csv" \
  --prediction-column prediction --group-column sex --out "$work/test_fair.csv" 2>/dev/null
echo "-- after the DP equalized-odds post-processor (epsilon 1):"
view "EO post-processor, eps 1" "$work/test_fair.csv" fair_prediction

step "Company: a second post-processor with a decision floor, so the vault can decide with it"
# The floor keeps every mixing probability in [0.1, 0.9]: one decision by the vault (Decide)
# then reveals a bounded amount about a person's group. It costs accuracy; the regulator's
# view below shows how much.
fv "${acme[@]}" postprocess eo --table "$handle" --prediction-column prediction \
  --label-column label --attributes sex --epsilon 1 --gamma 0.01 --decision-floor 0.1 \
  --idempotency-key demo-eo-floor --out "$work/eo_floor_artifact.json" | tail -n 6
fv apply-eo --artifact "$work/eo_floor_artifact.json" --csv "$work/test_predictions.csv" \
  --prediction-column prediction --group-column sex --out "$work/test_fair_floor.csv" 2>/dev/null
echo "-- regulator's view of the floored post-processor on the test set:"
view "EO post-processor, floor 0.1, eps 1" "$work/test_fair_floor.csv" fair_prediction brief

step "Company: a fair model it runs itself, without sex: exponentiated gradient (epsilon 1)"
# Its own columns as features, encoded as for its logistic regression (numeric standardised,
# categories one-hot: train-logreg --keep-features); the vault trains on them with the protected
# attribute (Agarwal et al.'s reduction for equalized odds within 0.02: every best response
# comes from one release of per-cell feature sums) and returns a weighted mixture of linear
# classifiers. Charged once, at submission.
fv train-logreg --csv "$data/adult/adult.data" --label-column Y --positive-label '>50K,>50K.' \
  "${features[@]}" --key-column @row --keep-features \
  --out "$work/train_features.csv" > /dev/null
encoded=$(head -n 1 "$work/train_features.csv" | cut -d, -f4-)
echo "features: $(tr ',' '\n' <<< "$encoded" | wc -l) encoded columns (${encoded:0:60}...)"
features_handle=$(fv "${acme[@]}" table upload --dataset adult --csv "$work/train_features.csv" \
  --key-column key --numeric "label,$encoded" --hmac-secret-file "$work/pseudonym.secret")
fv "${acme[@]}" model fit --table "$features_handle" --algorithm exponentiated_gradient \
  --features "$encoded" --label label --attributes sex --epsilon 1 --gamma 0.02 \
  --clip-l1 5 --idempotency-key demo-fair-model --wait | tee "$work/fit.txt"
model_id=$(sed -n 's/.*\(art_[0-9a-f]\{32\}\).*/\1/p' "$work/fit.txt" | tail -n 1)
fv "${acme[@]}" artifact get --id "$model_id" --out "$work/fair_model.json" > /dev/null
# The test rows, encoded with the training rows' encoder (the logistic regression's test
# accuracy is the unconstrained baseline).
fv train-logreg --csv "$data/adult/adult.data" --test-csv "$data/adult/adult.test" \
  --label-column Y --positive-label '>50K,>50K.' "${features[@]}" --keep-columns sex \
  --keep-features --out "$work/test_features.csv" 2>/dev/null | grep "test accuracy"
# Applied locally with no vault call; the regulator adds sex to measure it.
fv predict --artifact-file "$work/fair_model.json" --csv "$work/test_features.csv" \
  --key-column key --seed 7 --keep-columns label,sex --label-column label \
  --out "$work/test_fair_model.csv"
echo "-- regulator's view of the fair model on the test set:"
view "exponentiated gradient (EO), eps 1" "$work/test_fair_model.csv" decision brief

step "Company: a stochastic fair model: DP-FERMI logistic regression for demographic parity (epsilon 1)"
# Full batches: at small epsilon the vault's accountant gives batches no amplification, so
# few large steps add the least noise (docs/api.md, FitFairModel). Needs the grant's delta.
# The fairness weight 1 narrows the selection-rate gap at about the logistic regression's
# error; at this epsilon a weight of 1.5 or more already collapses to the constant classifier.
fv "${acme[@]}" model fit --table "$features_handle" --algorithm dp_fermi \
  --features "$encoded" --label label --attributes sex --epsilon 1 --clip-l1 5 \
  --batch-size 100000 --epochs 300 --lr-theta 2 --lr-w 1 --w-radius 5 --fairness-lambda 1 \
  --idempotency-key demo-fermi --wait | tee "$work/fermi.txt"
fermi_id=$(sed -n 's/.*\(art_[0-9a-f]\{32\}\).*/\1/p' "$work/fermi.txt" | tail -n 1)
fv "${acme[@]}" artifact get --id "$fermi_id" --out "$work/fermi_model.json" > /dev/null
fv predict --artifact-file "$work/fermi_model.json" --csv "$work/test_features.csv" \
  --key-column key --keep-columns label,sex --label-column label --out "$work/test_fermi.csv"
echo "-- regulator's view of the DP-FERMI model on the test set:"
view "DP-FERMI (DP), eps 1" "$work/test_fermi.csv" decision brief

step "Company: a private fairness audit of its own model (epsilon 0.5), rendered as a web page"
fv "${acme[@]}" audit classifier --table "$handle" --prediction-column prediction \
  --label-column label --attributes sex --epsilon 0.5 --idempotency-key demo-audit \
  --out "$work/audit.json"
fv "${acme[@]}" report audit --audit "$work/audit.json" --table "$handle" --out "$work/audit.html"

step "Company: the vault applies the post-processor to its customers (one licence charge; logged)"
artifact_id=$(sed -n 's/.*"id": *"\(art_[0-9a-f]*\)".*/\1/p' "$work/eo_floor_artifact.json" | head -n 1)
fv "${acme[@]}" decide --artifact-id "$artifact_id" --csv "$work/train_predictions.csv" \
  --key-column key --value-column prediction --hmac-secret-file "$work/pseudonym.secret" \
  --out "$work/decisions.csv"
echo "first decisions (key, prediction, label, decision):"
head -n 4 "$work/decisions.csv"

step "Company: a replay of the same request returns the stored release and charges nothing"
fv "${acme[@]}" counts --table "$handle" --columns prediction,label --attributes sex \
  --epsilon 0.5 --idempotency-key demo-counts | tail -n 3

step "Company: budget left and its ledger rows"
fv "${acme[@]}" budget
fv "${acme[@]}" ledger list

step "Auditor: every company's budget, and the ledger's hash chain"
fv "${watchdog[@]}" auditor budgets
# With the verifier key, the auditor also checks every row here against the signed checkpoint
# (kept in kept.note: the next run proves the ledger extends it).
checked=(${log_key:+--log-key "$log_key" --kept "$work/kept.note"})
fv "${watchdog[@]}" auditor verify "${checked[@]}"
fv "${watchdog[@]}" auditor access-log
# One page with the spend over time, grants and caps, the head hash and the Decide volume.
fv "${watchdog[@]}" report budgets --out "$work/budgets.html" --csv "$work/charges.csv" \
  "${checked[@]}"

step "Regulator's view, side by side: every model on the held-out test set"
# The constant classifier (decide the majority label for everyone) is what a model must beat:
# its error is the minority label's share, and it is perfectly fair.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "label") c = i; next }
         { n++; pos += $c } END { e = pos / n; if (e > 0.5) e = 1 - e;
         printf "constant classifier (no model)\t%.4f\t0.0000\t0.0000\n", e }' \
  "$work/test_predictions.csv" >> "$summary"
column -t -s $'\t' "$summary"

step "Done. The pages are $work/audit.html and $work/budgets.html"
