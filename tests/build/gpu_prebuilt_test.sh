#!/usr/bin/env bash
# A build made without a GPU and carried to the GPU machine (perf/gpu/prebuild.sh, unpacked by
# perf/gpu/run_all.sh through perf/gpu/gpu_build.sh) serves only the sources it was built from:
# a changed or new source file, another build directory, GPU architecture or NCCL each refuse it,
# saying why, and leave nothing unpacked; an archive that is not the one its stamp describes (an
# interrupted pack) is refused too. Records under perf/results/, ignored files and file modes
# change nothing. A build an earlier call unpacked is removed once the sources change.
#   gpu_prebuilt_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if command -v shellcheck > /dev/null; then
  (cd "$src" && shellcheck -x perf/gpu/prebuild.sh perf/gpu/gpu_build.sh) || fail "shellcheck"
fi
# shellcheck source=perf/gpu/gpu_build.sh
. "$src/perf/gpu/gpu_build.sh"

rm -rf "$work"
repo=$work/repo
mkdir -p "$repo/src" "$repo/perf/gpu" "$repo/perf/results"
git -C "$repo" init -q
git -C "$repo" config user.email test@example.invalid
git -C "$repo" config user.name test
echo 'int main() {}' > "$repo/src/main.cpp"
echo 'an older record' > "$repo/perf/results/old.md"
printf '/build-gpu/\n/perf/gpu/prebuilt/\n' > "$repo/.gitignore"
git -C "$repo" add -A
git -C "$repo" commit -q -m sources

# A build directory as prebuild.sh leaves it (its ctest list naming a cmake this machine lacks,
# built against NCCL 2.28.9), stamped and packed by prebuild.sh's own functions.
build=$repo/build-gpu
dest=$repo/perf/gpu/prebuilt
archive=$dest/build-gpu.tar.xz
mkdir -p "$build/tests" "$work/nccl/include"
printf 'CMAKE_COMMAND:INTERNAL=/nonexistent/bin/cmake\nNCCL_INCLUDE_DIR:PATH=%s\n' "$work/nccl/include" > "$build/CMakeCache.txt"
echo 'add_test(T "/nonexistent/bin/cmake" "-P" "x.cmake")' > "$build/tests/CTestTestfile.cmake"
echo '#define NCCL_VERSION_CODE 22809' > "$work/nccl/include/nccl.h"
echo '#define NCCL_VERSION_CODE 22803' > "$work/nccl/other.h"
pack() {  # pack ARCH: the build's stamp for the work tree's sources, then the archive
  prebuilt_describe "$repo" "$build" "$1" "$(prebuilt_stamp "$repo")" none > "$build/prebuilt.txt"
  prebuilt_pack "$build" "$dest" 1 || fail "prebuilt_pack"
  rm -rf "$build"
}
pack 90
[ "$(prebuilt_field "$dest/build-gpu.txt" nccl-version)" = 22809 ] || fail "stamp's nccl-version: $(cat "$dest/build-gpu.txt")"
[ "$(prebuilt_field "$dest/build-gpu.txt" cuda-arch)" = 90 ] || fail "stamp's cuda-arch"

# refused ARCH WHY [BUILD [HEADER]]: prebuilt_use refuses, names WHY, and leaves nothing.
refused() {
  local out
  if out=$(prebuilt_use "$archive" "$repo" "${3:-$build}" "$1" "${4:-}"); then fail "taken although $2: $out"; fi
  grep -qF "$2" <<< "$out" || fail "refused without saying \"$2\": $out"
  [ ! -e "$build/CMakeCache.txt" ] || fail "unpacked although refused ($2)"
  [ -z "$(find "$repo" -name 'build-gpu.unpack.*')" ] || fail "a refused unpack left its directory ($2)"
}

