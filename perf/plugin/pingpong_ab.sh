#!/usr/bin/env bash
# Two builds of the net plugin side by side: net_plugin_pingpong of build A and of build B,
# interleaved (A, B, A, B, ...) ROUNDS times in one run, then per size the median of each
# and B's ratio to A (perf/plugin/pingpong_table.py). A record, never a test.
#
#   perf/plugin/pingpong_ab.sh A_BINARY B_BINARY OUT_DIR [ROUNDS (3)] [SECONDS per size (0.3)]
#
# Each binary dlopens the plugin of its own build (compiled in). OUT_DIR gets
# a-r<k>.json, b-r<k>.json, table.md and table.json.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_BINARY B_BINARY OUT_DIR [ROUNDS] [SECONDS]" >&2; exit 2; }
a=$1 b=$2 out=$3 rounds=${4:-3} seconds=${5:-0.3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for r in $(seq "$rounds"); do
  "$a" --seconds "$seconds" --json "$out/a-r$r.json" > "$out/a-r$r.txt"
  "$b" --seconds "$seconds" --json "$out/b-r$r.json" > "$out/b-r$r.txt"
done
python3 "$here/pingpong_table.py" --json "$out/table.json" "$out"/a-r*.json -- "$out"/b-r*.json | tee "$out/table.md"
