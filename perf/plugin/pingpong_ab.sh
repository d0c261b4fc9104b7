#!/usr/bin/env bash
# Two runs of net_plugin_pingpong side by side: two builds of the plugin, or the plugin
# against the Socket-design baseline (--baseline), interleaved ROUNDS times in one run, the
# order alternating (A B, B A, A B, ...: ABBA), so neither always runs right after the other, then per size the median of each and B's ratio to A
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
# one_arm a|b ROUND: one run of that arm's command.
one_arm() {
  local cmd=$a
  [ "$1" = b ] && cmd=$b
  # shellcheck disable=SC2086  # a command and its flags
  $cmd --seconds "$seconds" --json "$out/$1-r$2.json" > "$out/$1-r$2.txt"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then one_arm a "$r"; one_arm b "$r"; else one_arm b "$r"; one_arm a "$r"; fi
done
python3 "$here/pingpong_table.py" --json "$out/table.json" "$out"/a-r*.json -- "$out"/b-r*.json | tee "$out/table.md"
