#!/usr/bin/env bash
# One command: install what is missing, build everything, run every test (ctest).
# Usage: deploy/test.sh   (no arguments)
set -euo pipefail
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
done
if (($# > 0)); then
  echo "test.sh: takes no arguments (got $1; see --help)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# chromium: the browser test of the HTML reports (tests/report_chromium_test.cc) loads them.
# postgresql: the store suite and the replica tests start a private PostgreSQL server
# (initdb + pg_ctl in a temporary directory, as the unprivileged postgres user).
# docker.io, docker-compose, debootstrap: the container test (tests/container/) starts its own
# dockerd, makes the base image and runs the compose stack; `docker-compose config` also
# validates deploy/docker-compose.yml (tests/deploy/compose_config_test.sh). openssl:
# deploy/make-certs.sh.
# python3-*: the Python client (client/python) and its pytest suite against the real server;
# python3-pip and python3-setuptools: client/python/install.sh (tested by the suite);
# python3-cryptography: the client's check of the transparency log's Ed25519 signatures;
# python3-sklearn: the suite's scikit-learn checks of the estimators (clone, pickle, Pipeline,
# check_estimator; not a dependency of the client).
# golang-go, golang-golang-x-mod-dev: an independent verifier of the transparency log
# (tests/interop/tlog_verify.go, on Go's sumdb/note and sumdb/tlog) that transparency_test runs.
# valgrind: tests/timing/instruction_count_test.sh counts the learners' instructions on
# neighbouring datasets with callgrind.
# clang, libclang-rt-14-dev: the sanitizer builds (label `sanitize`: deploy/sanitize.sh, ASan and
# UBSan; deploy/tsan.sh, TSan) and the libFuzzer targets of tests/fuzz (deploy/fuzz.sh, run after
# ctest in the ASan/UBSan build).
"$root/deploy/install-deps.sh" chromium postgresql docker.io docker-compose debootstrap openssl valgrind \
  clang libclang-rt-14-dev \
  python3-grpcio python3-protobuf python3-pandas python3-numpy python3-tqdm python3-matplotlib \
  python3-pytest python3-pip python3-setuptools python3-sklearn python3-cryptography \
  golang-go golang-golang-x-mod-dev
"$root/deploy/build.sh"
cd "$root/build"
# A missing browser fails the browser test here instead of skipping it.
export FAIRVAULT_REQUIRE_CHROMIUM=1
# Likewise a missing docker-compose fails the compose test.
export FAIRVAULT_REQUIRE_DOCKER_COMPOSE=1
# And a missing scikit-learn fails the Python suite's scikit-learn checks.
export FAIRVAULT_REQUIRE_SKLEARN=1
# And a missing Go verifier fails the transparency log's interoperability test.
export FAIRVAULT_REQUIRE_GO=1
# And a Docker engine that cannot start fails the container test (it says why) instead of
# skipping it.
export FAIRVAULT_REQUIRE_DOCKER=1
ctest --output-on-failure -j2 --timeout 900
# Then every fuzz target for 30 s from its committed corpus (its regression inputs first), in the
# ASan/UBSan build the `sanitize` label made (build-fuzz/), two at a time on two cores: about
# 2 minutes.
"$root/deploy/fuzz.sh" --seconds 30
