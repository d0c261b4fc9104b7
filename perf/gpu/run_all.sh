#!/usr/bin/env bash
# The whole GPU check of topocoll, on a machine with (at least) one GPU, in stages that
# each fit in one 10-minute call of a fresh machine (the build, ~90 s on 16 cores, comes
# first whenever BUILD_DIR holds none; it is for the GPU's own architecture only, and
# nccl-tests, when a stage wants it, is built beside it; a build made without a GPU from the
# same sources, perf/gpu/prebuild.sh's perf/gpu/prebuilt/build-gpu.tar.xz (PREBUILT), is
# unpacked instead when it matches, in ~2 s):
#
#   perf/gpu/run_all.sh [BUILD_DIR]          (default BUILD_DIR: build-gpu in the repository)
#   STAGES="kernels ctest" RESULTS_DIR=/tmp/gpu RESULTS_TAR=$OUT/gpu.tgz DEADLINE_S=540 perf/gpu/run_all.sh
#
# Stages (STAGES, default: all of them, in this order):
#   build           configure and build (implied by every other stage when nothing is built;
#                   nothing to do in a prebuilt build)
#   kernels         the kernels' GPU tests and kernel_bench (perf/kernels/run_gpu.sh)
#   kernels-repeat  the kernel GPU tests again: REPEAT (3) times in one process, and the
#                   ctest cases 8 at a time, twice (GPU streams of several processes at
#                   once); one pass of the test binary takes ~40 s on an H200, so the stage
#                   takes ~2.5 minutes
#   ctest           every other test labelled gpu, the interposer's CPU tests, the
#                   runtime-dependency check (no libcudart.so NEEDED) and the forwarding cost
#   check-small     2 and 4 processes on the one GPU, each its own NCCL "host"
#                   (NCCL_HOSTID=s<rank>, NCCL_SOCKET_IFNAME=lo), every collective through
#                   LD_PRELOAD=libnccl-topocoll.so against an exact CPU reference (types, ops,
#                   uneven counts, in/out of place, user groups, CUDA graphs, split
#                   communicators), TOPOCOLL_ALGO=auto, hd, ring-topo, nccl-topo-ring
#   check-n8        the same with 8 processes
#   check-nap       NAP (4 and 8 processes) with fc, fc-direct and hier
#   check-variants  the topology-ordered split lazy and off, auto with no margin, a scratch
#                   cap, pipelined steps at 64 KiB, step times (TOPOCOLL_STEP_TIMES: CUDA's
#                   timing events, every rank logs them, none dropped)
#   net             the net plugin loaded by NCCL (NCCL_NET_PLUGIN, no LD_PRELOAD): 2 and 4
#                   processes of the same check with NCCL's own collectives, then with the
#                   interposer and the tuner loaded too
#   bench           2, 4 and 8 processes, topocoll's entry points beside NCCL's own (pnccl*)
#                   in one run, auto and hd (and hd unpipelined), under MPS
#   torch           perf/gpu/torch_check.py under torchrun with LD_PRELOAD (if PyTorch is there)
#   nccl-tests      all_reduce_perf -c 1 under mpirun, 2 and 4 ranks, NCCL alone, through
#                   LD_PRELOAD and with the tuner (NCCL_TESTS_SRC names a nccl-tests tree);
#                   one run each, in turn: its table's ratios are one sample each
#   net-vs-socket   all_reduce_perf, 2 and 4 ranks: topocoll's net plugin (by default, and
#                   striping over 4 sockets per connection) beside NCCL's own Socket transport,
#                   interleaved rounds, under MPS, on a topology whose NICs report what
#                   Socket reports for lo (10 Gb/s, latency 0), so NCCL tunes both alike;
#                   net-vs-socket-n*.md gives each arm's median over the rounds and its
#                   ratio to Socket's per size
#   fabric-nccl     nccl-tests over an emulated BiGraph and NAP fabric (`topocoll fabric`), one
#                   namespace and NCCL host per rank, plain NCCL against NCCL with topocoll,
#                   beside the cost model's predictions (perf/gpu/fabric_nccl_tests.sh; its
#                   record perf/results/gpu-fabric-<device>-<date>/, FABRIC_RESULTS_DIR, also
#                   copied into RESULTS_DIR). Resumable: each call runs what fits its 10 minutes
# "check" stands for the four check-* stages.
#
# What a fresh GPU machine lacks travels with the repository (perf/gpu/fetch_debs.sh):
#   DEPS_DIR (default perf/gpu/debs): .deb files unpacked with dpkg -x into BUILD_DIR/deps
#            when the build does not find nlohmann-json and GoogleTest on the system, or the
#            machine has no iproute2 (the fabric then runs BUILD_DIR/deps' ip and tc with
#            their own libraries: TOPOCOLL_FABRIC_IPROUTE2; nothing else sees those libraries);
#   NCCL:    NCCL_HOME if set, else the nvidia-nccl wheel of python3 (the NCCL PyTorch
#            loads), else what CMake finds; that library is first on LD_LIBRARY_PATH for
#            every process, so all stages run one NCCL (device.txt names it);
#   MPS:     every stage after the kernel stages (several processes on the one GPU) runs
#            under nvidia-cuda-mps-control, stopped at exit (MPS=0: time-sliced): without it
#            every process waits for its time slice (4 KiB allreduce, 4 ranks: 27 ms
#            without MPS, 0.22 ms with it), and the checks take 3-4x as long.
#   STOP_AFTER_S: a check that would start later than this many seconds into the script is
#            listed in summary.md as not run, not started (a call bounded by the device's
#            10 minutes always ends with its record; a later call runs what it owes); the
#            fabric stage starts only runs predicted to end by then.
#   DEADLINE_S: a hard end, in seconds from the script's start (unset: none). Every command
#            runs under `timeout -k 10` of what is left (the ranks' RANK_TIMEOUT_S, nt's
#            NT_TIMEOUT_S and the fabric stage's budget are cut to it), none starts with
#            under 10 s left, and a check it ends is "killed at deadline" in summary.md: a
#            started check can take minutes (ctest up to 900 s), so STOP_AFTER_S alone
#            does not keep a call inside the device's limit.
#   RESULTS_TAR: a file (the device tool's $OUT/gpu.tgz) that RESULTS_DIR is archived into
#            after every check and at exit: only $OUT comes back, and a call killed at its
#            limit before its own tar would return nothing of what it measured.
#   SMOKE:   with any multi-process stage, one 2-rank check (smoke-n2-auto, SMOKE_TIMEOUT_S,
#            default 60) runs first and a failure ends the script: a broken build or NCCL
#            fails in seconds instead of in every check of the call. SMOKE=0 skips it.
#   NT_TIMEOUT_S (default 60) bounds one nccl-tests run (they take 3-7 s), RANK_TIMEOUT_S
#            (default 300) one rank of a check and the torch stage's torchrun.
#
# Everything lands in RESULTS_DIR (default perf/results/gpu-<device>-<date>/): commands.txt,
# device.txt, one log per check, bench-*.json/txt, nccl-tests tables and summary.md (one
# line per check; later calls with the same RESULTS_DIR append). Exit status 0 only if
# every check that ran passed.
set -uo pipefail
unset NT_TOPOLOGY NT_TOPOLOGY_ARGS  # nt's per-call settings (below), never the caller's

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-gpu}")  # absolute: make -C and the ranks run elsewhere
jobs=$(nproc 2>/dev/null || echo 4)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_home/bin:$PATH"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
[ -n "$gpu" ] || gpu="unknown-gpu"
# The GPU's architecture (9.0 -> 90): topocoll and nccl-tests are built for it alone.
gpu_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '.[:space:]')
[[ "$gpu_cc" =~ ^[0-9]+$ ]] || gpu_cc=""
device=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-*//; s/-*$//')
stamp=$(date -u +%Y%m%d-%H%M)
out=${RESULTS_DIR:-$root/perf/results/gpu-$device-$stamp}
mkdir -p "$out"
summary="$out/summary.md"
failed=0
not_run=""
all_stages="build kernels kernels-repeat ctest check-small check-n8 check-nap check-variants net bench torch nccl-tests net-vs-socket fabric-nccl"
stages=" ${STAGES:-$all_stages} "
stages=${stages/ check / check-small check-n8 check-nap check-variants }
want() { [[ "$stages" == *" $1 "* ]]; }

