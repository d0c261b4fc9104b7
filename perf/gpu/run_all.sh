#!/usr/bin/env bash
# The whole GPU check of topocoll in one call, on a machine with (at least) one GPU:
#
#   perf/gpu/run_all.sh [BUILD_DIR]          (default BUILD_DIR: build-gpu in the repository)
#
#   1. configures (if BUILD_DIR has no CMakeCache.txt) and builds the library, the GPU tests
#      and the check/benchmark programs;
#   2. the kernels' GPU tests and benchmark (perf/kernels/run_gpu.sh), when present;
#   3. ctest: every test labelled gpu (the CUDA kernels incl. avg's pre-multiply against
#      the CPU reference), then the interposer's CPU tests and the runtime-dependency check
#      (no libcudart.so NEEDED: the CUDA runtime is static);
#   4. 2, 4 and 8 processes on the one GPU, each its own NCCL "host" (NCCL_HOSTID=s<rank>,
#      NCCL_SOCKET_IFNAME=lo), allreduce / reduce-scatter / allgather / all-to-all through
#      LD_PRELOAD=libnccl-topocoll.so against an exact CPU reference (types, ops, uneven
#      counts, in/out of place, user groups, CUDA graph capture, split communicators), with
#      TOPOCOLL_ALGO=auto, hd, ring and nccl-topo-ring; then NAP (4 and 8 processes) with
#      fc, fc-direct and hier; then the variants of issue 13: the topology-ordered split
#      created lazily and off (TOPOCOLL_RING_COMM), auto with no margin
#      (TOPOCOLL_AUTO_MARGIN=1, so more calls take topocoll routes), and a scratch cap that
#      sends large calls to NCCL on every rank (TOPOCOLL_SCRATCH_MAX_BYTES=1M), and pipelined
#      steps at 64 KiB chunks (TOPOCOLL_PIPELINE_CHUNK_BYTES; reduces on the overlap lane);
#   5. the same process counts benchmarked: topocoll's entry points beside NCCL's own
#      (pnccl*) in the same run; hd again with pipelining off (TOPOCOLL_PIPELINE_CHUNK_BYTES=0);
#   6. perf/gpu/torch_check.py under torchrun with LD_PRELOAD, when PyTorch is installed;
#   7. nccl-tests all_reduce_perf -c 1 under LD_PRELOAD when NCCL_TESTS_SRC names a
#      nccl-tests source tree (built here, never committed).
#
# Everything lands in perf/results/gpu-<device>-<date>/: commands.txt (every command run),
# device.txt, the logs, bench-*.json/txt and summary.md. Exit status 0 only if every check
# that ran passed.
#
# STAGES (default "build kernels ctest check bench torch nccl-tests") runs a subset, e.g.
# when a machine limits how long one command may run: run "build kernels ctest" first,
# then "check", then "bench torch nccl-tests" with the same BUILD_DIR and RESULTS_DIR
# (default: a new perf/results/gpu-<device>-<date>/ per call).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
cuda_home=${CUDA_HOME:-/usr/local/cuda}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
[ -n "$gpu" ] || gpu="unknown-gpu"
device=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-*//; s/-*$//')
stamp=$(date -u +%Y%m%d-%H%M)
out=${RESULTS_DIR:-$root/perf/results/gpu-$device-$stamp}
mkdir -p "$out"
summary="$out/summary.md"
failed=0
stages=" ${STAGES:-build kernels ctest check bench torch nccl-tests} "
want() { [[ "$stages" == *" $1 "* ]]; }

log_cmd() { printf '%s\n' "$*" >> "$out/commands.txt"; }
# run NAME CMD...: runs, logs to $out/NAME.log, records pass/fail in the summary.
run() {
  local name=$1; shift
  log_cmd "$*"
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then echo "| $name | pass | $((SECONDS - t0)) s |" >> "$summary"
  else echo "| $name | FAIL (rc $rc) | $((SECONDS - t0)) s |" >> "$summary"; failed=1; fi
  return $rc
}
skip() { echo "| $1 | skipped: $2 | |" >> "$summary"; }

{
  echo "# topocoll GPU check on $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi 2>&1 | head -n 20
  echo "NCCL: $(ls -l "$cuda_home"/lib64/libnccl.so* 2>/dev/null | head -n 3)"
  echo "nvcc: $("$cuda_home"/bin/nvcc --version 2>/dev/null | tail -n 1)"
} > "$out/device.txt"
if [ ! -f "$summary" ]; then
  {
    echo "# GPU check: $gpu, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Commands: commands.txt. Device: device.txt."
    echo
    echo "| check | result | time |"
    echo "|---|---|---|"
  } > "$summary"
fi

