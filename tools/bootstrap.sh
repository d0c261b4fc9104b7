#!/usr/bin/env bash
# Installs what the build needs (Debian 12 or Ubuntu 22.04/24.04, as root or with sudo),
# configures and builds. Shared by tools/demo.sh, tools/test.sh, .ci/run and the Dockerfile so
# their steps agree.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(cmake g++ make pkg-config python3 nlohmann-json3-dev libgtest-dev libgmock-dev
          libibverbs-dev graphviz clang binutils python3-jsonschema iproute2
          openmpi-bin libopenmpi-dev shellcheck procps)
# The fuzzers' runtime (tools/fuzz.sh) under Debian 12's name; where no package has that name
# (Ubuntu 22.04's clang carries its runtime itself) it is skipped, not an error.
OPTIONAL_PACKAGES=(libclang-rt-14-dev)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
optional=()
for p in "${OPTIONAL_PACKAGES[@]}"; do
  installed "$p" || ! apt-cache show "$p" > /dev/null 2>&1 || optional+=("$p")
done
if ((${#optional[@]})); then
  echo "bootstrap: installing ${optional[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null
fi

JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