log_cmd() { printf '%s\n' "$*" >> "$out/commands.txt"; }

# The results so far into RESULTS_TAR: only the device tool's $OUT comes back, so a call
# killed before its last command still returns what it measured. Written beside it and
# renamed, so a kill mid-write leaves the previous archive whole (the temporary file is the
# process's own: nccl-tests' build packs from the background); gzip -1, as it runs after
# every check.
# A file over 16 MiB does not come back at all: above 14 MiB the logs of ranks other than 0
# are left out (rank 0's log, the tables and the summary carry the figures; a failed rank
# is named in its check's log), and the summary says so.
pack_results() {
  [ -n "${RESULTS_TAR:-}" ] || return 0
  local tmp=$RESULTS_TAR.tmp$BASHPID exclude=()
  for attempt in 1 2; do
    # tar's 1 is "a file changed while read" (a log still being written): the archive stands.
    if { tar --warning=no-file-changed "${exclude[@]}" -C "$(dirname "$out")" -cf - "$(basename "$out")" 2> /dev/null
         [ $? -le 1 ]; } | gzip -1 > "$tmp"; then
      if [ "$attempt" = 1 ] && [ "$(stat -c %s "$tmp")" -gt $((14 << 20)) ]; then
        exclude=(--exclude='rank[1-9]*.log')
        grep -qF "archive-trimmed" "$summary" 2> /dev/null ||
          echo "| archive-trimmed | the results archive passed 14 MiB: logs of ranks other than 0 left out | |" >> "$summary"
        continue
      fi
      mv -f "$tmp" "$RESULTS_TAR"
    else
      rm -f "$tmp"
    fi
    return 0
  done
}

