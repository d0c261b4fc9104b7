#!/usr/bin/env bash
# Records `topocoll demo`'s run step on the emulated fabric into perf/results/demo-fabric.md
# (the command, the machine, its load, how long the demo took, and the demo's own table and
# lines, run by run) and demo-fabric.svg (the last run's chart). Root; a quiet machine.
# Usage: perf/fabric/demo_record.sh [BUILD_DIR] (default build); RUNS=N repeats the demo.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
RUNS=${RUNS:-1}
OUT=perf/results/demo-fabric
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmd=("$BUILD_DIR/tools/topocoll" demo --out "$WORK/out")
{
  echo "# topocoll demo on the emulated fabric: measured next to predicted"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/Mem:/{print $2}') GiB,"\
       "kernel $(uname -r)"
  echo "- command: \`bash tools/demo.sh\` after its build, i.e. \`${cmd[0]} demo --out out\`; $RUNS run(s), one after the other"
  echo "- what runs: bigraph-32 as fabric \`demo\`, fastest cable 20 Mbit/s; 16 ranks on the first 16 endpoints;"
  echo "  allreduce float32 sum, every result checked; time = median of 3 iterations of the slowest rank;"
  echo "  predicted = the cost model at the fabric's rates (docs/plan-format.md, docs/fabric.md)"
} > "$OUT.md"
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/out"
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s.%N)
  "${cmd[@]}" > "$WORK/demo.log" 2>&1 || { cat "$WORK/demo.log"; echo "demo_record: run $run failed" >&2; exit 1; }
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  grep -q "emulated network" "$WORK/demo.log" || { grep "no emulated fabric" "$WORK/demo.log"; exit 1; }
  {
    echo
    printf '## Run %d: the demo took %.0f s; load average before/after %s / %s\n\n' "$run" "$seconds" "$load_before" "$load_after"
    sed -n '/^| size/,$p' "$WORK/out/demo-results.md"
    echo
    echo "The teardown, as the demo printed it:"
    echo
    echo '```'
    grep -E "taking fabric|fabric demo is down|nothing left behind|left behind:" "$WORK/demo.log"
    echo '```'
  } >> "$OUT.md"
done
cp "$WORK/out/demo-measured-vs-predicted.svg" "$OUT.svg"
printf '\n![measured and predicted, last run](demo-fabric.svg)\n' >> "$OUT.md"
echo "wrote $OUT.md and $OUT.svg"
