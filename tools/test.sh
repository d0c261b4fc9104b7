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
  # A GPU with a build without CUDA (no nvcc found) would run no GPU test and say nothing.
  if ! grep -q -- '-- topocoll: CUDA=ON' "$BUILD_DIR/configure.log"; then
    echo "test: a GPU is present but $BUILD_DIR was built without CUDA (nvcc not found?): no GPU test would run" >&2
    exit 1
  fi
else
  echo "test: no GPU, excluding tests labelled 'gpu'"
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j"$(nproc)" "${label_filter[@]}"

bash tools/fuzz.sh "${FUZZ_SECONDS:-20}"