# --- the deadline (DEADLINE_S) -----------------------------------------------------------------
# left: seconds before DEADLINE_S, or 100000 when there is none.
left() { if [ -n "${DEADLINE_S:-}" ]; then echo $((DEADLINE_S - SECONDS)); else echo 100000; fi; }
# cap SECONDS: SECONDS, or less when the deadline comes first (5 s before it, so what the
# bounded command leaves behind, the ranks' logs, is still written before the deadline).
cap() { local l=$(($(left) - 5)); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
# bounded CMD...: CMD under `timeout -k 10` of what is left before the deadline; as it is
# without one. timeout's kill reaches CMD's process group but not a nested timeout's
# (each makes its own): commands with their own timeouts get them cut with cap as well.
bounded() {
  if [ -n "${DEADLINE_S:-}" ]; then timeout -k 10 "$(left)" "$@"; else "$@"; fi
}

# The row a check has while it runs, and keeps when the call ends during it: written before
# the check starts (and archived), so a call stopped from outside (an outer timeout's TERM, the
# device's limit, even SIGKILL) leaves the row without needing an exit trap to run; bash was
# seen killed by the TERM that also ended its check before running its EXIT trap.
stopped_row() { echo "| $1 | killed: the script was stopped during it | |"; }
# run NAME CMD...: runs CMD (a program, or a function of this script that bounds its own
# commands), logs to $out/NAME.log, records pass/fail in the summary.
run() {
  local name=$1; shift
  # A call's time is bounded (10 minutes on the lent GPU machine): what would start after
  # STOP_AFTER_S seconds, or with under 10 s before DEADLINE_S, is listed as not run, so the
  # record says what a later call owes.
  local why=""
  if [ -n "${STOP_AFTER_S:-}" ] && [ "$SECONDS" -ge "$STOP_AFTER_S" ]; then why="STOP_AFTER_S ($STOP_AFTER_S s) had passed"
  elif [ "$(left)" -lt 10 ]; then why="under 10 s before DEADLINE_S ($DEADLINE_S s)"; fi
  if [ -n "$why" ]; then
    echo "| $name | not run: $why | |" >> "$summary"
    not_run="$not_run $name"
    return 1
  fi
  log_cmd "$*"
  local t0=$SECONDS rc row
  stopped_row "$name" >> "$summary"
  pack_results
  {
    if [ -z "${DEADLINE_S:-}" ] || [ "$1" = ranks ]; then "$@"  # ranks cuts its own limits
    # Another function of this script (the build's), in a shell of its own that timeout can end.
    elif declare -F "$1" > /dev/null; then bounded bash -c "$(declare -f "$1")"'; "$@"' "$1" "$@"
    else bounded "$@"; fi
  } > "$out/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then row="| $name | pass | $((SECONDS - t0)) s |"
  elif [ -n "${DEADLINE_S:-}" ] && [ "$(left)" -le 6 ]; then
    # Ended by the deadline (its timeout, or its ranks' cut RANK_TIMEOUT_S): not a verdict
    # on the check, but no pass either.
    row="| $name | FAIL: killed at deadline (DEADLINE_S $DEADLINE_S s; rc $rc) | $((SECONDS - t0)) s |"
    failed=1
  else row="| $name | FAIL (rc $rc) | $((SECONDS - t0)) s |"; failed=1; fi
  # In place of the running row, whole or not at all (a stop now keeps the running row).
  { grep -vxF "$(stopped_row "$name")" "$summary"; echo "$row"; } > "$summary.tmp$BASHPID" && mv -f "$summary.tmp$BASHPID" "$summary"
  pack_results
  return $rc
}
# A stage named in STAGES that cannot run is a failure (the call was made for it); one of
# the default list is a skip.
skip() {
  if [ -n "${STAGES:-}" ]; then
    echo "| $1 | FAIL: asked for (STAGES) but cannot run: $2 | |" >> "$summary"
    failed=1
  else
    echo "| $1 | skipped: $2 | |" >> "$summary"
  fi
}

# --- what this machine lacks: packages as .debs, NCCL from the wheel -------------------------
# shellcheck source=perf/gpu/gpu_env.sh
. "$root/perf/gpu/gpu_env.sh"
# shellcheck source=perf/gpu/gpu_build.sh
. "$root/perf/gpu/gpu_build.sh"

# --- MPS for the benchmark stages (started below, before the first stage that shares the GPU) ---
# shellcheck source=perf/gpu/mps.sh
. "$root/perf/gpu/mps.sh"
nt_background=""  # nccl-tests' build, when it runs beside topocoll's (below)
# A call that ends early (a failed build) still leaves nccl-tests' build whole, and MPS off,
# and the record is archived (RESULTS_TAR) before and after the waits. Which check a stopped
# call was running does not depend on this trap (stopped_row).
on_exit() {
  pack_results
  stop_mps
  [ -z "$nt_background" ] || wait "$nt_background" 2> /dev/null
  pack_results
}
trap on_exit EXIT

{
  echo "# topocoll GPU check on $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi 2>&1 | head -n 20
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 1)"
  echo "NCCL_HOME: ${NCCL_HOME:-unset, CMake searched}; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  # The installed packages' versions, read from their metadata: importing torch to ask it
  # takes many seconds on a cold machine.
  timeout 20 python3 - <<'EOF' 2> /dev/null
from importlib import metadata
found = []
for name in ("torch", "nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl"):
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
print("python packages: " + (", ".join(found) or "no torch, no nvidia-nccl wheel"))
EOF
  mpirun --version 2>/dev/null | head -n 1
} >> "$out/device.txt"
if [ ! -f "$summary" ]; then
  {
    echo "# GPU check: $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Commands: commands.txt. Device, NCCL and CUDA: device.txt."
    echo
    echo "| check | result | time |"
    echo "|---|---|---|"
  } > "$summary"
