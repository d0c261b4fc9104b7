#!/usr/bin/env bash
# perf/gpu/run_all.sh keeps a call inside the GPU machine's budget (docs/gpu-checks.md), on a
# stand-in build whose check program passes for 2 ranks and hangs for more:
#   - the 2-rank smoke check runs first; when it fails, nothing else runs;
#   - DEADLINE_S ends a hung check ("killed at deadline") and starts nothing in its last 10 s;
#   - a script stopped from outside (TERM, or KILL: no trap) still has the stopped check's row;
#   - RESULTS_TAR holds the record after every check and at exit;
#   - no rank is left running.
#   gpu_run_all_bounds_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
build=$work/build
mkdir -p "$build/plugin" "$build/tests/interposer"
touch "$build/CMakeCache.txt" "$build/.built"
echo "not a library" > "$build/plugin/libnccl-topocoll.so"
marker="run-all-bounds-$$"
cat > "$build/tests/interposer/interposer_gpu_check" <<CHECK
#!/usr/bin/env bash
# topology --nranks N --out FILE: N hosts; check --rank R --nranks N ...: served, then
# passes for 2 ranks (FAIL_SMOKE=1: fails) and hangs for more.
if [ "\$1" = topology ]; then for ((i = 0; i < \$3; i++)); do echo "s\$i gpu0"; done; echo '{}' > "\$5"; exit 0; fi
echo "topocoll: communicator 0x1 rank \$3/\$5 served on topology 'stand-in'"
if [ "\$5" = 2 ]; then [ "\${FAIL_SMOKE:-0}" = 1 ] && exit 3; exit 0; fi
exec -a $marker sleep 1000
CHECK
chmod +x "$build/tests/interposer/interposer_gpu_check"
run_all() { env -u NCCL_TESTS_SRC MPS=0 STAGES=check-small "$@" bash "$src/perf/gpu/run_all.sh" "$build"; }
no_rank_left() {
  for _ in $(seq 50); do pgrep -f "$marker" > /dev/null || return 0; sleep 0.2; done
  pkill -KILL -f "$marker"
  fail "$1: a rank outlived the call"
}

# The deadline: the 2-rank checks pass, the first 4-rank one is killed, the rest not started.
out=$work/deadline
run_all RESULTS_DIR="$out" RESULTS_TAR="$work/deadline.tgz" DEADLINE_S=30 > "$work/deadline.log" 2>&1 &&
  fail "a call with a killed check passed"
grep -q "| smoke-n2-auto | pass |" "$out/summary.md" || fail "no smoke check first: $(cat "$out/summary.md")"
grep -q "| check-n2-hd | pass |" "$out/summary.md" || fail "the 2-rank checks did not pass"
grep -q "| check-n4-auto | FAIL: killed at deadline" "$out/summary.md" || fail "no killed-at-deadline row: $(cat "$out/summary.md")"
grep -q "| check-n4-nccl-topo-ring | not run: under 10 s before DEADLINE_S" "$out/summary.md" ||
  fail "a check started in the deadline's last 10 s"
tar -xzf "$work/deadline.tgz" -O deadline/summary.md | grep -q "killed at deadline" || fail "RESULTS_TAR lacks the record"
no_rank_left deadline

# The smoke check fails: the call stops there.
out=$work/smoke
run_all RESULTS_DIR="$out" FAIL_SMOKE=1 DEADLINE_S=60 > "$work/smoke.log" 2>&1 && fail "a failed smoke check passed"
grep -q "| smoke-n2-auto | FAIL" "$out/summary.md" || fail "no failed smoke row: $(cat "$out/summary.md")"
! grep -q "check-n2-auto" "$out/summary.md" || fail "checks ran after a failed smoke check"
grep -q "stopping; SMOKE=0 skips it" "$work/smoke.log" || fail "the stop was not said"

# Stopped from outside (the device's limit, an outer timeout) with no deadline set.
out=$work/stopped
# 10 s: on a loaded machine 6 s could end it before its first check had begun.
timeout 10 env -u NCCL_TESTS_SRC MPS=0 STAGES=check-n8 RESULTS_DIR="$out" RESULTS_TAR="$work/stopped.tgz" \
  RANK_TIMEOUT_S=30 SMOKE=0 bash "$src/perf/gpu/run_all.sh" "$build" > "$work/stopped.log" 2>&1
grep -q "| check-n8-auto | killed: the script was stopped during it |" "$out/summary.md" ||
  fail "the stopped check has no row: $(cat "$out/summary.md")"
tar -xzf "$work/stopped.tgz" -O stopped/summary.md | grep -q "killed: the script was stopped" ||
  fail "RESULTS_TAR lacks the stopped call's record"
pkill -TERM -f "$marker" 2> /dev/null  # the stopped call's own ranks end at their RANK_TIMEOUT_S
no_rank_left stopped

# Killed outright (SIGKILL: no trap runs): the row and the archive were written before the check.
out=$work/killed
timeout -s KILL 8 env -u NCCL_TESTS_SRC MPS=0 STAGES=check-n8 RESULTS_DIR="$out" RESULTS_TAR="$work/killed.tgz" \
  RANK_TIMEOUT_S=30 SMOKE=0 bash "$src/perf/gpu/run_all.sh" "$build" > "$work/killed.log" 2>&1
grep -q "| check-n8-auto | killed: the script was stopped during it |" "$out/summary.md" ||
  fail "the killed call's check has no row: $(cat "$out/summary.md")"
tar -xzf "$work/killed.tgz" -O killed/summary.md | grep -q "| check-n8-auto | killed: the script was stopped" ||
  fail "RESULTS_TAR lacks the killed call's running check"
pkill -TERM -f "$marker" 2> /dev/null
no_rank_left killed
# A stage asked for by name that cannot run fails the call (no nccl-tests here): a call made
# for it must not read as passed.
out=$work/asked
env -u NCCL_TESTS_SRC MPS=0 STAGES=nccl-tests RESULTS_DIR="$out" SMOKE=0 PATH=/usr/bin:/bin \
  bash "$src/perf/gpu/run_all.sh" "$build" > "$work/asked.log" 2>&1 && fail "a stage that could not run passed"
grep -q "| nccl-tests | FAIL: asked for (STAGES) but cannot run" "$out/summary.md" ||
  fail "no failed row for the stage asked for: $(cat "$out/summary.md")"
echo "run_all.sh stays inside its bounds"