# --- 1. build ---------------------------------------------------------------------------
if want build && [ ! -f "$build/CMakeCache.txt" ]; then
  run configure cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOPOCOLL_ENABLE_CUDA=ON \
      -DTOPOCOLL_BUILD_TESTS=ON -DTOPOCOLL_BUILD_PERF=ON || { echo "configure failed: $out"; exit 1; }
fi
if want build; then
  run build cmake --build "$build" -j"$jobs" --target nccl-topocoll interposer_gpu_check interposer_gpu \
      interposer_forwarding interposer_init_exchange interposer_nccl_backend interposer_config \
      interposer_agreement interposer_group_queue interposer_plan_cache \
      interposer_symbols interposer_forwarding_bench kernels_reduce_cpu_test sched_split_alignment_test \
      || { echo "build failed: $out"; exit 1; }
fi
plugin=$(find "$build" -name libnccl-topocoll.so -type f | head -n1)
check=$(find "$build" -name interposer_gpu_check -type f -perm -u+x | head -n1)
[ -n "$plugin" ] && [ -n "$check" ] || { echo "no build in $build: run with STAGES including build"; exit 1; }
echo "plugin: $plugin" >> "$out/device.txt"

# --- 2. kernels ---------------------------------------------------------------------------
if ! want kernels; then :
elif [ -f "$root/perf/kernels/run_gpu.sh" ]; then
  run kernels bash "$root/perf/kernels/run_gpu.sh" "$build"
else
  skip kernels "perf/kernels/run_gpu.sh not present"
fi

# --- 3. ctest -----------------------------------------------------------------------------
if want ctest; then
# The kernels' GPU tests ran in stage kernels.
run ctest-gpu ctest --test-dir "$build" -L gpu -E '^Kernels' --output-on-failure --timeout 600
run ctest-interposer-cpu ctest --test-dir "$build" -R '^(Forwarding|ServedForwarding|Config|Agreement|Identity|Planner|CallBytes|GroupQueue|PlanCache|InterposerSymbols|InitExchange|InitReadyVote|NcclBackend|KernelsReduceCpuCases|SplitAlignment|PluginRuntime)' -LE gpu --output-on-failure
run forwarding-bench "$build/perf/interposer/interposer_forwarding_bench" --json "$out/forwarding-bench.json"
fi

# --- 4./5. multi-process through the interposer ----------------------------------------------
# ranks NAME NRANKS MODE ALGO [extra args]: NRANKS processes of interposer_gpu_check
# (tests/interposer/run_ranks.sh, shared with the host emulation's tests).
ranks() {
  local name=$1 n=$2 mode=$3 algo=$4; shift 4
  local rc=0
  bash "$root/tests/interposer/run_ranks.sh" "$out/$name" "$plugin" "$check" "$n" "$mode" "$algo" "$@" || rc=1
  log_cmd "$(cat "$out/$name/command.txt" 2>/dev/null)"
  return $rc
}

want check && for n in 2 4 8; do
  for algo in auto hd ring nccl-topo-ring; do
    run "check-n$n-$algo" ranks "check-n$n-$algo" "$n" check "$algo"
  done
done
# NAP (packages of two nodes on a torus) with its own schedules.
want check && for n in 4 8; do
  for algo in fc fc-direct hier; do
    TOPOLOGY_ARGS="--kind nap" run "check-nap$n-$algo" ranks "check-nap$n-$algo" "$n" check "$algo"
  done
done
# Issue 13's settings: the split at first use and never; auto with no margin; a scratch cap.
want check && {
  TOPOCOLL_RING_COMM=lazy run check-n4-nccl-topo-ring-lazy ranks check-n4-nccl-topo-ring-lazy 4 check nccl-topo-ring
  TOPOCOLL_RING_COMM=off run check-n4-auto-ring-off ranks check-n4-auto-ring-off 4 check auto
  TOPOCOLL_AUTO_MARGIN=1 run check-n8-auto-margin1 ranks check-n8-auto-margin1 8 check auto
  TOPOCOLL_SCRATCH_MAX_BYTES=1M run check-n4-hd-scratch1M ranks check-n4-hd-scratch1M 4 check hd
  # Pipelined steps (exec/pipeline.h) at the smallest chunk, so the check's sizes are cut
  # and every round's reduce runs on the overlap lane's stream (graph-captured calls do not).
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K run check-n4-hd-pipelined ranks check-n4-hd-pipelined 4 check hd
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K run check-n8-ring-pipelined ranks check-n8-ring-pipelined 8 check ring
  TOPOCOLL_PIPELINE_CHUNK_BYTES=64K TOPOLOGY_ARGS="--kind nap" run check-nap8-fc-pipelined ranks check-nap8-fc-pipelined 8 check fc
}
# auto: topocoll's choice; hd: the EFLOPS schedule forced; both beside NCCL's own numbers.
want bench && for n in 2 4 8; do
  for algo in auto hd; do
    if run "bench-n$n-$algo" ranks "bench-n$n-$algo" "$n" bench "$algo" --json "$out/bench-n$n-$algo.json"; then
      grep -E "^(collective|allreduce|reducescatter|allgather) " "$out/bench-n$n-$algo/rank0.log" > "$out/bench-n$n-$algo.txt"
    fi
  done
