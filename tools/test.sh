#!/usr/bin/env bash
# The test command: build, then run every CPU test (and the GPU tests when a GPU is present),
# then a short fixed-time fuzz run of every parser of outside bytes (tools/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh

BUILD_DIR=${BUILD_DIR:-build}
label_filter=(-LE gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  label_filter=()
  echo "test: GPU present, running GPU tests too"
else
  echo "test: no GPU, excluding tests labelled 'gpu'"
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "${label_filter[@]}"

if [ -x tools/fuzz.sh ] || [ -f tools/fuzz.sh ]; then
  bash tools/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
