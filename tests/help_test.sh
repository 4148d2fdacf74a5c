#!/usr/bin/env bash
# Issue 19 §3: every program README.md names answers --help and -h with its usage on stdout
# ("usage: NAME ..." at the start of a line) and exit status 0, without connecting to or
# creating anything:
#  - fairvault-server, and each of its subcommands (listed by its own --help), also with
#    other flags around --help (`serve --db X --help` must neither parse --help as a value nor
#    create X);
#  - the fairvault CLI, every command and subcommand it lists and every group word, with
#    FAIRVAULT_SERVER pointing where nothing listens (a command that connected would fail);
#  - the benchmark and experiment programs given as further arguments;
#  - the scripts README.md names (deploy/, bench/cli_upload.sh, client/python/install.sh,
#    experiments/python_demo/adult_python.py), each under a timeout: one that ignored --help would start
#    its real work.
# Usage: tests/help_test.sh SERVER_BINARY CLI_BINARY [PROGRAM ...]
set -uo pipefail
if (($# < 2)); then
  echo "usage: tests/help_test.sh SERVER_BINARY CLI_BINARY [PROGRAM ...]" >&2
  exit 2
fi
# Absolute paths: the programs run in an empty working directory.
server=$(realpath "$1")
cli=$(realpath "$2")
shift 2
programs=()
for program in "$@"; do programs+=("$(realpath "$program")"); done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/cwd"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_help NAME COMMAND...: exit 0 and a line "usage: NAME" on stdout, in an empty working
# directory that must stay empty.
expect_help() {
  local name=$1
  shift
  local out rc
  out=$(cd "$work/cwd" && FAIRVAULT_SERVER=127.0.0.1:1 FAIRVAULT_API_KEY= timeout 30 "$@" \
    2>"$work/stderr")
  rc=$?
  if ((rc != 0)); then
    fail "'$*' exited $rc: $(head -c 300 "$work/stderr")"
  elif ! grep -qi "^usage: $name" <<<"$out"; then
    fail "'$*' printed no 'usage: $name' line on stdout: $(head -c 200 <<<"$out")"
  elif [[ -n $(ls -A "$work/cwd") ]]; then
    fail "'$*' created $(ls -A "$work/cwd")"
  else
    return 0
  fi
  rm -rf "$work/cwd" && mkdir "$work/cwd"
  return 1
}

# ---- fairvault-server and its subcommands ----
for h in --help -h help; do expect_help "fairvault-server" "$server" "$h"; done
listed=$("$server" --help | sed -n 's/^usage: fairvault-server \([a-z-]\+\).*/\1/p')
for required in bootstrap serve backup migrate; do
  grep -qx "$required" <<<"$listed" || fail "fairvault-server --help does not list $required"
done
for sub in $(printf '%s\n' bootstrap serve backup migrate $listed | sort -u); do
  for h in --help -h; do
    expect_help "fairvault-server $sub" "$server" "$sub" "$h"
    # Around other flags, and where a flag's value would be: still the usage, nothing opened.
    expect_help "fairvault-server $sub" "$server" "$sub" --db "$work/never.db" "$h"
    expect_help "fairvault-server $sub" "$server" "$sub" --db "$h"
    expect_help "fairvault-server $sub" "$server" "$sub" --no-such-flag x "$h"
  done
  expect_help "fairvault-server $sub" "$server" help "$sub"
done
[[ -e $work/never.db ]] && fail "a --help run created the database $work/never.db"

# ---- the fairvault CLI: every command it lists, and every group word ----
for h in --help -h help; do expect_help "fairvault" "$cli" "$h"; done
# The command column of `fairvault --help`'s sections: lines "  WORD[ WORD]  summary".
commands=$("$cli" --help | sed -n '/^Connection flags/q; s/^  \([a-z][a-z-]*\( [a-z][a-z-]*\)\?\)  .*/\1/p')
count=$(wc -l <<<"$commands")
((count >= 40)) || fail "fairvault --help lists only $count commands"
while read -r command; do
  for h in --help -h; do
    # shellcheck disable=SC2086  # the command's words
    expect_help "fairvault $command" "$cli" $command "$h"
    # shellcheck disable=SC2086
    expect_help "fairvault $command" "$cli" $command --no-such-flag "$h"
  done
done <<<"$commands"
for group in $(awk 'NF == 2 {print $1}' <<<"$commands" | sort -u); do
  for h in --help -h; do expect_help "fairvault $group" "$cli" "$group" "$h"; done
done
for h in --help -h; do
  expect_help "fairvault health" "$cli" --server 127.0.0.1:1 health "$h"
done

# ---- benchmark and experiment programs ----
for program in ${programs[@]+"${programs[@]}"}; do
  for h in --help -h; do expect_help "$(basename "$program")" "$program" "$h"; done
done

# ---- scripts ----
scripts=(deploy/make-certs.sh deploy/compose-secrets.sh deploy/build.sh deploy/install-deps.sh
  deploy/demo.sh deploy/demo-steps.sh deploy/make-base-image.sh deploy/test.sh bench/cli_upload.sh
  bench/table_memory.sh deploy/fuzz.sh deploy/sanitize.sh deploy/tsan.sh
  client/python/install.sh tests/container/make_upgrade_fixture.sh)
for script in "${scripts[@]}"; do
  for h in --help -h; do expect_help "$script" bash "$root/$script" "$h"; done
done
export PYTHONPATH=${FAIRVAULT_PYTHONPATH:-$root/build/client/python}
for h in --help -h; do
  expect_help "adult_python.py" /usr/bin/python3 "$root/experiments/python_demo/adult_python.py" "$h"
done

if ((failures > 0)); then
  echo "help_test: $failures failure(s)" >&2
  exit 1
fi
echo "ok: every program answers --help and -h with its usage and exit status 0"
