#!/usr/bin/env bash
# Records `topocoll bench` with 8 local ranks over loopback, HD vs ring side by side, into
# perf/results/bench-8ranks-loopback.{md,json}: the command, the machine and the table.
# Usage: perf/exec/bench_loopback.sh [BUILD_DIR] (default build); RANKS, SIZES, ALGOS override.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
RANKS=${RANKS:-8}
SIZES=${SIZES:-1K:64M}
ALGOS=${ALGOS:-ring,ring-topo,hd}
TOPO=${TOPO:-examples/bigraph-32.json}
# One endpoint per switch of bigraph-32 (as `topocoll demo` places them): HD pairs each get
# their own inter-group link; the rank-order ring shares some.
ENDPOINTS=${ENDPOINTS:-s0.g0,s8.g0,s16.g0,s24.g0,s1.g0,s9.g0,s17.g0,s25.g0}
OUT=perf/results/bench-${RANKS}ranks-loopback
cmd=("$BUILD_DIR/tools/topocoll" bench --topo "$TOPO" --ranks "$RANKS" --algos "$ALGOS" --endpoints "$ENDPOINTS"
     --sizes "$SIZES" --iters 20 --json "$OUT.json")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
table=$("${cmd[@]}")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "# topocoll bench: $RANKS ranks on one machine over loopback"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/Mem:/{print $2}') GiB,"\
       "kernel $(uname -r); load average before/after: $load_before / $load_after"
  echo "- command: \`${cmd[*]}\`"
  echo "- every iteration's result checked (#wrong = wrong elements over all ranks and iterations);"
  echo "  time = median iteration time of the slowest rank; busbw = algbw x 2(n-1)/n (nccl-tests)."
  echo "- predicted = the planner's alpha-beta-gamma model of the *modelled fabric* (100 Gb/s links)"
  echo "  for the same placement; the measurement runs on this machine's cores and loopback."
  echo
  echo '```'
  echo "$table"
  echo '```'
} > "$OUT.md"
echo "wrote $OUT.md and $OUT.json"
