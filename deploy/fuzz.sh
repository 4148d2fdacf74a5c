#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer, no recovery) in build-fuzz/ and runs each one, starting from its
# committed corpus and dictionary. Prints executions per second and coverage (edges) per target;
# exits 1 if any input breaks a target's contract or a sanitizer's, keeping it in
# build-fuzz/crashes/TARGET/.
# Usage: deploy/fuzz.sh [--seconds N | --runs N] [--merge] [TARGET ...]
#   --seconds N  run each target for N seconds (default 60)
#   --runs N     run each target for N inputs instead (the same inputs on every machine)
#   --merge      add the inputs that reached new coverage to tests/fuzz/corpus/TARGET
#   --configure-only  install clang and configure build-fuzz/, nothing else (deploy/sanitize.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
all=(fuzz_csv fuzz_flags fuzz_report_html fuzz_company_table fuzz_artifact fuzz_streams fuzz_spending)
limit=(-max_total_time=60)
merge=0
configure_only=0
targets=()
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --seconds | --runs)
      if [[ ! ${2:-} =~ ^[1-9][0-9]*$ ]]; then
        echo "fuzz.sh: $1 needs a positive whole number (got '${2:-}')" >&2
        exit 2
      fi
      if [[ $1 == --seconds ]]; then limit=(-max_total_time="$2"); else limit=(-runs="$2"); fi
      shift 2 ;;
    --merge) merge=1; shift ;;
    --configure-only) configure_only=1; shift ;;
    fuzz_*)
      if [[ " ${all[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target '$1' (known: ${all[*]})" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#targets[@]})) || targets=("${all[@]}")

"$root/deploy/install-deps.sh" clang libclang-rt-14-dev
build="$root/build-fuzz"
# Configured every time (quick): a target added since the last run is then known.
# -O1 and line tables only: ASan's recommended level, and a quicker build than -O2 -g (the
# sanitizer reports still name file and line).
CXX=clang++ cmake -S "$root" -B "$build" -DFAIRVAULT_FUZZ=ON -DFAIRVAULT_WHOLE_TREE=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >/dev/null
((configure_only)) && exit 0
start=$(date +%s)
cmake --build "$build" -j2 --target "${targets[@]}" >"$build/fuzz-build.log" 2>&1 || {
  tail -40 "$build/fuzz-build.log" >&2
  exit 1
}
echo "fuzz.sh: built ${targets[*]} in $(($(date +%s) - start)) s (ASan, UBSan, libFuzzer)"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One target per core at a time (each libFuzzer run is one process on one core); the table is
# printed in the targets' order once all have run.
results="$(mktemp -d)"
# Stopped (Ctrl-C, SIGTERM) or done: no fuzzer outlives the script.
trap 'for job in $(jobs -p); do pkill -TERM -P "$job" || true; kill "$job" || true; done 2>/dev/null
      rm -rf "$results"' EXIT
trap 'exit 130' INT TERM
run_target() {
  local t="$1" corpus="$root/tests/fuzz/corpus/$1" work crashes="$build/crashes/$1" begin status
  work="$(mktemp -d)"
  mkdir -p "$crashes"
  begin=$(date +%s)
  set +e
  "$build/tests/fuzz/$t" "${limit[@]}" -seed=1 -timeout=20 -rss_limit_mb=2048 \
    -dict="$root/tests/fuzz/$t.dict" -artifact_prefix="$crashes/" -print_final_stats=1 \
    "$work" "$corpus" >"$build/$t.log" 2>&1
  status=$?
  set -e
  local seconds=$(($(date +%s) - begin)) runs rate edges size result=ok
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$t.log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$build/$t.log" | tail -1)"
  edges="$(grep -o 'cov: [0-9]*' "$build/$t.log" | tail -1 | cut -d' ' -f2 || true)"
  size="$(grep -o 'corp: [0-9]*' "$build/$t.log" | tail -1 | cut -d' ' -f2 || true)"
  if ((status != 0)); then result="FAILED (see $build/$t.log; input in $crashes/)"; fi
  printf '%-20s %8s %10s %9s %7s %7s  %s\n' "$t" "$seconds" "${runs:-?}" "${rate:-?}" \
    "${edges:-?}" "${size:-?}" "$result" >"$results/$t.line"
  if ((status != 0)); then
    grep -m 5 -E 'contract broken|ERROR: (Address|Undefined|libFuzzer)|runtime error' \
      "$build/$t.log" >"$results/$t.findings" || true
    touch "$results/$t.failed"
  elif ((merge)) && ! "$build/tests/fuzz/$t" -merge=1 "$corpus" "$work" >/dev/null 2>&1; then
    echo "$t: merging its new inputs into $corpus failed" >"$results/$t.findings"
    touch "$results/$t.failed"
  fi
  rm -rf "$work"
}
cores="$(nproc)"
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= cores)); do wait -n || true; done
  run_target "$t" &
done
wait
failed=0
printf '%-20s %8s %10s %9s %7s %7s  %s\n' target seconds runs exec/s edges corpus result
for t in "${targets[@]}"; do
  cat "$results/$t.line" 2>/dev/null || echo "$t: no result (see $build/$t.log)"
  if [[ -e $results/$t.failed || ! -e $results/$t.line ]]; then
    failed=1
    cat "$results/$t.findings" >&2 2>/dev/null || true
  fi
done
exit "$failed"
