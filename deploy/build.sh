#!/usr/bin/env bash
# Configures and builds fairvault into build/ (2 parallel jobs: the reference machine has 2 cores).
# Usage: deploy/build.sh [cmake --build target ...]
#   FAIRVAULT_BUILD_TYPE: the CMake build type (default RelWithDebInfo).
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE="${FAIRVAULT_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
if (($# > 0)); then
  for target in "$@"; do cmake --build "$root/build" -j2 --target "$target"; done
else
  cmake --build "$root/build" -j2
fi
