#!/usr/bin/env bash
# The main job: build, then run `topocoll demo` on the bundled default topology
# (validate, describe and draw it; plan HD vs ring with their link contention; run both
# allreduces for real across local processes and print measured next to predicted).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
BUILD_DIR=${BUILD_DIR:-build}
exec "$BUILD_DIR/tools/topocoll" demo --topo "${1:-examples/bigraph-32.json}" --out out
