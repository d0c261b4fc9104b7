#!/usr/bin/env bash
# Installs what the build needs (Debian 12, as root or with sudo), configures and builds.
# Shared by tools/demo.sh, tools/test.sh, .ci/run and the Dockerfile so their steps agree.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(cmake g++ make pkg-config python3 nlohmann-json3-dev libgtest-dev libgmock-dev
          libibverbs-dev graphviz clang libclang-rt-14-dev binutils python3-jsonschema iproute2
          openmpi-bin libopenmpi-dev shellcheck)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
