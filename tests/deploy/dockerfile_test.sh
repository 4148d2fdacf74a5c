#!/usr/bin/env bash
# deploy/Dockerfile cannot drift from the build (no Docker engine is needed):
#  - its build stage installs deploy/install-deps.sh's list by running that script, and installs
#    nothing of its own, so the image builds with exactly what CI builds with;
#  - it builds only fairvault-server and fairvault, Release, into /usr/local/bin;
#  - its runtime stage installs one Debian package for every shared library the two binaries
#    link directly (objdump NEEDED -> ldd -> dpkg -S, on the binaries this build made), and no
#    package that none of them needs (except the libraries of work in progress on issue 11 that
#    a build may not link yet: libpq5 for the PostgreSQL store, prometheus-cpp for metrics);
#  - non-root user, EXPOSE 50051, a HEALTHCHECK with `fairvault health`;
#  - deploy/postgres/Dockerfile is Debian's postgresql-15 on the same base, with its entrypoint;
#  - .dockerignore keeps secrets, .git and local builds out of the build context.
# Usage: dockerfile_test.sh FAIRVAULT_SERVER_BINARY FAIRVAULT_CLI_BINARY
# No -e: each check records its own failure and the script goes on.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dockerfile="$root/deploy/Dockerfile"
binaries=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check CONDITION-EXIT-STATUS DESCRIPTION
  if [[ $1 == 0 ]]; then echo "ok: $2"; else echo "FAIL: $2" >&2; failures=$((failures + 1)); fi
}
if [[ $(cut -d. -f1 /etc/debian_version 2>/dev/null) != 12 ]]; then
  echo "SKIP: the runtime package names are Debian 12's; this is not Debian 12" >&2
  exit 77
fi

# The Dockerfile's instructions with continuation lines joined and comments dropped, split at
# the runtime stage's FROM.
joined=$(sed -e '/^[[:space:]]*#/d' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
build_stage=$(awk '/^FROM /{n++} n==1' <<< "$joined")
runtime_stage=$(awk '/^FROM /{n++} n==2' <<< "$joined")
[[ $(grep -c '^FROM ' <<< "$joined") == 2 ]]; check $? "two stages"
grep -q '^FROM debian:bookworm-slim AS build$' <<< "$build_stage"; check $? "build stage on debian:bookworm-slim"
grep -q '^FROM debian:bookworm-slim$' <<< "$runtime_stage"; check $? "runtime stage on debian:bookworm-slim"

# ---- build stage: install-deps.sh's list, by running it ----
grep -q '^COPY deploy/install-deps.sh /tmp/install-deps.sh$' <<< "$build_stage" &&
  grep -q '^RUN /tmp/install-deps.sh' <<< "$build_stage"
check $? "the build stage runs deploy/install-deps.sh"
! grep -q 'apt-get' <<< "$build_stage"
check $? "the build stage installs no package of its own (one list: install-deps.sh)"
# install-deps.sh's own list, parsed: every package must be a Debian 12 -dev or tool package it
# installs with no extra argument (the Dockerfile passes none).
deps=$(sed -n '/^packages=(/,/^)/p' "$root/deploy/install-deps.sh" | sed '1d;$d' |
  tr -s ' \t' '\n' | grep -v '^"\$@"$' | grep -v '^$' | sort -u)
for p in cmake g++ libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev libabsl-dev \
  libeigen3-dev libglpk-dev libsqlite3-dev libssl-dev; do
  grep -qx "$p" <<< "$deps"; check $? "install-deps.sh installs $p"
done
grep -q -- '-DCMAKE_BUILD_TYPE=Release' <<< "$build_stage"; check $? "Release build"
grep -Eq -- '--target fairvault-server fairvault$' <<< "$build_stage"
check $? "only the fairvault-server and fairvault targets"

# ---- runtime stage: the libraries the binaries link ----
runtime_packages=$(grep 'apt-get install' <<< "$runtime_stage" |
  sed -e 's/.*--no-install-recommends//' -e 's/&&.*//' | tr -s ' \t' '\n' | grep -v '^$' | sort -u)
[[ -n $runtime_packages ]]; check $? "the runtime stage installs packages"
# Every binary's direct dependencies as "binary soname path" lines.
links=""
for bin in "${binaries[@]}"; do
  ldd_out=$(ldd "$bin")
  for soname in $(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}'); do
    path=$(awk -v s="$soname" '$1 == s && $2 == "=>" {print $3}' <<< "$ldd_out")
    if [[ -z $path ]]; then
      check 1 "$(basename "$bin"): $soname is found by ldd"
      continue
    fi
    links+="$(basename "$bin") $soname $path"$'\n'
  done
done
# Their packages, with one dpkg -S for all paths. dpkg knows a file by the path its package
# ships; with merged /usr, ldd may print the other spelling, so each path is asked both ways.
declare -A package_of
paths=$(awk 'NF {print $3}' <<< "$links" | sort -u)
while read -r path; do
  for candidate in "$path" "/usr$path" "${path#/usr}" "$(realpath "$path")"; do
    echo "$path $candidate"
  done
done <<< "$paths" > "$work/candidates"
# shellcheck disable=SC2046  # the paths have no spaces
dpkg -S $(awk '{print $2}' "$work/candidates" | sort -u) 2> /dev/null |
  sed -e 's/^\([^:, ]*\)[^ ]* \(.*\)$/\1 \2/' > "$work/owners"
while read -r path candidate; do
  if [[ -z ${package_of[$path]:-} ]]; then
    package_of[$path]=$(awk -v c="$candidate" '$2 == c {print $1; exit}' "$work/owners")
  fi
done < "$work/candidates"
needed_packages=""
while read -r bin soname path; do
  [[ -n $bin ]] || continue
  pkg=${package_of[$path]:-}
  if [[ -z $pkg ]]; then
    check 1 "$bin: $soname ($path) belongs to a Debian package"
    continue
  fi
  needed_packages+="$pkg"$'\n'
  echo "  $bin: $soname -> $pkg"
done <<< "$links"
needed_packages=$(grep -v '^$' <<< "$needed_packages" | sort -u)
for pkg in $needed_packages; do
  grep -qx "$pkg" <<< "$runtime_packages"; check $? "runtime stage installs $pkg"
done
for pkg in $runtime_packages; do
  case $pkg in libpq5 | libprometheus-cpp-core1.0 | libprometheus-cpp-pull1.0) continue ;; esac
  grep -qx "$pkg" <<< "$needed_packages"
  check $? "runtime package $pkg is linked by a binary (else drop it)"
