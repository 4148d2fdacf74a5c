#!/usr/bin/env bash
# Issue 19 §2: started from the usual umask 022, the files the server and the CLI create that
# hold protected data or a secret are readable by their owner only (mode 0600): the SQLite
# database and its -wal and -shm while a server runs, a key written by `bootstrap --out` and by
# `account create --out`, a backup, and a CLI --out file. A key file is never written over an
# existing file, and refusing one creates no account.
# Usage: tests/file_modes_test.sh SERVER_BINARY CLI_BINARY
set -uo pipefail
if (($# != 2)); then
  echo "usage: tests/file_modes_test.sh SERVER_BINARY CLI_BINARY" >&2
  exit 2
fi
server=$1
cli=$2
umask 022
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# expect_mode FILE MODE: FILE exists with exactly that mode.
expect_mode() {
  if [[ ! -e $1 ]]; then
    fail "$1 does not exist"
  elif [[ $(stat -c %a "$1") != "$2" ]]; then
    fail "$1 has mode $(stat -c %a "$1"), want $2"
  else
    echo "ok: $(basename "$1") is $2"
  fi
}
db=$work/vault.db

# The database, created by bootstrap (the key on stdout, as before).
"$server" bootstrap --db "$db" --name regulator > "$work/stdout.key" 2>/dev/null ||
  fail "bootstrap exited $?"
expect_mode "$db" 600

# bootstrap --out: a new 0600 key file; an existing one is refused before any account exists.
"$server" bootstrap --db "$db" --name reg2 --out "$work/reg2.key" 2>"$work/err" ||
  fail "bootstrap --out exited $?: $(cat "$work/err")"
expect_mode "$work/reg2.key" 600
[[ $(cat "$work/reg2.key" 2>/dev/null) == fv_* ]] || fail "reg2.key does not hold an API key"
echo "keep me" > "$work/taken.key"
"$server" bootstrap --db "$db" --name reg3 --out "$work/taken.key" 2>"$work/err"
rc=$?
((rc == 2)) || fail "bootstrap --out onto an existing file exited $rc, want 2"
grep -q "exists" "$work/err" || fail "bootstrap's refusal does not say the file exists"
[[ $(cat "$work/taken.key") == "keep me" ]] || fail "bootstrap --out overwrote an existing file"
# reg3 was not created: the name is still free.
"$server" bootstrap --db "$db" --name reg3 > /dev/null 2>&1 ||
  fail "the refused bootstrap --out created the account reg3"

# A running server: its -wal and -shm files.
"$server" serve --db "$db" --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^fairvault-server listening on port //p' "$work/server.out")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { fail "the server did not start: $(cat "$work/server.log")"; exit 1; }
fv() { "$cli" --server "127.0.0.1:$port" --key-file "$work/reg2.key" "$@"; }
fv dataset create --name modes --attribute sex=F,M > /dev/null || fail "dataset create exited $?"
expect_mode "$db-wal" 600
expect_mode "$db-shm" 600

# account create --out: a new 0600 key file that works; an existing file is refused, no account.
fv account create --name acme --role company --out "$work/acme.key" > "$work/out" 2>&1 ||
  fail "account create --out exited $?: $(cat "$work/out")"
expect_mode "$work/acme.key" 600
grep -q "fv_" "$work/out" && fail "account create --out also printed the key"
"$cli" --server "127.0.0.1:$port" --key-file "$work/acme.key" dataset list > /dev/null ||
  fail "the key written by account create --out does not authenticate"
fv account create --name acme2 --role company --out "$work/taken.key" > /dev/null 2>&1
rc=$?
((rc == 2)) || fail "account create --out onto an existing file exited $rc, want 2"
[[ $(cat "$work/taken.key") == "keep me" ]] || fail "account create --out overwrote a file"
fv account list | grep -q acme2 && fail "the refused account create --out created acme2"

# A backup while the server runs; a second one to the same name is refused.
"$server" backup --db "$db" --out "$work/backup.db" > /dev/null 2>"$work/err" ||
  fail "backup exited $?: $(cat "$work/err")"
expect_mode "$work/backup.db" 600
"$server" backup --db "$db" --out "$work/backup.db" > /dev/null 2>&1 &&
  fail "a second backup onto the same file succeeded"

# A CLI --out file (a local command: the sweep page).
printf 'epsilon,error,violation\n1,0.2,0.1\n2,0.15,0.05\n' > "$work/sweep.csv"
"$cli" report sweep --csv "$work/sweep.csv" --out "$work/sweep.html" > /dev/null ||
  fail "report sweep exited $?"
expect_mode "$work/sweep.html" 600

if ((failures > 0)); then
  echo "file_modes_test: $failures failure(s)" >&2
  exit 1
fi
echo "ok: database, -wal, -shm, key files, backup and CLI output are 0600 under umask 022"
