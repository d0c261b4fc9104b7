#!/usr/bin/env bash
# perf/kernels/run_gpu.sh, the kernels stage of the GPU runs, on a stand-in build (a ctest and
# a kernel_bench that pass or fail as told): it fails when any of its three parts fails, the
# CPU kernel tests included (their status was lost in a pipe, so a failing CPU run passed).
#   gpu_kernels_stage_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/bin" "$work/build/perf/kernels"
touch "$work/build/CMakeCache.txt" "$work/build/prebuilt.txt"
cat > "$work/bin/ctest" <<'STUB'
#!/usr/bin/env bash
# STAGE_FAIL names the run that fails: gpu (-L gpu) or cpu (-LE gpu).
case " $* " in
  *" -LE gpu "*) [ "${STAGE_FAIL:-}" = cpu ] && { echo "0% tests passed, 3 tests failed out of 3"; exit 8; } ;;
  *" -L gpu "*) [ "${STAGE_FAIL:-}" = gpu ] && { echo "0% tests passed, 1 tests failed out of 1"; exit 8; } ;;
esac
echo "100% tests passed, 0 tests failed out of 3"
STUB
cat > "$work/build/perf/kernels/kernel_bench" <<'STUB'
#!/usr/bin/env bash
[ "${STAGE_FAIL:-}" = bench ] && exit 1
json=$2
echo '{}' > "$json"
echo "kernel_bench ran"
STUB
chmod +x "$work/bin/ctest" "$work/build/perf/kernels/kernel_bench"

# One case: the stage with STAGE_FAIL=$2 must exit with status zero or not ($3: 0 or 1).
run_case() {
  local name=$1 failing=$2 want=$3
  mkdir -p "$work/$name"
  env STAGE_FAIL="$failing" KERNELS_RESULTS="$work/$name" PATH="$work/bin:$PATH" \
      bash "$src/perf/kernels/run_gpu.sh" "$work/build" > "$work/$name/log.txt" 2>&1
  local rc=$?
  if [ "$want" = 0 ] && [ "$rc" -ne 0 ]; then cat "$work/$name/log.txt"; fail "$name: exit $rc, want 0"; fi
  if [ "$want" = 1 ] && [ "$rc" -eq 0 ]; then cat "$work/$name/log.txt"; fail "$name: exit 0, want a failure"; fi
  ls "$work/$name"/kernels-*.txt > /dev/null 2>&1 || fail "$name: no record written"
}
run_case all-pass "" 0
run_case gpu-tests-fail gpu 1
run_case cpu-tests-fail cpu 1
run_case bench-fails bench 1
grep -q "CPU tests rc=8" "$work/cpu-tests-fail/log.txt" || fail "the CPU tests' status is not said"
echo "PASS"