fi

# --- nccl-tests' build ------------------------------------------------------------------------
# Built once per BUILD_DIR, only the binaries run, for this GPU's architecture only. A call
# that will run them builds them beside topocoll's own build, which leaves cores idle while
# it waits on its longest units and links; no stage starts before both are done, so no
# compiler shares the machine with a measurement.
nt_build="$build/nccl-tests"
nt_failed=0
nccl_tests_build() {
  if [ -n "$nt_background" ]; then
    local rc=0
    wait "$nt_background" || rc=$?
    nt_background=""
    [ $rc -eq 0 ] || { failed=1; nt_failed=1; }
  fi
  [ $nt_failed = 0 ] || return 1
  [ -x "$nt_build/all_reduce_perf" ] && return 0
  run nccl-tests-build nccl_tests_make "$NCCL_TESTS_SRC" "$build" "${gpu_cc:-90}" "${NCCL_HOME:-$cuda_home}" \
      "$cuda_home" "$jobs" || { nt_failed=1; return 1; }
}
# nccl-tests can run: its binaries are there (built by an earlier call, or prebuilt), or its
# source tree is (NCCL_TESTS_SRC), with mpirun.
nccl_tests_present() {
  { [ -x "$nt_build/all_reduce_perf" ] || { [ -n "${NCCL_TESTS_SRC:-}" ] && [ -d "$NCCL_TESTS_SRC/src" ]; }; } && command -v mpirun > /dev/null
}
nccl_tests_wanted() {
  { want nccl-tests || want net-vs-socket || want fabric-nccl; } && nccl_tests_present
}

# --- build ------------------------------------------------------------------------------------
# A build made on another machine from the same sources (perf/gpu/prebuild.sh, carried as
# perf/gpu/prebuilt) saves the GPU machine its build; anything else is built here.
prebuilt=${PREBUILT:-$root/perf/gpu/prebuilt/build-gpu.tar.xz}
dropped=$(prebuilt_drop_stale "$root" "$build")
[ -z "$dropped" ] || echo "| build | $dropped | |" >> "$summary"
if [ -f "$build/prebuilt.txt" ]; then
  echo "| build | $(prebuilt_field "$build/prebuilt.txt" made), from $(prebuilt_field "$build/prebuilt.txt" commit): unpacked by an earlier call | |" >> "$summary"
elif [ ! -f "$build/CMakeCache.txt" ] && [ -f "$prebuilt" ]; then
  t0=$SECONDS
  # The header of the NCCL every process loads (gpu_env.sh), when it is known.
  if used=$(prebuilt_use "$prebuilt" "$root" "$build" "$gpu_cc" "${NCCL_HOME:+$NCCL_HOME/include/nccl.h}"); then
    echo "| build | $used, unpacked in $((SECONDS - t0)) s | |" >> "$summary"
    {
      echo "build: prebuilt, unpacked from $prebuilt; its stamp:"
      sed 's/^/  /' "$build/prebuilt.txt"
      grep "topocoll:" "$build/configure.log" 2> /dev/null
    } >> "$out/device.txt"
  else
    echo "| build | the prebuilt build was not used: $used | |" >> "$summary"
    echo "build: the prebuilt build was not used: $used" >> "$out/device.txt"
  fi
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  # This GPU's architecture alone: the same machine code as the default sm_80 + sm_90 build
  # has for it, in a fraction of the device passes.
  run configure gpu_configure "$root" "$build" "$gpu_cc" || { echo "configure failed: $out"; exit 1; }
  grep "topocoll:" "$out/configure.log" >> "$out/device.txt"
fi
if nccl_tests_wanted && [ ! -x "$nt_build/all_reduce_perf" ]; then
  mkdir -p "$build"
  nccl_tests_build &
  nt_background=$!
