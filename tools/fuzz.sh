#!/usr/bin/env bash
# Fuzz the topology loader with libFuzzer for a fixed time.
#   bash tools/fuzz.sh [SECONDS]   (default 30)
# Builds build-fuzz/topology_fuzz with clang (-fsanitize=fuzzer,address,undefined) straight
# from the topo sources, seeds it with examples/ and tests/data/topo/, and exits non-zero
# when the fuzzer finds a crash, leak, sanitizer report or hang (reproducers land in
# build-fuzz/artifacts/).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TO_RUN=${1:-30}
CXX_FUZZ=${CXX_FUZZ:-}
if [ -z "$CXX_FUZZ" ]; then
  for candidate in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$candidate" >/dev/null 2>&1; then CXX_FUZZ=$candidate; break; fi
  done
fi
if [ -z "$CXX_FUZZ" ]; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev to fuzz the loader" >&2
  exit 1
fi

OUT=build-fuzz
mkdir -p "$OUT/corpus" "$OUT/artifacts"
SOURCES=(tests/fuzz/topology_fuzz.cpp topo/*.cpp)
BINARY="$OUT/topology_fuzz"

# Rebuild when any source or header is newer than the binary.
if [ ! -x "$BINARY" ] || [ -n "$(find topo tests/fuzz -newer "$BINARY" -name '*.[ch]*' | head -1)" ]; then
  echo "fuzz: building $BINARY with $CXX_FUZZ"
  if ! "$CXX_FUZZ" -std=c++20 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I. "${SOURCES[@]}" -o "$BINARY"; then
    echo "fuzz: build failed; libFuzzer needs clang's runtime (Debian: libclang-rt-14-dev)" >&2
    exit 1
  fi
fi

# Seed corpus: the examples, the malformed files and a valid topology at the size limits (copied, so the fuzzer's additions stay
# in build-fuzz/corpus).
cp -f examples/*.json tests/data/topo/*.json tests/fuzz/corpus/topology/*.json "$OUT/corpus/" 2>/dev/null || true

# -timeout: a valid topology at the loader's limits (65,536 endpoints, ~2M cables) takes
# about 3 s to load under ASan/UBSan at -O1 on this 2-core class of machine; 20 s still
# flags a hang long before the run ends.
echo "fuzz: running for ${SECONDS_TO_RUN}s"
set +e
"$BINARY" "$OUT/corpus" -max_total_time="$SECONDS_TO_RUN" -timeout=20 -rss_limit_mb=2048 \
  -max_len=65536 -artifact_prefix="$OUT/artifacts/" -print_final_stats=1 \
  >"$OUT/fuzz.log" 2>&1
status=$?
set -e
tail -n 15 "$OUT/fuzz.log"
if [ $status -ne 0 ]; then
  echo "fuzz: FAILED (exit $status); see $OUT/fuzz.log and $OUT/artifacts/" >&2
  exit 1
fi
echo "fuzz: no crash in ${SECONDS_TO_RUN}s"
