#!/usr/bin/env bash
# Makes the base image debian:bookworm-slim on this machine's Docker engine, for an engine that
# cannot pull from a registry: Debian 12 (debootstrap --variant=minbase) from the mirror this
# machine's apt already uses, imported under that tag. About a minute; nothing if the tag exists.
# Usage: deploy/make-base-image.sh [--force]   (--force: make it again even if the tag exists)
set -euo pipefail
force=0
for arg in "$@"; do
  case $arg in
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --force) force=1 ;;
    *) echo "make-base-image: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
tag=debian:bookworm-slim
if ((force == 0)) && docker image inspect "$tag" > /dev/null 2>&1; then
  echo "make-base-image: $tag is present"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ! command -v debootstrap > /dev/null; then
  echo "make-base-image: installing debootstrap"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends debootstrap
fi

# The first Debian mirror apt is configured with (deb822 sources or the one-line format).
mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\/\{0,1\}\)$/\1/p' /etc/apt/sources.list.d/*.sources \
  2> /dev/null | head -n 1 || true)
if [[ -z $mirror ]]; then
  mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) bookworm .*/\2/p' /etc/apt/sources.list \
    2> /dev/null | head -n 1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
security=$(sed -n 's/^URIs: *\([^ ]*\/debian-security\/\{0,1\}\)$/\1/p' \
  /etc/apt/sources.list.d/*.sources 2> /dev/null | head -n 1 || true)
security=${security:-http://security.debian.org/debian-security}

root=$(mktemp -d)
trap '$SUDO rm -rf --one-file-system "$root" "$root.log"' EXIT
echo "make-base-image: debootstrap bookworm from $mirror"
$SUDO debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 || {
  tail -n 20 "$root.log" >&2
  echo "make-base-image: debootstrap failed (log above)" >&2
  exit 1
}
# As the published image: apt reads bookworm, its updates and the security archive; no package
# files or lists are kept.
$SUDO rm -f "$root/etc/apt/sources.list"
$SUDO tee "$root/etc/apt/sources.list.d/debian.sources" > /dev/null <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
$SUDO find "$root/var/cache/apt/archives" "$root/var/lib/apt/lists" -type f -delete
$SUDO tar -C "$root" -c . | docker import --change 'CMD ["bash"]' - "$tag" > /dev/null
echo "make-base-image: $tag made ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
