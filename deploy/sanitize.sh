#!/usr/bin/env bash
# Builds the code we own (core, server, client and their unit and service tests, the server
# and the CLI) with clang, AddressSanitizer and UndefinedBehaviorSanitizer (no recovery: the
# first finding fails its test) in build-fuzz/, the fuzz targets' build, and runs its ctest
# suite there, without the `statistical` label (fixed-seed distribution tests that repeat code
# the unit tests cover, thousands of draws each: five minutes of the test command under ASan),
# which it then does not build either.
# Usage: deploy/sanitize.sh [ctest arguments, e.g. -R store_test or -L statistical]
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/deploy/fuzz.sh" --configure-only  # clang, and build-fuzz/ configured as the fuzzers' build
build="$root/build-fuzz"
# Without arguments (the test command) the `statistical` tests are neither run nor built; any
# ctest selection builds them too, so that `-L statistical` or `-R audit_test` finds them.
statistical=OFF
if (($# > 0)); then statistical=ON; fi
cmake -S "$root" -B "$build" -DFAIRVAULT_STATISTICAL_TESTS=$statistical >/dev/null
start=$(date +%s)
cmake --build "$build" -j2 >"$build/sanitize-build.log" 2>&1 || {
  tail -40 "$build/sanitize-build.log" >&2
  exit 1
}
echo "sanitize.sh: built in $(($(date +%s) - start)) s (clang, ASan, UBSan)"
cd "$build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if (($# == 0)); then set -- -LE statistical; fi
ctest --output-on-failure -j2 --timeout 900 "$@"
