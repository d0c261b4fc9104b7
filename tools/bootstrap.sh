#!/usr/bin/env bash
# Installs what the build needs (Debian 12 or Ubuntu 24.04: CMake 3.24 or later; as root or with sudo),
# configures and builds. Shared by tools/demo.sh, tools/test.sh, .ci/run and the Dockerfile so
# their steps agree.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(cmake g++ make pkg-config python3 nlohmann-json3-dev libgtest-dev libgmock-dev
          libibverbs-dev graphviz clang binutils python3-jsonschema iproute2
          openmpi-bin libopenmpi-dev shellcheck procps git)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The fuzzers' runtime (tools/fuzz.sh), named after the clang installed (Debian 12: 14, Ubuntu
# 24.04: 18, where it is only recommended); where no package has that name it is skipped.
clang_major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
OPTIONAL_PACKAGES=("libclang-rt-${clang_major}-dev")
optional=()
for p in "${OPTIONAL_PACKAGES[@]}"; do
  installed "$p" || ! apt-cache show "$p" > /dev/null 2>&1 || optional+=("$p")
done
if ((${#optional[@]})); then
  echo "bootstrap: installing ${optional[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null
fi
# CMakeLists.txt needs 3.24 ($<LINK_LIBRARY:WHOLE_ARCHIVE,...>): said here, not as a configure error.
cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
if [ "$(printf '%s\n' 3.24 "$cmake_version" | sort -V | head -n 1)" != 3.24 ]; then
  echo "bootstrap: CMake 3.24 or later is needed, found $cmake_version (Debian 12 and Ubuntu 24.04 have it)" >&2
  exit 1
fi

JOBS=${JOBS:-$(nproc)}
# Only topocoll's own status lines: which CUDA and NCCL it took, or that it builds without CUDA.
mkdir -p "$BUILD_DIR"
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" ${CMAKE_ARGS:-} > "$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log" >&2; exit 1; }
grep -E '^-- topocoll:|Warning' "$BUILD_DIR/configure.log" || true
cmake --build "$BUILD_DIR" -j"$JOBS"