done

# ---- the rest of the runtime stage ----
grep -q '^COPY --from=build /build/server/fairvault-server /build/client/fairvault /usr/local/bin/$' \
  <<< "$runtime_stage"; check $? "binaries in /usr/local/bin"
user=$(awk '$1 == "USER" {u = $2} END {print u}' <<< "$runtime_stage")
[[ -n $user && $user != root && $user != 0 ]]; check $? "runs as a non-root user ($user)"
grep -q "useradd .*$user" <<< "$runtime_stage"; check $? "creates the user $user"
grep -q '^EXPOSE 50051$' <<< "$runtime_stage"; check $? "EXPOSE 50051"
grep -Eq '^HEALTHCHECK .*CMD \["fairvault", "health",' <<< "$runtime_stage"
check $? "HEALTHCHECK runs fairvault health"
! grep -q -- '-dev' <<< "$runtime_packages"; check $? "no -dev package at run time"

# ---- deploy/postgres/Dockerfile: Debian's PostgreSQL 15 on the same base ----
pg_dockerfile="$root/deploy/postgres/Dockerfile"
[[ $(grep -c '^FROM ' "$pg_dockerfile") == 1 ]] && grep -qx 'FROM debian:bookworm-slim' "$pg_dockerfile"
check $? "the PostgreSQL image is one stage on debian:bookworm-slim"
grep -q 'apt-get install -y --no-install-recommends postgresql-15 ' "$pg_dockerfile"
check $? "the PostgreSQL image installs Debian's postgresql-15 only"
[[ -x $root/deploy/postgres/entrypoint.sh ]] \
  && grep -q '^COPY deploy/postgres/entrypoint.sh ' "$pg_dockerfile"
check $? "the PostgreSQL image's entrypoint is deploy/postgres/entrypoint.sh (executable)"

# ---- .dockerignore ----
for pattern in .git 'build*' var/ deploy/secrets/ deploy/.env; do
  grep -qxF "$pattern" "$root/.dockerignore"; check $? ".dockerignore excludes $pattern"
done

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all Dockerfile checks passed"
