#!/usr/bin/env bash
# The CLI's streaming paths at a million rows, beside the client library's: `fairvault import`
# and `fairvault table upload` of 1M-row CSV files against a real server, wall time and peak
# memory (max RSS) of the CLI process, median of 3 runs each; then `fairvault decide` of the
# same rows, first and repeated (one run each). The library paths (the same rows already in
# memory) are vault_bench's BM_Import1MSubjects, BM_UploadAndJoin1MRows and BM_Decide1MRows.
# Usage: bench/cli_upload.sh [rows]   (builds nothing: run ./deploy/build.sh first)
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
if [[ -n ${1:-} && ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "cli_upload.sh: rows must be a positive integer (got '$1'; see --help)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows="${1:-1000000}"
cli="$root/build/client/fairvault"
server="$root/build/server/fairvault-server"
work="$(mktemp -d)"
trap 'kill "${server_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# Keys as the CLI sends pseudonyms (64 hex characters); the same columns as vault_bench.
/usr/bin/python3 - "$rows" "$work" <<'EOF'
import random, sys
rows, work = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
keys = ["%016x%016x%016x%016x" % (rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64), i)
        for i in range(rows)]
with open(f"{work}/subjects.csv", "w") as f:
    f.write("key,sex,band\n")
    for k in keys:
        f.write(f"{k},{rng.choice('FM')},{rng.choice('uv')}\n")
with open(f"{work}/table.csv", "w") as f:
    f.write("key,region,prediction,label,score\n")
    for i, k in enumerate(keys):
        f.write(f"{k},{('north', 'south', 'east')[i % 3]},{i % 2},{(i // 2) % 2},"
                f"{rng.gauss(0.5, 0.2):.17g}\n")
EOF
echo "table.csv: $(du -m "$work/table.csv" | cut -f1) MB, $rows rows"

key="$("$server" bootstrap --db "$work/vault.db" --name regulator | tail -1)"
port=$((20000 + RANDOM % 20000))
"$server" serve --db "$work/vault.db" --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
export FAIRVAULT_SERVER="127.0.0.1:$port"
for _ in $(seq 50); do "$cli" --key "$key" dataset list >/dev/null 2>&1 && break; sleep 0.1; done
company="$("$cli" --key "$key" account create --name acme --role company 2>/dev/null)"

# Median of three numbers, one per line on stdin.
median() { sort -n | sed -n 2p; }

times=() rss=()
for run in 1 2 3; do
  "$cli" --key "$key" dataset create --name "pop$run" --attribute sex=F,M --attribute band=u,v \
    >/dev/null
  /usr/bin/time -f "%e %M" -o "$work/time" "$cli" --key "$key" import --dataset "pop$run" \
    --csv "$work/subjects.csv" --key-column key --attributes sex,band >/dev/null
  read -r t m <"$work/time"
  times+=("$t") rss+=("$m")
  "$cli" --key "$key" grant --company acme --dataset "pop$run" --epsilon 10 >/dev/null
done
printf 'fairvault import (%d rows):        median %5.2f s, max RSS %4d MiB\n' "$rows" \
  "$(printf '%s\n' "${times[@]}" | median)" "$(($(printf '%s\n' "${rss[@]}" | median) / 1024))"

times=() rss=()
for run in 1 2 3; do
  /usr/bin/time -f "%e %M" -o "$work/time" "$cli" --key "$company" table upload \
    --dataset "pop$run" --csv "$work/table.csv" --key-column key \
    --numeric prediction,label,score --categorical region >"$work/handle$run" 2>/dev/null
  read -r t m <"$work/time"
  times+=("$t") rss+=("$m")
done
printf 'fairvault table upload (%d rows):  median %5.2f s, max RSS %4d MiB\n' "$rows" \
  "$(printf '%s\n' "${times[@]}" | median)" "$(($(printf '%s\n' "${rss[@]}" | median) / 1024))"

# Decisions for every row by an equalized-odds post-processor with a decision floor.
artifact="$("$cli" --key "$company" --json postprocess eo --table "$(cat "$work/handle1")" \
  --prediction-column prediction --label-column label --attributes sex --epsilon 1 \
  --gamma 0.05 --decision-floor 0.1 |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["artifact"]["id"])')"
for pass in first repeated; do
  /usr/bin/time -f "%e %M" -o "$work/time" "$cli" --key "$company" decide \
    --artifact-id "$artifact" --csv "$work/table.csv" --key-column key \
    --value-column prediction --out "$work/decided.csv" >/dev/null 2>&1
  read -r t m <"$work/time"
  printf 'fairvault decide (%d rows, %s):%*s %5.2f s, max RSS %4d MiB\n' "$rows" "$pass" \
    $((10 - ${#pass})) "" "$t" "$((m / 1024))"
done

# The server's memory at the end: the subject indexes of the three datasets, the tables the
# cache holds (its own estimate, fairvault_table_cache_bytes) and the artifact's decisions.
metrics_port="$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$work/server.out" | head -1)"
/usr/bin/python3 - "$metrics_port" "$server_pid" <<'EOF'
import sys, urllib.request
port, pid = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
value = {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
         if l.startswith("fairvault_table_cache")}
status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status") if ":" in l)
print(f"server: VmRSS {int(status['VmRSS'].split()[0]) // 1024} MiB, "
      f"VmHWM {int(status['VmHWM'].split()[0]) // 1024} MiB; table cache "
      f"{int(value['fairvault_table_cache_tables'])} tables, "
      f"{value['fairvault_table_cache_bytes'] / 2**20:.0f} MiB estimated")
EOF
