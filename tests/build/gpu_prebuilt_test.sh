#!/usr/bin/env bash
# A build made without a GPU and carried to the GPU machine (perf/gpu/prebuild.sh, unpacked by
# perf/gpu/run_all.sh through perf/gpu/gpu_build.sh's prebuilt_use) serves only the sources it
# was built from: a changed tracked file, a new untracked one, another build directory or another
# GPU architecture each refuse it, saying why; the sources it was built from take it, and ctest's
# lists then name this machine's programs.
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
mkdir -p "$repo/src"
git -C "$repo" init -q
git -C "$repo" config user.email test@example.invalid
git -C "$repo" config user.name test
echo 'int main() {}' > "$repo/src/main.cpp"
echo '/build-gpu/' > "$repo/.gitignore"
git -C "$repo" add -A
git -C "$repo" commit -q -m sources

# A build directory as prebuild.sh leaves it, its ctest list naming a cmake this machine lacks.
build=$repo/build-gpu
mkdir -p "$build/tests"
echo "CMAKE_COMMAND:INTERNAL=/nonexistent/bin/cmake" > "$build/CMakeCache.txt"
echo 'add_test(T "/nonexistent/bin/cmake" "-P" "x.cmake")' > "$build/tests/CTestTestfile.cmake"
stamp_file=$work/prebuilt/build-gpu.txt
mkdir -p "$work/prebuilt"
{
  echo "sources: $(prebuilt_stamp "$repo")"
  echo "commit: $(git -C "$repo" rev-parse --short HEAD)"
  echo "source-root: $repo"
  echo "build-dir: $build"
  echo "cuda-arch: 90"
  echo "made: today, here"
  echo "cmake: /nonexistent/bin/cmake"
} > "$stamp_file"
cp "$stamp_file" "$build/prebuilt.txt"
archive=$work/prebuilt/build-gpu.tar.xz
tar -C "$repo" -cJf "$archive" build-gpu
rm -rf "$build"

# refused ARCH WHY: prebuilt_use refuses, names WHY, and unpacks nothing.
refused() {
  local out
  if out=$(prebuilt_use "$archive" "$repo" "${3:-$build}" "$1"); then fail "taken although $2: $out"; fi
  grep -qF "$2" <<< "$out" || fail "refused without saying \"$2\": $out"
  [ ! -e "$build/CMakeCache.txt" ] || fail "unpacked although refused ($2)"
}

echo 'int main() { return 1; }' > "$repo/src/main.cpp"
refused 90 "built from other sources"
git -C "$repo" checkout -q -- src/main.cpp
echo 'new' > "$repo/src/new.cpp"
refused 90 "built from other sources"
rm "$repo/src/new.cpp"
refused 80 "built for sm_90, this GPU is sm_80"
refused 90 "built in $build, not $repo/other" "$repo/other"
# An ignored file (a carried directory, the results) changes nothing; file modes neither.
mkdir -p "$repo/build-gpu-results" && echo x > "$repo/build-gpu-results/x"
echo '/build-gpu-results/' >> "$repo/.git/info/exclude"
chmod +x "$repo/src/main.cpp"

out=$(prebuilt_use "$archive" "$repo" "$build" 90) || fail "the same sources refused: $out"
grep -qF "prebuilt on today, here from" <<< "$out" || fail "does not say what it used: $out"
[ -f "$build/CMakeCache.txt" ] && [ -f "$build/prebuilt.txt" ] || fail "not unpacked"
if command -v cmake > /dev/null; then
  grep -qF "\"$(command -v cmake)\" \"-P\"" "$build/tests/CTestTestfile.cmake" ||
    fail "ctest's list still names the missing cmake: $(cat "$build/tests/CTestTestfile.cmake")"
fi
# An unknown architecture (no nvidia-smi) does not refuse it.
rm -rf "$build"
prebuilt_use "$archive" "$repo" "$build" "" > /dev/null || fail "refused with no architecture to compare"

# prebuild.sh refuses an architecture that is not a number before it builds anything.
if out=$(bash "$src/perf/gpu/prebuild.sh" "sm_90;true" 2>&1); then fail "prebuild.sh took ARCH sm_90;true"; fi
grep -qF "ARCH must be a number" <<< "$out" || fail "prebuild.sh's refusal: $out"
echo "PASS"
