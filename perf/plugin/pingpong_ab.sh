#!/usr/bin/env bash
# Two runs of net_plugin_pingpong side by side: two builds of the plugin, or the plugin
# against the Socket-design baseline (--baseline), interleaved (A, B, A, B, ...) ROUNDS
# times in one run, then per size the median of each and B's ratio to A
# (perf/plugin/pingpong_table.py). A record, never a test.
#
#   perf/plugin/pingpong_ab.sh A_COMMAND B_COMMAND OUT_DIR [ROUNDS (3)] [SECONDS per size (0.3)]
#   perf/plugin/pingpong_ab.sh "build/perf/plugin/net_plugin_pingpong --baseline" \
#       build/perf/plugin/net_plugin_pingpong OUT_DIR 5 0.5
#
# A command is a binary and its flags, split at spaces. Each binary dlopens the plugin of
# its own build (compiled in). OUT_DIR gets a-r<k>.json, b-r<k>.json, table.md and table.json.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_COMMAND B_COMMAND OUT_DIR [ROUNDS] [SECONDS]" >&2; exit 2; }
a=$1 b=$2 out=$3 rounds=${4:-3} seconds=${5:-0.3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for r in $(seq "$rounds"); do
  # shellcheck disable=SC2086  # a command and its flags
  $a --seconds "$seconds" --json "$out/a-r$r.json" > "$out/a-r$r.txt"
  # shellcheck disable=SC2086
  $b --seconds "$seconds" --json "$out/b-r$r.json" > "$out/b-r$r.txt"
done
python3 "$here/pingpong_table.py" --json "$out/table.json" "$out"/a-r*.json -- "$out"/b-r*.json | tee "$out/table.md"
