#!/usr/bin/env bash
# The main job: build, then run `topocoll demo` on the bundled default topology
# (validate, describe and draw it; plan HD vs the rings with their link contention; run the
# allreduces on it emulated as a network with 20 Mbit/s cables, as root, else over loopback
# saying why, and print measured next to predicted). `topocoll demo` takes its fabric down
# itself, also on Ctrl-C (docs/engine.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
BUILD_DIR=${BUILD_DIR:-build}
# As root, topocoll writes only under directories no other user controls. Running this
# checkout's code as root already trusts its owner (a container's root over a checkout
# mounted from the host, `su` without sudo's SUDO_UID), so its results may go into it too.
owner=$(stat -c %u .)
if [ "$(id -u)" = 0 ] && [ "$owner" != 0 ] && [ -z "${TOPOCOLL_TRUSTED_UIDS:-}" ]; then
  export TOPOCOLL_TRUSTED_UIDS=$owner
fi
exec "$BUILD_DIR/tools/topocoll" demo --topo "${1:-examples/bigraph-32.json}" --out out
