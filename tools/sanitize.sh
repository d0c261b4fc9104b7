#!/usr/bin/env bash
# Sanitizer check, kept out of tools/test.sh for time: AddressSanitizer + UndefinedBehavior-
# Sanitizer over the whole CPU suite, ThreadSanitizer over the suites that run threads (net
# transport, net plugin, exec backends, interposer group queue), and both over the host
# emulation (docs/emulation.md): the interposer's production sources end to end in several
# processes, and the NCCL emulation's own tests. Any report fails its test: UBSan is built
# with -fno-sanitize-recover, ASan and TSan exit non-zero on a report.
#
#   tools/sanitize.sh [asan|tsan|emu|all]     (default all; JOBS=2 to limit the build)
#
# Build directories: build-asan, build-tsan and build-asan-emu / build-tsan-emu
# (ASAN_BUILD_DIR / TSAN_BUILD_DIR / EMU_BUILD_DIR override the prefix "build-").
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
case "$which" in asan | tsan | emu | all) ;; *) echo "usage: $0 [asan|tsan|emu|all]" >&2; exit 2 ;; esac
jobs=${JOBS:-$(nproc)}
asan_dir=${ASAN_BUILD_DIR:-build-asan}
tsan_dir=${TSAN_BUILD_DIR:-build-tsan}
emu_prefix=${EMU_BUILD_DIR:-build-}
common=(-DTOPOCOLL_ENABLE_CUDA=OFF -DTOPOCOLL_BUILD_PERF=OFF -DCMAKE_BUILD_TYPE=Debug)

# Leaks are findings too; stacks make reports actionable. A forked rank that reports exits
# non-zero, which its test checks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1}

status=0
if [ "$which" = asan ] || [ "$which" = all ]; then
  echo "sanitize: AddressSanitizer + UndefinedBehaviorSanitizer, whole CPU suite ($asan_dir)"
  cmake -S . -B "$asan_dir" "${common[@]}" -DTOPOCOLL_SANITIZE=address,undefined >/dev/null
  cmake --build "$asan_dir" -j"$jobs"
  ctest --test-dir "$asan_dir" -j"$jobs" --output-on-failure -LE gpu || status=1
fi

if [ "$which" = tsan ] || [ "$which" = all ]; then
  echo "sanitize: ThreadSanitizer, threaded suites ($tsan_dir)"
  cmake -S . -B "$tsan_dir" "${common[@]}" -DTOPOCOLL_SANITIZE=thread >/dev/null
  # Only the threaded suites are built; ctest lists the others as *_NOT_BUILT, skipped below.
  targets=(net_tests interposer_group_queue exec_tests exec_slow_tests plugin_net_tests)
  cmake --build "$tsan_dir" -j"$jobs" --target "${targets[@]}"
  # The multi-process socket group tests fork eight ranks each under a wall-clock deadline;
  # ThreadSanitizer slows every process ~5-15x, so they run alone, the rest in parallel.
  alone='^(SocketGroup\.|KillAndStop/FaultMatrix\.|Bootstrap\.)'
  ctest --test-dir "$tsan_dir" -j"$jobs" --output-on-failure -LE gpu -E "_NOT_BUILT\$|$alone" || status=1
  ctest --test-dir "$tsan_dir" --output-on-failure -LE gpu -R "$alone" || status=1
fi

if [ "$which" = emu ] || [ "$which" = all ]; then
  # The emulation needs the CUDA headers (not a GPU): CUDA on, but only host targets built.
  # The interposer is LD_PRELOADed ahead of the sanitizer runtime the program links; both
  # are instrumented, so the runtime's link-order check is switched off for these runs.
  emu_targets=(nccl-topocoll-emu interposer_emu_check nccl_emu_test cudart_emu_test net_spy_plugin net_proxy_threads_test
                step_timeline_emu_test)
  for san in asan tsan; do
    dir=${emu_prefix}$san-emu
    flags=address,undefined scale=4
    [ $san = tsan ] && flags=thread scale=12
    echo "sanitize: $flags, host emulation ($dir)"
    cmake -S . -B "$dir" -DTOPOCOLL_ENABLE_CUDA=ON -DTOPOCOLL_BUILD_PERF=OFF -DCMAKE_BUILD_TYPE=Debug \
        -DTOPOCOLL_SANITIZE=$flags -DTOPOCOLL_EMU_TIME_SCALE=$scale >/dev/null
    cmake --build "$dir" -j"$jobs" --target "${emu_targets[@]}"
    ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 \
        ctest --test-dir "$dir" -j"$jobs" --output-on-failure -R '^(InterposerEmulated|NcclEmu|CudartEmu|EmulatedNetProxyThreads|StepTimelineEmu)' || status=1
  done
fi

if [ "$status" -ne 0 ]; then
  echo "sanitize: FAILED (see the reports above)" >&2
else
  echo "sanitize: clean"
fi
exit "$status"