fi
if [ -f "$build/prebuilt.txt" ]; then :  # programs without their objects: nothing to rebuild
elif want build || [ ! -f "$build/.built" ]; then
  run build cmake --build "$build" -j"$jobs" || { echo "build failed: $out"; exit 1; }
  touch "$build/.built"
fi
[ -z "$nt_background" ] || nccl_tests_build  # its stages say when it failed
plugin=$(find "$build" -name libnccl-topocoll.so -type f | head -n1)
check=$(find "$build" -name interposer_gpu_check -type f -perm -u+x | head -n1)
[ -n "$plugin" ] && [ -n "$check" ] || { echo "no plugin or check program in $build"; exit 1; }
{
  echo "plugin: $plugin"
  echo "the NCCL the programs load: $(ldd "$check" | grep -m1 libnccl)"
} >> "$out/device.txt"

# --- kernels ----------------------------------------------------------------------------------
want kernels && run kernels env KERNELS_RESULTS="$out" bash "$root/perf/kernels/run_gpu.sh" "$build"
want kernels-repeat && {
  run kernels-repeat "$build/tests/kernels/kernels_reduce_cuda_test" --gtest_repeat="${REPEAT:-3}" \
      --gtest_brief=1
  run kernels-parallel ctest --test-dir "$build" -L gpu -R '^(Types/)?Kernels' -j8 --repeat until-fail:2 \
      --output-on-failure --timeout 900
}

# --- from here on several processes share the GPU: under MPS ---------------------------------
# Without MPS every process waits for its time slice (a 4 KiB allreduce of 4 processes takes
# 27 ms instead of 0.22 ms): nothing can be timed, and a check of ~800 collectives takes
# minutes. The kernel stages above ran alone on the GPU, without it; MPS=0 runs these
# time-sliced too, as the first GPU run did.
for s in ctest check-small check-n8 check-nap check-variants net bench torch nccl-tests net-vs-socket; do
  want "$s" && { start_mps "the benchmark stages"; break; }
done

# --- ranks of the interposer check ------------------------------------------------------------
# ranks NAME NRANKS MODE ALGO [extra args]: NRANKS processes of interposer_gpu_check
# (tests/interposer/run_ranks.sh, shared with the host emulation's tests; FACES picks how
# NCCL meets the library: preload, net, tuner).
# Each rank runs under run_ranks.sh's own `timeout RANK_TIMEOUT_S`, in a process group of
# its own that a timeout around run_ranks.sh does not reach: RANK_TIMEOUT_S is cut to the
# deadline instead.
ranks() {
  local name=$1 n=$2 mode=$3 algo=$4; shift 4
  local rc=0
  RANK_TIMEOUT_S=$(cap "${RANK_TIMEOUT_S:-300}") bounded \
    bash "$root/tests/interposer/run_ranks.sh" "$out/$name" "$plugin" "$check" "$n" "$mode" "$algo" "$@" || rc=1
  log_cmd "$(cat "$out/$name/command.txt" 2>/dev/null)"
  return $rc
}
# --- smoke ------------------------------------------------------------------------------------
# One 2-rank check (~10 s) before the multi-process stages spend the call: a build, NCCL, MPS
# or driver that cannot run the simplest check fails here, and the script stops instead of
# failing every check at its timeout. SMOKE=0 skips it.
smoke() {
  [ "${SMOKE:-1}" = 1 ] || return 0
  local s
  for s in check-small check-n8 check-nap check-variants net bench torch nccl-tests net-vs-socket; do
    want "$s" || continue
    RANK_TIMEOUT_S=${SMOKE_TIMEOUT_S:-60} run smoke-n2-auto ranks smoke-n2-auto 2 check auto && return 0
    echo "the smoke check failed or did not run (summary.md, smoke-n2-auto/): stopping; SMOKE=0 skips it"
    exit 1
  done
}
smoke

# --- ctest ------------------------------------------------------------------------------------
want ctest && {
  run ctest-gpu ctest --test-dir "$build" -L gpu -E 'Kernels' --output-on-failure --timeout 600
  # The multi-process GPU tests' per-rank logs (ctest only names them) leave with the record.
  for d in "$build"/interposer_gpu_*; do [ -d "$d" ] && cp -r "$d" "$out/ctest-gpu-$(basename "$d")"; done
  run ctest-interposer-cpu ctest --test-dir "$build" -R '^(StubProcess|Forwarding|ServedForwarding|Config|Agreement|Identity|RouteDecision|NcclTestsSizes|GroupQueue|CallRouteCache|InterposerSymbols|InitExchange|InitReadyVote|NcclBackend|KernelsReduceCpuCases|SplitAlignment|PluginRuntime|NetPlugin)' -LE gpu --output-on-failure
  run forwarding-bench "$build/perf/interposer/interposer_forwarding_bench" --json "$out/forwarding-bench.json"
}