echo 'int main() { return 1; }' > "$repo/src/main.cpp"
refused 90 "built from other sources"
git -C "$repo" checkout -q -- src/main.cpp
echo 'new' > "$repo/src/new.cpp"
refused 90 "built from other sources"
rm "$repo/src/new.cpp"
refused 80 "built for sm_90, this GPU is sm_80"
refused 90 "built for the build-dir $build, here $repo/other" "$repo/other"
refused 90 "built against NCCL 22809's header, the checks here load 22803" "$build" "$work/nccl/other.h"

# An interrupted pack: an older archive beside a newer stamp, or no stamp at all.
cp "$archive" "$work/older.tar.xz"
cp "$dest/build-gpu.txt" "$work/older.txt"
echo '// changed' >> "$repo/src/main.cpp"
mkdir -p "$build/tests"
printf 'CMAKE_COMMAND:INTERNAL=/nonexistent/bin/cmake\n' > "$build/CMakeCache.txt"
pack 90
cp "$work/older.tar.xz" "$archive"
refused 90 "does not hold the build its stamp describes (sources differs"
rm "$dest/build-gpu.txt"
refused 90 "no stamp"
git -C "$repo" checkout -q -- src/main.cpp
cp "$work/older.tar.xz" "$archive"
cp "$work/older.txt" "$dest/build-gpu.txt"

# Records (perf/results), ignored files and file modes are not sources; .debs already unpacked
# into the build directory stay.
echo 'a new record' > "$repo/perf/results/new.md"
mkdir -p "$repo/build-gpu-results" && echo x > "$repo/build-gpu-results/x"
echo '/build-gpu-results/' >> "$repo/.git/info/exclude"
chmod +x "$repo/src/main.cpp"
mkdir -p "$build/deps/usr" && echo deb > "$build/deps/usr/file"
out=$(prebuilt_use "$archive" "$repo" "$build" 90 "$work/nccl/include/nccl.h") || fail "the same sources refused: $out"
grep -qF "from $(git -C "$repo" rev-parse --short HEAD)" <<< "$out" || fail "does not say what it used: $out"
[ -f "$build/CMakeCache.txt" ] && [ -f "$build/prebuilt.txt" ] || fail "not unpacked"
[ "$(cat "$build/deps/usr/file")" = deb ] || fail "the unpacked .debs were lost"
if command -v cmake > /dev/null; then
  grep -qF "\"$(command -v cmake)\" \"-P\"" "$build/tests/CTestTestfile.cmake" ||
    fail "ctest's list still names the missing cmake: $(cat "$build/tests/CTestTestfile.cmake")"
fi

# A later call: the unpacked build stays while the sources do, and goes (its .debs kept) when
# they change.
[ -z "$(prebuilt_drop_stale "$repo" "$build")" ] && [ -f "$build/prebuilt.txt" ] || fail "dropped a current build"
echo '// edited between calls' >> "$repo/src/main.cpp"
out=$(prebuilt_drop_stale "$repo" "$build")
grep -qF "was for other sources" <<< "$out" || fail "a stale build not dropped: $out"
[ ! -e "$build/CMakeCache.txt" ] && [ "$(cat "$build/deps/usr/file")" = deb ] || fail "stale build: not removed, or .debs lost"
git -C "$repo" checkout -q -- src/main.cpp

# An unknown architecture and NCCL (no nvidia-smi, no NCCL_HOME) do not refuse it.
rm -rf "$build"
prebuilt_use "$archive" "$repo" "$build" "" "" > /dev/null || fail "refused with nothing to compare"

# prebuild.sh refuses an architecture that is not a number before it builds anything (a cmake
# that fails stands first on PATH, so a regression cannot start a build).
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 1\n' > "$work/bin/cmake" && chmod +x "$work/bin/cmake"
if out=$(PATH="$work/bin:$PATH" bash "$src/perf/gpu/prebuild.sh" "sm_90;true" 2>&1); then fail "prebuild.sh took ARCH sm_90;true"; fi
grep -qF "ARCH must be a number" <<< "$out" || fail "prebuild.sh's refusal: $out"
echo "PASS"
