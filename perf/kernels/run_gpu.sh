#!/usr/bin/env bash
# Runs the kernel GPU tests and kernel_bench on this machine's GPU and records both under
# perf/results/kernels-<device>-<date>.{txt,json} (KERNELS_RESULTS: another directory).
#
#   perf/kernels/run_gpu.sh [BUILD_DIR]
#
# BUILD_DIR (default: build-gpu in the repository) is configured if it has no CMakeCache.txt,
# then the kernel test and benchmark targets are built in it (not in a build made elsewhere,
# perf/gpu/prebuild.sh, which holds the programs without what builds them). Exit status:
# non-zero if the GPU tests failed or the benchmark failed; the record is written either way.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)

# shellcheck source=perf/gpu/gpu_build.sh
. "$root/perf/gpu/gpu_build.sh"
if [ ! -f "$build/CMakeCache.txt" ]; then
  gpu_configure "$root" "$build" "" || exit 1
fi
if [ ! -f "$build/prebuilt.txt" ]; then
  cmake --build "$build" -j"$jobs" --target kernels_reduce_cuda_test kernels_cuda_conversion_test kernels_table_test \
        kernels_reduce_cpu_test kernels_narrow_float_test kernel_bench || exit 1
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
[ -n "$gpu" ] || gpu="unknown-gpu"
device=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-*//; s/-*$//')
stamp=$(date -u +%Y%m%d-%H%M)
results=${KERNELS_RESULTS:-$root/perf/results}
mkdir -p "$results"
out="$results/kernels-$device-$stamp"

{
  echo "# topocoll kernels on $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
             --format=csv 2>/dev/null
  echo
  echo "## GPU tests (ctest -L gpu -R Kernels)"
} > "$out.txt"

ctest --test-dir "$build" -L gpu -R Kernels --no-tests=error --output-on-failure --timeout 900 2>&1 | tee -a "$out.txt"
tests_rc=${PIPESTATUS[0]}

echo "## CPU kernel tests (ctest -LE gpu -R Kernels)" | tee -a "$out.txt"
ctest --test-dir "$build" -LE gpu -R Kernels --no-tests=error --output-on-failure > "$out.cpu.log" 2>&1
cpu_rc=$?
grep -E "tests passed|Failed|\*\*\*" "$out.cpu.log" | tee -a "$out.txt"
rm -f "$out.cpu.log"

echo "## kernel_bench" | tee -a "$out.txt"
"$build/perf/kernels/kernel_bench" --json "$out.json" 2>&1 | tee -a "$out.txt"
bench_rc=${PIPESTATUS[0]}

echo "wrote $out.txt and $out.json (tests rc=$tests_rc, CPU tests rc=$cpu_rc, bench rc=$bench_rc)"
[ "$tests_rc" -eq 0 ] && [ "$cpu_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
