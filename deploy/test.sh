#!/usr/bin/env bash
# One command: install what is missing, build everything, run every test (ctest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh"
cd "$root/build"
ctest --output-on-failure -j2 --timeout 900
