#!/usr/bin/env bash
# Builds the concurrency tests (the job runner, the vault's job submissions, both stores with
# their group commit and readers beside the batch, the charge batcher, SQLite's WAL) with clang's
# ThreadSanitizer in build-tsan/ and runs them; any data race or lock-order inversion fails. A
# canary first checks that a race is reported and that Abseil's locks are seen.
# Usage: deploy/tsan.sh [ctest arguments]
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/deploy/install-deps.sh" clang libclang-rt-14-dev
build="$root/build-tsan"
tests=(tsan_canary_test job_runner_test vault_jobs_test store_test charge_batcher_test sqlite_wal_test
  finish_gate_test)
# Configured every time (quick): a target added since the last run is then known.
CXX=clang++ cmake -S "$root" -B "$build" -DFAIRVAULT_TSAN=ON -DFAIRVAULT_WHOLE_TREE=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >/dev/null
start=$(date +%s)
cmake --build "$build" -j2 --target "${tests[@]}" >"$build/tsan-build.log" 2>&1 || {
  tail -40 "$build/tsan-build.log" >&2
  exit 1
}
echo "tsan.sh: built ${tests[*]} in $(($(date +%s) - start)) s (clang, ThreadSanitizer)"
cd "$build"
# halt_on_error: the first report fails its test. second_deadlock_stack: both stacks of a
# lock-order inversion.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
regex="^($(IFS='|'; echo "${tests[*]}"))\\."
ctest --output-on-failure -j2 --timeout 900 -R "$regex" "$@"
