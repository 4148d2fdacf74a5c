#!/usr/bin/env bash
# One command: install what is missing, build everything, run every test (ctest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# chromium: the browser test of the HTML reports (tests/report_chromium_test.cc) loads them.
# postgresql: the store suite and the replica tests start a private PostgreSQL server
# (initdb + pg_ctl in a temporary directory, as the unprivileged postgres user).
"$root/deploy/install-deps.sh" chromium postgresql
"$root/deploy/build.sh"
cd "$root/build"
# A missing browser fails the browser test here instead of skipping it.
export FAIRVAULT_REQUIRE_CHROMIUM=1
ctest --output-on-failure -j2 --timeout 900
