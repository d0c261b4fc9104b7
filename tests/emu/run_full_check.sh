#!/usr/bin/env bash
# The GPU machine's interposer check at its full sizes on the host emulation
# (docs/emulation.md), every count of the GPU run (ctest runs the same with smaller counts):
# BiGraph with 2, 3, 4 and 8 processes and NAP with 4 and 8 (each process its own host) x
# every TOPOCOLL_ALGO that applies, and one process driving 2, 4 and 8 communicators.
# Writes OUT/summary.md (a table of cases per run, the commands, the machine) and the logs.
#
#   tests/emu/run_full_check.sh BUILD_DIR OUT
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -ne 2 ]; then
  echo "usage: run_full_check.sh BUILD_DIR OUT" >&2
  exit 2
fi
build=$(cd "$1" && pwd) out=$2
plugin=$build/tests/emu/libnccl-topocoll-emu.so
check=$build/tests/emu/interposer_emu_check
[ -f "$plugin" ] && [ -x "$check" ] || { echo "build nccl-topocoll-emu and interposer_emu_check in $build first" >&2; exit 2; }
mkdir -p "$out"
summary=$out/summary.md
{
  echo "# Interposer check on the host emulation, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Commit $(git -C "$root" rev-parse --short HEAD). Machine: $(nproc) CPU cores, $(uname -sr), no GPU;"
  echo "CUDA and NCCL emulated (tests/emu, docs/emulation.md). Each row: every rank passed"
  echo "every case bit for bit against the exact CPU reference, and rank 0 logged that"
  echo "topocoll served the communicator. Times are the emulation's, not a GPU's."
  echo
  echo "| topology, layout | ranks | TOPOCOLL_ALGO | result | cases (rank 0) | wall time |"
  echo "|---|---|---|---|---|---|"
} > "$summary"
failed=0
# row KIND N ALGO LOG: one line of the table from a run's last "cases passed" line.
row() {
  local kind=$1 n=$2 algo=$3 log=$4 result=$5 secs=$6 cases
  cases=$(grep -h "cases passed" "$log" 2>/dev/null | tail -n 1 | sed -n 's/.*: \([0-9]* cases passed, [0-9]* failed\)/\1/p')
  echo "| $kind | $n | $algo | $result | ${cases:-?} | $secs s |" >> "$summary"
}
# ranks KIND N ALGO: N processes, one host each.
ranks() {
  local kind=$1 n=$2 algo=$3 t0=$SECONDS result=pass
  TOPOLOGY_ARGS="--kind $kind" bash "$root/tests/interposer/run_ranks.sh" "$out/$kind-n$n-$algo" \
      "$plugin" "$check" "$n" check "$algo" > "$out/$kind-n$n-$algo.log" 2>&1 || { result=FAIL; failed=1; }
  row "$kind, $n processes" "$n" "$algo" "$out/$kind-n$n-$algo/rank0.log" $result $((SECONDS - t0))
}
for n in 2 3 4 8; do
  for algo in auto hd ring-topo nccl-topo-ring; do ranks bigraph "$n" "$algo"; done
done
for n in 4 8; do
  for algo in auto fc fc-direct hier hd ring-topo nccl-topo-ring; do ranks nap "$n" "$algo"; done
done
# One process driving N communicators (ncclCommInitAll), as nccl-tests -g N.
for n in 2 4 8; do
  for algo in auto hd ring-topo nccl-topo-ring; do
    t0=$SECONDS result=pass
    bash "$root/tests/interposer/run_all_in_one.sh" "$out/all$n-$algo" "$plugin" "$check" "$n" "$algo" \
        > "$out/all$n-$algo.log" 2>&1 || { result=FAIL; failed=1; }
    row "bigraph, 1 process x $n GPUs" "$n" "$algo" "$out/all$n-$algo/all.log" $result $((SECONDS - t0))
  done
done
{
  echo
  echo "Commands (per run, rank r of n):"
  echo '```'
  echo "tests/emu/run_full_check.sh $1 $out"
  cat "$out/bigraph-n4-hd/command.txt" "$out/nap-n8-fc/command.txt" "$out/all4-hd/command.txt"
  echo '```'
} >> "$summary"
cat "$summary"
exit $failed
