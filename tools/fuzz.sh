#!/usr/bin/env bash
# Fuzz every parser that takes bytes from outside with libFuzzer, each for a fixed time:
#   topology       the topology loader (tests/fuzz/topology_fuzz.cpp)
#   bootstrap      the bootstrap wire: hellos, rank frames, root messages
#   handshake      the hello a client sends to a rank's data port
#   eager          the eager channel's hello and frames, read by a real channel on loopback
#   connect_handle the net plugin's connect handle
#   env            the grammar of values and the Env: TOPOCOLL_* and launcher variables
#   bash tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 20 s each, every target)
# Builds build-fuzz/<target> with clang (-fsanitize=fuzzer,address,undefined) straight from
# the sources, seeds it with tests/fuzz/corpus/<target>/ (the topology target also with
# examples/ and tests/data/topo/), and exits non-zero when a fuzzer finds a crash, leak,
# sanitizer report or hang (reproducers land in build-fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TO_RUN=${1:-20}
shift || true
# libFuzzer reads a time it cannot parse as no limit: a target name here would fuzz forever.
if ! [[ $SECONDS_TO_RUN =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: '$SECONDS_TO_RUN' is not a number of seconds; usage: bash tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(topology bootstrap handshake eager connect_handle env)

CXX_FUZZ=${CXX_FUZZ:-}
if [ -z "$CXX_FUZZ" ]; then
  for candidate in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$candidate" >/dev/null 2>&1; then CXX_FUZZ=$candidate; break; fi
  done
fi
if [ -z "$CXX_FUZZ" ]; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-dev to fuzz the parsers" >&2
  exit 1
fi

OUT=build-fuzz
# config/version.cpp's version, from project() as CMake would pass it.
VERSION=$(sed -n 's/^project(topocoll VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
NET_SOURCES=(net/*.cpp config/warnings.cpp)

# The sources each target is built from, and the directories whose changes rebuild it.
sources_of() {
  case "$1" in
    topology) echo tests/fuzz/topology_fuzz.cpp topo/*.cpp config/*.cpp ;;
    bootstrap) echo tests/fuzz/bootstrap_fuzz.cpp exec/bootstrap_wire.cpp config/value_grammar.cpp ;;
    handshake) echo tests/fuzz/handshake_fuzz.cpp net/hello_check.cpp net/socket_calls.cpp net/socket_address.cpp ;;
    eager) echo tests/fuzz/eager_fuzz.cpp exec/eager_channel.cpp "${NET_SOURCES[@]}" ;;
    connect_handle) echo tests/fuzz/connect_handle_fuzz.cpp "${NET_SOURCES[@]}" ;;
    env) echo tests/fuzz/env_fuzz.cpp config/*.cpp exec/bootstrap.cpp exec/bootstrap_wire.cpp \
           exec/rank_environment.cpp exec/pipeline.cpp net/*.cpp ;;
    *) echo "fuzz: unknown target '$1'" >&2; return 1 ;;
  esac
}
watched_of() {
  case "$1" in
    topology) echo topo config tests/fuzz ;;
    bootstrap) echo exec net config tests/fuzz ;;
    eager) echo exec net tests/fuzz tests/common ;;
    env) echo config exec net sched tests/fuzz ;;
    *) echo net tests/fuzz ;;
  esac
}

build_target() {
  local name=$1 binary="$OUT/${1}_fuzz"
  local sources
  read -r -a sources <<<"$(sources_of "$name")"
  local watched
  read -r -a watched <<<"$(watched_of "$name")"
  # Rebuild when any source or header is newer than the binary.
  if [ ! -x "$binary" ] || [ -n "$(find "${watched[@]}" -newer "$binary" -name '*.[ch]*' | head -1)" ]; then
    echo "fuzz: building $binary with $CXX_FUZZ"
    if ! "$CXX_FUZZ" -std=c++20 -O1 -g -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -DTOPOCOLL_VERSION="\"${VERSION:-unknown}\"" -I. "${sources[@]}" -pthread -o "$binary"; then
      echo "fuzz: build of $name failed (the compiler's message is above; if it says nothing of the code, libFuzzer lacks clang's runtime: Debian libclang-rt-14-dev)" >&2
      return 1
    fi
  fi
}

failed=()
for name in "${TARGETS[@]}"; do
  mkdir -p "$OUT/corpus/$name" "$OUT/artifacts/$name"
  if ! build_target "$name"; then failed+=("$name"); continue; fi
  cp -f tests/fuzz/corpus/"$name"/* "$OUT/corpus/$name/" 2>/dev/null || true
  flags=(-max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=2048 -print_final_stats=1
         -artifact_prefix="$OUT/artifacts/$name/")
  if [ "$name" = topology ]; then
    # Seed corpus: the examples, the malformed files and a valid topology at the size limits
    # (copied, so the fuzzer's additions stay in build-fuzz/corpus).
    cp -f examples/*.json tests/data/topo/*.json "$OUT/corpus/$name/" 2>/dev/null || true
    # -timeout: a valid topology at the loader's limits (65,536 endpoints, ~2M cables) takes
    # about 3 s to load under ASan/UBSan at -O1 on this 2-core class of machine; 20 s still
    # flags a hang long before the run ends.
    flags+=(-timeout=20 -max_len=65536)
  else
    # The other parsers are linear in small inputs: a second is already a hang.
    flags+=(-timeout=5 -max_len=4096)
  fi
  echo "fuzz: running $name for ${SECONDS_TO_RUN}s"
  set +e
  "$OUT/${name}_fuzz" "$OUT/corpus/$name" "${flags[@]}" >"$OUT/$name.log" 2>&1
  status=$?
  set -e
  tail -n 4 "$OUT/$name.log"
  if [ $status -ne 0 ]; then
    echo "fuzz: $name FAILED (exit $status); see $OUT/$name.log and $OUT/artifacts/$name/" >&2
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: no crash in ${#TARGETS[@]} target(s), ${SECONDS_TO_RUN}s each"
