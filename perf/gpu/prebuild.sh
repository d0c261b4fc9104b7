#!/usr/bin/env bash
# Builds here, without a GPU, what perf/gpu/run_all.sh builds on the GPU machine (topocoll for one
# CUDA architecture, and nccl-tests' three binaries when NCCL_TESTS_SRC names a source tree), and
# packs it to travel with the device call: a fresh GPU machine then starts its checks at once
# instead of after its build (~90 s of 900 s of GPU time, nccl-tests 42 s more).
#
#   NCCL_TESTS_SRC=perf/gpu/nccl-tests bash perf/gpu/prebuild.sh [ARCH]   (default 90: H100, H200)
#
# Writes perf/gpu/prebuilt/build-gpu.tar.xz (~16 MB) and build-gpu.txt (its stamp), both ignored
# by git: carry perf/gpu/prebuilt. run_all.sh unpacks it into build-gpu when the stamp says it was
# built from the same sources (every file git tracks or would track, by content, less what no
# build reads: perf/results, docs, *.md and perf/gpu's own scripts: perf/gpu/source_stamp.py),
# for the same source root and build directory (ctest's lists name absolute paths: the device
# machine's copy of the repository is at the same path as this one), the GPU's architecture,
# the NCCL version the checks load there and the same CUDA major; otherwise it says why and
# builds. The programs need, on the GPU machine, only what its own
# build's programs need: glibc and libstdc++ at least as new as here's, CUDA 13's libcudart for
# the test programs that link it, and the NCCL run_all.sh puts first on LD_LIBRARY_PATH.
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

if [ -n "${NCCL_TESTS_SRC:-}" ] && [ ! -f "$NCCL_TESTS_SRC/src/common.h" ]; then
  echo "prebuild.sh: NCCL_TESTS_SRC=$NCCL_TESTS_SRC is no nccl-tests source tree (no src/common.h):" \
       "put nccl-tests there first (docs/gpu-checks.md), or unset it" >&2
  exit 2
fi
sources=$(prebuilt_stamp "$root") || { echo "prebuild.sh: cannot stamp the sources of $root" >&2; exit 1; }
mkdir -p "$build"
# A fresh configure: only the flags run_all.sh gives count, none left in the cache by another.
rm -f "$build/CMakeCache.txt" "$build/prebuilt.txt"
gpu_configure "$root" "$build" "$arch" > "$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j"$jobs"
nccl_tests=none
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
  NCCL_TESTS_SRC=$(realpath "$NCCL_TESTS_SRC")
  rm -f "$build/nccl-tests/"*_perf
  nccl_tests_make "$NCCL_TESTS_SRC" "$build" "$arch" "${NCCL_HOME:-$cuda_home}" "$cuda_home" "$jobs" > "$build/nccl-tests-build.log" 2>&1 ||
    { tail -n 30 "$build/nccl-tests-build.log" >&2; exit 1; }
  nccl_tests="all_reduce_perf reduce_scatter_perf all_gather_perf from $NCCL_TESTS_SRC ($(grep -m1 -o 'NCCL_TESTS_VERSION[^"]*"[^"]*"' "$NCCL_TESTS_SRC/src/common.h" 2>/dev/null || echo "version unknown"))"
else
  rm -rf "$build/nccl-tests"  # none from an earlier run passes for this one's
fi
# The sources must not have changed while they were built.
[ "$(prebuilt_stamp "$root")" = "$sources" ] || { echo "prebuild.sh: the sources changed during the build; run it again" >&2; exit 1; }

touch "$build/.built"
prebuilt_describe "$root" "$build" "$arch" "$sources" "$nccl_tests" > "$build/prebuilt.txt"
prebuilt_pack "$build" "$dest" "$jobs" || { echo "prebuild.sh: packing $build failed" >&2; exit 1; }
# Here the build stays a build (run_all.sh must not take its objects' absence for granted).
rm -f "$build/prebuilt.txt"
echo "prebuild.sh: $(du -h "$dest/build-gpu.tar.xz" | cut -f1) in $dest/build-gpu.tar.xz, for $(prebuilt_field "$dest/build-gpu.txt" commit), sm_$arch"
echo "carry perf/gpu/prebuilt (and perf/gpu/debs for the fabric's iproute2)"
