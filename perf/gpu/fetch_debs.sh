#!/usr/bin/env bash
# On a Debian 12 (bookworm) machine with network access: downloads the .deb files the GPU machine
# lacks and cannot fetch (it has no network) into DIR (default perf/gpu/debs, ignored by
# git), for perf/gpu/run_all.sh to unpack there with dpkg -x. Build: nlohmann-json and
# GoogleTest. Emulated fabric (topocoll fabric): iproute2 and the libraries its ip and tc
# need on Ubuntu 24.04's base image.
#
#   perf/gpu/fetch_debs.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/perf/gpu/debs}
# The package names below are Debian 12's (Ubuntu 24.04 renamed several: libelf1t64 ...).
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ "$codename" != bookworm ]; then
  echo "fetch_debs.sh: run this on Debian 12 (bookworm), not '${codename:-unknown}': the package" \
       "names and the libraries they were built against are Debian 12's" >&2
  exit 1
fi
mkdir -p "$dir"
packages=(nlohmann-json3-dev libgtest-dev libgmock-dev googletest
          iproute2 libbpf1 libmnl0 libxtables12 libdb5.3 libelf1 libcap2 libtirpc3 libbsd0 libmd0)
[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ] || apt-get update -qq
cd "$dir"
apt-get download "${packages[@]}" >/dev/null
ls -1 "$dir"/*.deb | sed 's|.*/||'
echo "$(ls -1 "$dir"/*.deb | wc -l) packages, $(du -sh "$dir" | cut -f1), in $dir"