# --- multi-process checks ---------------------------------------------------------------------
check_bigraph() {
  for n in "$@"; do
    for algo in auto hd ring-topo nccl-topo-ring; do
      run "check-n$n-$algo" ranks "check-n$n-$algo" "$n" check "$algo"
    done
  done
}
want check-small && check_bigraph 2 4
want check-n8 && check_bigraph 8
want check-nap && for n in 4 8; do
  for algo in fc fc-direct hier; do
    TOPOLOGY_ARGS="--kind nap" run "check-nap$n-$algo" ranks "check-nap$n-$algo" "$n" check "$algo"
  done
done
want check-variants && {
  TOPOCOLL_RING_COMM=lazy run check-n4-nccl-topo-ring-lazy ranks check-n4-nccl-topo-ring-lazy 4 check nccl-topo-ring
  TOPOCOLL_RING_COMM=off run check-n4-auto-ring-off ranks check-n4-auto-ring-off 4 check auto
  TOPOCOLL_AUTO_MARGIN=1 run check-n8-auto-margin1 ranks check-n8-auto-margin1 8 check auto
  TOPOCOLL_SCRATCH_MAX_BYTES=1M run check-n4-hd-scratch1M ranks check-n4-hd-scratch1M 4 check hd
  # Pipelined steps at the smallest chunk: every round's reduce on the overlap lane's stream.
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K run check-n4-hd-pipelined ranks check-n4-hd-pipelined 4 check hd
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K run check-n8-ring-pipelined ranks check-n8-ring-pipelined 8 check ring
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K TOPOLOGY_ARGS="--kind nap" run check-nap8-fc-pipelined ranks check-nap8-fc-pipelined 8 check fc
  TOPOCOLL_STEP_TIMES=1 TOPOCOLL_PIPELINE_CHUNK_BYTES=64K run check-n4-hd-step-times ranks check-n4-hd-step-times 4 check hd
}
# The net plugin as NCCL loads it: NCCL's own collectives over it, then the whole library.
want net && for n in 2 4; do
  FACES=net run "net-n$n" ranks "net-n$n" "$n" check auto
  FACES=preload,net,tuner run "net-n$n-all-faces" ranks "net-n$n-all-faces" "$n" check hd
done

# --- benchmarks -------------------------------------------------------------------------------
if want bench; then
  for n in 2 4 8; do
    for algo in auto hd; do
      if run "bench-n$n-$algo" ranks "bench-n$n-$algo" "$n" bench "$algo" --json "$out/bench-n$n-$algo.json"; then
        grep -E "^(collective|allreduce|reducescatter|allgather) " "$out/bench-n$n-$algo/rank0.log" > "$out/bench-n$n-$algo.txt"
      fi
    done
  done
  # hd with pipelining off beside the default: what the overlap lane gains on a GPU.
  for n in 4 8; do
    if TOPOCOLL_PIPELINE_CHUNK_BYTES=0 run "bench-n$n-hd-unpipelined" ranks "bench-n$n-hd-unpipelined" "$n" bench hd \
        --json "$out/bench-n$n-hd-unpipelined.json"; then
      grep -E "^(collective|allreduce|reducescatter|allgather) " "$out/bench-n$n-hd-unpipelined/rank0.log" > "$out/bench-n$n-hd-unpipelined.txt"
    fi
  done
fi

# --- PyTorch ----------------------------------------------------------------------------------
# torchrun under RANK_TIMEOUT_S like the ranks of a check (a hung collective would hold the
# call to its end), and a pass only when the interposer served: PyTorch uses NCCL's own code
# when the preloaded library does not load or declines, and the check would pass all the same.
# The mark is what plugin/interposer/comm_lifecycle.cpp logs for a communicator it serves.
if ! want torch; then :
elif bounded timeout 120 python3 -c "import torch, torch.distributed; assert torch.cuda.is_available()" 2>/dev/null; then
  for n in 2 4; do
    "$check" topology --nranks "$n" --out "$out/torch-topology-n$n.json" > /dev/null
    run "torch-n$n" env LD_PRELOAD="$plugin" TOPOCOLL_TOPO_FILE="$out/torch-topology-n$n.json" NCCL_SOCKET_IFNAME=lo \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL timeout -k 10 "$(cap "${RANK_TIMEOUT_S:-300}")" \
        python3 -m torch.distributed.run --standalone --nproc_per_node "$n" "$root/perf/gpu/torch_check.py" &&
      if ! grep -qF "served on topology" "$out/torch-n$n.log"; then
        echo "| torch-n$n | FAIL: the log lacks \"served on topology\" (the interposer did not serve) | |" >> "$summary"
        failed=1
      fi
  done
else
  skip torch "PyTorch with CUDA not installed"
fi