done
# hd with pipelining off beside the default (1 MiB chunks, reduces overlapped on a second
# stream): what the overlap gains on a GPU, where reduce kernels and transfers do not compete.
want bench && for n in 4 8; do
  if TOPOCOLL_PIPELINE_CHUNK_BYTES=0 run "bench-n$n-hd-unpipelined" ranks "bench-n$n-hd-unpipelined" "$n" bench hd \
      --json "$out/bench-n$n-hd-unpipelined.json"; then
    grep -E "^(collective|allreduce|reducescatter|allgather) " "$out/bench-n$n-hd-unpipelined/rank0.log" > "$out/bench-n$n-hd-unpipelined.txt"
  fi
done

# --- 6. PyTorch ---------------------------------------------------------------------------
if ! want torch; then :
elif python3 -c "import torch, torch.distributed; assert torch.cuda.is_available()" 2>/dev/null; then
  nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), 'lib'))" 2>/dev/null || true)
  for n in 2 4; do
    "$check" topology --nranks "$n" --out "$out/torch-topology-n$n.json" > /dev/null
    run "torch-n$n" env LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}" \
        LD_PRELOAD="$plugin" TOPOCOLL_TOPO_FILE="$out/torch-topology-n$n.json" NCCL_SOCKET_IFNAME=lo \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL \
        python3 -m torch.distributed.run --standalone --nproc_per_node "$n" "$root/perf/gpu/torch_check.py"
  done
else
  skip torch "PyTorch with CUDA not installed"
fi

# --- 7. nccl-tests ------------------------------------------------------------------------
if ! want nccl-tests; then :
elif [ -n "${NCCL_TESTS_SRC:-}" ] && [ -d "$NCCL_TESTS_SRC" ]; then
  nt_build="$build/nccl-tests"
  mpi=0
  command -v mpirun > /dev/null && mpi=1
  if run nccl-tests-build make -C "$NCCL_TESTS_SRC" -j"$jobs" MPI=$mpi CUDA_HOME="$cuda_home" \
      NCCL_HOME="$cuda_home" BUILDDIR="$nt_build"; then
    if [ $mpi -eq 1 ]; then
      for n in 2 4; do
        "$check" topology --nranks "$n" --out "$out/nccl-tests-topology-n$n.json" > /dev/null
        # Each MPI rank becomes its own NCCL host.
        cat > "$out/nccl-tests-rank.sh" <<'EOS'
#!/usr/bin/env bash
export NCCL_HOSTID=s${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
exec "$@"
EOS
        chmod +x "$out/nccl-tests-rank.sh"
        for path in nccl topocoll; do
          preload=""; [ $path = topocoll ] && preload="$plugin"
          run "nccl-tests-n$n-$path" mpirun --allow-run-as-root -np "$n" -x LD_PRELOAD="$preload" \
              -x TOPOCOLL_TOPO_FILE="$out/nccl-tests-topology-n$n.json" -x NCCL_SOCKET_IFNAME=lo \
              -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,COLL \
              "$out/nccl-tests-rank.sh" "$nt_build/all_reduce_perf" -b 1K -e 64M -f 4 -g 1 -c 1
        done
      done
    else
      # Without MPI nccl-tests runs one process; with one GPU that is one rank: this only
      # shows that the preloaded library forwards a real NCCL job intact.
      run nccl-tests-g1-nccl "$nt_build/all_reduce_perf" -b 1K -e 64M -f 4 -g 1 -c 1
      run nccl-tests-g1-topocoll env LD_PRELOAD="$plugin" NCCL_DEBUG=INFO \
          "$nt_build/all_reduce_perf" -b 1K -e 64M -f 4 -g 1 -c 1
    fi
  fi
else
  skip nccl-tests "NCCL_TESTS_SRC not set"
fi

want bench && {
  echo
  echo "Per-process logs and the decisions topocoll logged (NCCL_DEBUG=INFO): check-*/, bench-*/."
  echo "Benchmarks (path topocoll = through the interposer, nccl = NCCL's own pnccl* in the same run):"
  for f in "$out"/bench-n*.txt; do [ -f "$f" ] && { echo; echo "### $(basename "$f" .txt)"; echo '```'; cat "$f"; echo '```'; }; done
} >> "$summary"
echo "results: $out (failed=$failed)"
exit $failed
