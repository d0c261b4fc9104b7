#!/usr/bin/env bash
# Builds here, without a GPU, what perf/gpu/run_all.sh builds on the GPU machine (topocoll for one
# CUDA architecture, and nccl-tests' three binaries when NCCL_TESTS_SRC names a source tree), and
# packs it to travel with the device call: a fresh GPU machine then starts its checks at once
# instead of after its build (~90 s of a 900 s session, nccl-tests 42 s more).
#
#   NCCL_TESTS_SRC=perf/gpu/nccl-tests bash perf/gpu/prebuild.sh [ARCH]   (default 90: H100, H200)
#
# Writes perf/gpu/prebuilt/build-gpu.tar.xz (~15 MB) and build-gpu.txt (its stamp), both ignored
# by git: carry perf/gpu/prebuilt. run_all.sh unpacks it into build-gpu when the stamp says it was
# built from the same sources (HEAD, the uncommitted changes and untracked files), for the same
# source root (ctest's lists name absolute paths: the device machine's copy of the repository is
# at the same path as this one) and the GPU's architecture; otherwise it says why and builds.
# The programs need, on the GPU machine, only what its own build's programs need: glibc and
# libstdc++ at least as new as here's, CUDA 13's libcudart for the test programs that link it,
# and the NCCL that run_all.sh puts first on LD_LIBRARY_PATH (NCCL's soname, libnccl.so.2).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:-90}
[[ "$arch" =~ ^[0-9]+$ ]] || { echo "prebuild.sh: ARCH must be a number such as 90, not '$arch'" >&2; exit 2; }
build=$root/build-gpu
dest=$root/perf/gpu/prebuilt
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_home/bin:$PATH"
# shellcheck source=perf/gpu/gpu_build.sh
. "$root/perf/gpu/gpu_build.sh"

sources=$(prebuilt_stamp "$root") || { echo "prebuild.sh: $root is not a git checkout" >&2; exit 1; }
mkdir -p "$build"
gpu_configure "$root" "$build" "$arch" > "$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j"$jobs"
nccl_tests=none
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
  NCCL_TESTS_SRC=$(realpath "$NCCL_TESTS_SRC")
  nccl_tests_make "$NCCL_TESTS_SRC" "$build" "$arch" "${NCCL_HOME:-$cuda_home}" "$cuda_home" "$jobs" > "$build/nccl-tests-build.log" 2>&1 ||
    { tail -n 30 "$build/nccl-tests-build.log" >&2; exit 1; }
  nccl_tests="all_reduce_perf reduce_scatter_perf all_gather_perf from $NCCL_TESTS_SRC ($(grep -m1 -o 'NCCL_TESTS_VERSION[^"]*"[^"]*"' "$NCCL_TESTS_SRC/src/common.h" 2>/dev/null || echo "version unknown"))"
fi
# The sources must not have changed while they were built.
[ "$(prebuilt_stamp "$root")" = "$sources" ] || { echo "prebuild.sh: the sources changed during the build; run it again" >&2; exit 1; }

cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }
touch "$build/.built"
{
  echo "sources: $sources"
  echo "commit: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ' with uncommitted changes')"
  echo "source-root: $root"
  echo "build-dir: $build"
  echo "cuda-arch: $arch"
  echo "made: $(date -u '+%Y-%m-%d %H:%M UTC'), $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -n)"
  echo "compilers: $(cache CMAKE_CXX_COMPILER) ($("$(cache CMAKE_CXX_COMPILER)" -dumpfullversion)), nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "nccl: $(cache NCCL_LIBRARY) (headers $(cache NCCL_INCLUDE_DIR))"
  echo "nccl-tests: $nccl_tests"
  echo "cmake: $(cache CMAKE_COMMAND)"
  echo "readelf: $(cache CMAKE_READELF)"
} > "$build/prebuilt.txt"
mkdir -p "$dest"
cp "$build/prebuilt.txt" "$dest/build-gpu.txt"
# Objects, static libraries, CMake's own files and the precompiled headers stay here.
tar -C "$root" -cf - --exclude=CMakeFiles --exclude='*.o' --exclude='*.a' --exclude='*.gch' \
    --exclude="$(basename "$build")/deps" "$(basename "$build")" | xz -6 -T"$jobs" > "$dest/build-gpu.tar.xz.tmp"
mv "$dest/build-gpu.tar.xz.tmp" "$dest/build-gpu.tar.xz"
echo "prebuild.sh: $(du -h "$dest/build-gpu.tar.xz" | cut -f1) in $dest/build-gpu.tar.xz, for $(prebuilt_field "$build/prebuilt.txt" commit), sm_$arch"
echo "carry perf/gpu/prebuilt (and perf/gpu/debs for the fabric's iproute2)"