# nccl-tests picks its GPU from the local rank it derives from host names: each MPI rank
# gets its own UTS namespace and host name s<rank> (and NCCL_HOSTID), so one GPU serves all.
rank_wrapper=$out/nccl-tests-rank.sh
cat > "$rank_wrapper" <<'EOS'
#!/usr/bin/env bash
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
export NCCL_HOSTID=s$r
exec unshare --uts bash -c 'hostname "s$0" && exec "$@"' "$r" "$@"
EOS
chmod +x "$rank_wrapper"
# nt NAME NRANKS BINARY [env VAR=VALUE...] -- [args]: one nccl-tests run under mpirun, on the
# generated BiGraph (NT_TOPOLOGY: its file's name, NT_TOPOLOGY_ARGS: more options for it).
nt() {
  local name=$1 n=$2 binary=$3; shift 3
  local topology="$out/${NT_TOPOLOGY:-nccl-tests-topology}-n$n.json"
  # shellcheck disable=SC2054  # the commas are NCCL_DEBUG_SUBSYS's list
  local xs=(-x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE=0 -x TOPOCOLL_TOPO_FILE="$topology"
            -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET,TUNING)
  local preload=default marks=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    xs+=(-x "$1")
    # What the log must show, or the run compared NCCL with NCCL (NCCL falls back to its
    # own code when a plugin does not load).
    case $1 in
      LD_PRELOAD=?*) preload=""; marks+=("served on topology") ;;
      NCCL_TUNER_PLUGIN=none) ;;
      NCCL_TUNER_PLUGIN=*) marks+=("TUNER/Plugin: Using topocoll") ;;
      NCCL_NET_PLUGIN=*) marks+=("Using network topocoll") ;;
      NCCL_NET=*) marks+=("Using network ${1#NCCL_NET=}") ;;
    esac
    shift
  done
  [ "${1:-}" = -- ] && shift
  [ -n "$preload" ] && xs+=(-x LD_PRELOAD=)
  # shellcheck disable=SC2086  # NT_TOPOLOGY_ARGS is a list of options
  "$check" topology --nranks "$n" --out "$topology" ${NT_TOPOLOGY_ARGS:-} > /dev/null || {
    echo "| $name | FAIL: interposer_gpu_check topology ${NT_TOPOLOGY_ARGS:-} failed | |" >> "$summary"
    failed=1
    return 1
  }
  # NT_TIMEOUT_S: a run takes 3-7 s; a hung one should not take minutes of the call.
  run "$name" timeout -k 10 "$(cap "${NT_TIMEOUT_S:-60}")" mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 --mca btl self,vader "${xs[@]}" \
      "$rank_wrapper" "$nt_build/$binary" -g 1 -c 1 "$@" || return 1
  local mark
  for mark in "${marks[@]}"; do
    if ! grep -qF "$mark" "$out/$name.log"; then
      echo "| $name | FAIL: the log lacks \"$mark\" (topocoll was not used) | |" >> "$summary"
      failed=1
    fi
  done
}
if want nccl-tests || want net-vs-socket; then
  if ! nccl_tests_present; then
    skip nccl-tests "needs mpirun, and nccl-tests' binaries in $nt_build or NCCL_TESTS_SRC naming its source tree"
  elif ! command -v unshare > /dev/null; then
    skip nccl-tests "needs unshare"
  elif nccl_tests_build; then
    want nccl-tests && for n in 2 4; do
      nt "nccl-tests-n$n-nccl" "$n" all_reduce_perf -- -b 1K -e 64M -f 4
      nt "nccl-tests-n$n-preload" "$n" all_reduce_perf LD_PRELOAD="$plugin" -- -b 1K -e 64M -f 4
      nt "nccl-tests-n$n-tuner" "$n" all_reduce_perf NCCL_TUNER_PLUGIN="$plugin" -- -b 1K -e 64M -f 4
      [ -f "$out/nccl-tests-n$n-nccl.log" ] && [ -f "$out/nccl-tests-n$n-preload.log" ] &&
          [ -f "$out/nccl-tests-n$n-tuner.log" ] || continue
      # One run per path, one after the other (a check that each face works, not a benchmark):
      # the title says its ratios are one sample each; net-vs-socket compares in rounds.
      python3 "$root/perf/gpu/nccl_tests_table.py" \
          --title "all_reduce_perf, $n ranks on one GPU (MPS); one run per path, run in turn: each ratio is one sample" \
          --json "$out/nccl-tests-n$n.json" nccl="$out/nccl-tests-n$n-nccl.log" \
          preload="$out/nccl-tests-n$n-preload.log" tuner="$out/nccl-tests-n$n-tuner.log" \
          > "$out/nccl-tests-n$n.md" ||
        { echo "| nccl-tests-n$n table | FAIL: #wrong above 0 or no results (nccl-tests-n$n.md) | |" >> "$summary"; failed=1; }
    done
    # The net plugin beside NCCL's own Socket transport, rounds interleaved. Both arms give
    # NCCL's tuning model the same network: Socket reports lo at 10 Gb/s (its default when
    # /sys has no speed) and latency 0, the net plugin its topology's NIC, so the topology's
    # links are the same. With the generated 100 Gb/s NCCL ran LL up to ~260 KB on the plugin
    # and Simple from ~24 KB on Socket (perf/results/gpu-H200-20261128/summary.md).
    # nvs_topology CMD...: CMD with the net-vs-socket topology for nt (its variables only).
    nvs_topology() { NT_TOPOLOGY=net-vs-socket-topology NT_TOPOLOGY_ARGS="--link-gbps 10 --link-latency-us 0" "$@"; }
    want net-vs-socket && for n in 2 4; do
      for round in 1 2 3; do
        nvs_topology nt "nvs-n$n-socket-r$round" "$n" all_reduce_perf NCCL_NET=Socket -- -b 1K -e 64M -f 4 -w 5 -n 20
        # NCCL_TUNER_PLUGIN=none: NCCL would take the tuner from the net plugin's library too,
        # and the two arms would differ in more than the transport.
        nvs_topology nt "nvs-n$n-topocoll-r$round" "$n" all_reduce_perf NCCL_NET_PLUGIN="$plugin" NCCL_TUNER_PLUGIN=none -- -b 1K -e 64M -f 4 -w 5 -n 20
        # The plugin striping each message over 4 sockets, its default before one socket
        # (perf/results/net-plugin-sockets-20261128: on the build machine one socket was at par
        # or up to 1.24x faster): what striping costs or gains here.
        nvs_topology nt "nvs-n$n-foursockets-r$round" "$n" all_reduce_perf NCCL_NET_PLUGIN="$plugin" NCCL_TUNER_PLUGIN=none \
            TOPOCOLL_NET_SOCKETS_PER_CONN=4 -- -b 1K -e 64M -f 4 -w 5 -n 20
      done
      args=()
      for round in 1 2 3; do
        for arm in socket topocoll foursockets; do
          [ -f "$out/nvs-n$n-$arm-r$round.log" ] && args+=("$arm-r$round=$out/nvs-n$n-$arm-r$round.log")
        done
      done
      [ ${#args[@]} -ge 2 ] || continue
      python3 "$root/perf/gpu/nccl_tests_table.py" --title "net plugin vs NCCL Socket, all_reduce_perf, $n ranks (MPS)" \
          --json "$out/net-vs-socket-n$n.json" "${args[@]}" > "$out/net-vs-socket-n$n.md" ||
        { echo "| net-vs-socket-n$n table | FAIL: #wrong above 0 or no results (net-vs-socket-n$n.md) | |" >> "$summary"; failed=1; }
    done
  fi
fi

# --- nccl-tests over an emulated fabric ------------------------------------------------------
# Its own MPS, budget and record (perf/gpu/fabric_nccl_tests.sh); what this call started with
# (the build) comes off its 10 minutes.
if want fabric-nccl; then
  if ! nccl_tests_present; then
    skip fabric-nccl "needs mpirun, and nccl-tests' binaries in $nt_build or NCCL_TESTS_SRC naming its source tree"
  elif nccl_tests_build; then
    stop_mps
    # Its budget (a run starts only when its predicted time fits): what is left of the call,
    # CALL_SECONDS (570) from the start, or less: of STOP_AFTER_S, and of DEADLINE_S less 30 s
    # for the fabric's teardown and its record.
    budget=$((${CALL_SECONDS:-570} - SECONDS))
    [ -z "${STOP_AFTER_S:-}" ] || [ $((STOP_AFTER_S - SECONDS)) -ge "$budget" ] || budget=$((STOP_AFTER_S - SECONDS))
    [ -z "${DEADLINE_S:-}" ] || [ $(($(left) - 30)) -ge "$budget" ] || budget=$(($(left) - 30))
    run fabric-nccl env BUDGET="$budget" NT_BUILD="$nt_build" PLUGIN="$plugin" \
        RESULTS_DIR="${FABRIC_RESULTS_DIR:-$root/perf/results/gpu-fabric-$device-$(date -u +%Y%m%d)}" COPY_TO="$out" \
        bash "$root/perf/gpu/fabric_nccl_tests.sh" "$build"
  fi
fi

{
  # This call's tables only (a later call with the same RESULTS_DIR appends its own).
  want nccl-tests && for f in "$out"/nccl-tests-n*.md; do [ -f "$f" ] && { echo; cat "$f"; }; done
  want net-vs-socket && for f in "$out"/net-vs-socket-n*.md; do [ -f "$f" ] && { echo; cat "$f"; }; done
  if want bench; then
    echo
    echo "Benchmarks run under MPS (nvidia-cuda-mps-control) unless device.txt says otherwise."
    echo "Per-process logs and topocoll's decisions (NCCL_DEBUG=INFO): check-*/, bench-*/."
    echo "path topocoll = through the interposer, nccl = NCCL's own pnccl* in the same run:"
    for f in "$out"/bench-n*.txt; do [ -f "$f" ] && { echo; echo "### $(basename "$f" .txt)"; echo '```'; cat "$f"; echo '```'; }; done
  fi
} >> "$summary"
[ -z "$not_run" ] || echo "not run (STOP_AFTER_S or DEADLINE_S):$not_run"
echo "results: $out (failed=$failed)"
exit $failed
