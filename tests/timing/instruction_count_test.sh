#!/usr/bin/env bash
# Issue 19: a learner executes exactly as many instructions on two neighbouring datasets.
# callgrind counts instructions, not seconds: the same binary on the same inputs gives the same
# count whatever else the machine does, so equal counts on neighbours mean that nothing the
# learner does takes a path, or a number of steps, that depends on the protected attribute. The
# exponential mechanism runs from one random stream on both; the stochastic learners release
# the same values on both (instruction_probe.cc, CountedRun), since their later steps may
# legitimately depend on what they released. The discrete Laplace draws two different values
# (sign, first failed trial, geometric count) from scripted words with the same draws.
# Usage: instruction_count_test.sh PROBE   (tests/timing/instruction_probe.cc)
set -euo pipefail
probe="$1"
if ! command -v valgrind >/dev/null; then
  echo "valgrind is not installed (deploy/test.sh installs it)" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for learner in em pfld fermi laplace; do
  case "$learner" in
    em) function='*ExponentialMechanismLearner*' ;;
    laplace) function='*SampledOnce*' ;;
    pfld | fermi) function='*CountedRun*' ;;
  esac
  counts=()
  for side in d d2; do
    out="$work/$learner.$side.out"
    valgrind --tool=callgrind --toggle-collect="$function" --callgrind-out-file="$out" \
      "$probe" "$learner" "$side" 2>"$work/log"
    counts+=("$(awk '/^summary:/ {print $2}' "$out")")
  done
  if [[ -z "${counts[0]}" || "${counts[0]}" == 0 ]]; then
    echo "FAIL $learner: callgrind counted nothing in $function" >&2
    status=1
  elif [[ "${counts[0]}" != "${counts[1]}" ]]; then
    echo "FAIL $learner: ${counts[0]} instructions on D, ${counts[1]} on its neighbour" >&2
    status=1
  else
    echo "ok   $learner: ${counts[0]} instructions on both neighbours"
  fi
done
exit "$status"
