#!/usr/bin/env bash
# The server's memory for one cached company table: imports ROWS subjects (default 1,000,000),
# uploads a ROWS-row table (a categorical column and three numeric ones, 64-hex keys), restarts
# the server, then has it read the table back from the database for one release. Prints the
# server's resident memory before and after that release, the table cache's own measure, and
# the size of the columns themselves. Run from a built tree (./deploy/build.sh fairvault
# fairvault-server); the server and its database live in a temporary directory.
# Usage: bench/table_memory.sh [rows]
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
if [[ -n ${1:-} && ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "table_memory.sh: rows must be a positive integer (got '$1'; see --help)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows="${1:-1000000}"
cli="$root/build/client/fairvault"
server="$root/build/server/fairvault-server"
work="$(mktemp -d)"
trap 'kill "${server_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

/usr/bin/python3 - "$rows" "$work" <<'EOF'
import random, sys
rows, work = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
with open(f"{work}/subjects.csv", "w") as s, open(f"{work}/table.csv", "w") as t:
    s.write("key,sex\n")
    t.write("key,region,prediction,label,score\n")
    for i in range(rows):
        k = "%016x%016x%016x%016x" % (rng.getrandbits(64), rng.getrandbits(64),
                                      rng.getrandbits(64), i)
        s.write(f"{k},{'FM'[i % 2]}\n")
        t.write(f"{k},{('north', 'south', 'east')[i % 3]},{i % 2},{(i // 2) % 2},"
                f"{rng.random():.17g}\n")
EOF
head -11 "$work/table.csv" >"$work/small.csv"

serve() {
  "$server" serve --db "$work/vault.db" --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 \
    >"$work/server.out" 2>"$work/server.log" &
  server_pid=$!
  for _ in $(seq 100); do "$cli" --key "$key" dataset list >/dev/null 2>&1 && return; sleep 0.1; done
  echo "table_memory.sh: the server did not start; its log:" >&2
  cat "$work/server.log" >&2
  exit 1
}
rss() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$server_pid/status"; }

key="$("$server" bootstrap --db "$work/vault.db" --name regulator | tail -1)"
port=$((20000 + RANDOM % 20000))
export FAIRVAULT_SERVER="127.0.0.1:$port"
serve
company="$("$cli" --key "$key" account create --name acme --role company 2>/dev/null)"
"$cli" --key "$key" dataset create --name pop --attribute sex=F,M >/dev/null
"$cli" --key "$key" import --dataset pop --csv "$work/subjects.csv" --key-column key \
  --attributes sex >/dev/null
"$cli" --key "$key" grant --company acme --dataset pop --epsilon 10 >/dev/null
upload() {
  "$cli" --key "$company" table upload --dataset pop --csv "$1" --key-column key \
    --numeric prediction,label,score --categorical region 2>/dev/null
}
big="$(upload "$work/table.csv")"
small="$(upload "$work/small.csv")"

# A fresh process: nothing of the upload's buffers, the index loaded by a release on the small
# table, then the big table read back from the database, parsed and kept.
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
serve
counts() {
  "$cli" --key "$company" counts --table "$1" --columns region --attributes sex --epsilon 0.01 \
    >/dev/null
}
counts "$small"
before="$(rss VmRSS)"
start="$(date +%s.%N)"
counts "$big"
seconds="$(echo "$(date +%s.%N) - $start" | bc)"
after="$(rss VmRSS)" peak="$(rss VmHWM)"
counts "$big"
again="$(rss VmRSS)"

metrics_port="$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$work/server.out" | head -1)"
/usr/bin/python3 - "$metrics_port" "$rows" "$before" "$after" "$peak" "$again" "$seconds" <<'EOF'
import sys, urllib.request
port, rows = sys.argv[1], int(sys.argv[2])
before, after, peak, again = (int(v) / 1024 for v in sys.argv[3:7])
seconds = float(sys.argv[7])
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
value = {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
         if l.startswith("fairvault_table_cache")}
columns = rows * (3 * 8 + 4) / 2**20  # three columns of doubles, one of 4-byte codes
print(f"{rows} rows; columns {columns:.0f} MiB (+ join {rows * 4 / 2**20:.0f} MiB)")
print(f"table cache: {int(value['fairvault_table_cache_tables'])} tables, "
      f"{value['fairvault_table_cache_bytes'] / 2**20:.0f} MiB by its own measure")
print(f"server VmRSS: {before:.0f} MiB before the first release on the table, {after:.0f} MiB "
      f"after it ({after - before:.0f} MiB more, {(after - before) / columns:.2f}x the columns), "
      f"{again:.0f} MiB after a second; high-water mark {peak:.0f} MiB")
print(f"first release on the table (read back, parsed, joined): {seconds:.2f} s")
EOF
