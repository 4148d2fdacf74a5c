#!/usr/bin/env bash
# Configures and builds fairvault into build/ (2 parallel jobs: the reference machine has 2 cores).
# Usage: deploy/build.sh [cmake --build target ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE="${FAIRVAULT_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
if (($# > 0)); then
  for target in "$@"; do cmake --build "$root/build" -j2 --target "$target"; done
else
  cmake --build "$root/build" -j2
fi
