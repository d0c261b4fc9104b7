# shellcheck shell=bash
# How the GPU checks' programs are built, shared by perf/gpu/run_all.sh (which builds on the GPU
# machine) and perf/gpu/prebuild.sh (which builds the same on a machine without a GPU and packs
# it to travel with the device call: METHOD.md's "compile here, carry the outputs"). Sourced.

# gpu_configure SOURCE BUILD ARCH: Release, CUDA, tests and benchmarks; machine code for ARCH
# alone (90 = sm_90, the H100's and H200's; empty: the project's default architectures).
gpu_configure() {
  local src=$1 build=$2 arch=$3 archs=()
  [ -n "$arch" ] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$arch-real")
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOPOCOLL_ENABLE_CUDA=ON \
      -DTOPOCOLL_BUILD_TESTS=ON -DTOPOCOLL_BUILD_PERF=ON "${archs[@]}"
}

# nccl_tests_make SRC BUILD ARCH NCCL_HOME CUDA_HOME JOBS: the three nccl-tests binaries the
# checks run (all_reduce, reduce_scatter, all_gather), with MPI, for ARCH alone, into
# BUILD/nccl-tests. Building only those takes a third of the whole suite's time.
nccl_tests_make() {
  local src=$1 build=$2 arch=${3:-90} nccl_home=$4 cuda_home=$5 jobs=$6 inc out=$2/nccl-tests
  # nccl-tests links -L$NCCL_HOME/lib -lnccl: the wheel has only libnccl.so.2, so -lnccl would
  # find another NCCL (or none); link against the wheel's through a directory that names it.
  if [ ! -e "$nccl_home/lib/libnccl.so" ] && [ -e "$nccl_home/lib/libnccl.so.2" ]; then
    mkdir -p "$build/nccl-home/lib"
    ln -sfn "$nccl_home/include" "$build/nccl-home/include"
    ln -sf "$nccl_home/lib/libnccl.so.2" "$build/nccl-home/lib/libnccl.so"
    nccl_home=$build/nccl-home
  fi
  inc=$(mpicc --showme:incdirs 2>/dev/null | cut -d' ' -f1)
  make -C "$src/src" -j"$jobs" MPI=1 MPI_HOME="$(dirname "${inc:-/usr/include}")" \
      CUDA_HOME="$cuda_home" NCCL_HOME="$nccl_home" BUILDDIR="$out" \
      NVCC_GENCODE="-gencode=arch=compute_$arch,code=sm_$arch" \
      "$out/all_reduce_perf" "$out/reduce_scatter_perf" "$out/all_gather_perf"
}

# --- a build made elsewhere ---------------------------------------------------------------------
# The archive holds BUILD (relative to the source root) without objects, static libraries and
# CMake's own files: the programs, libraries, ctest's lists and BUILD/prebuilt.txt, whose copy
# beside the archive (the stamp, ARCHIVE without .tar.xz plus .txt) says what it was built from.
# ctest's lists name absolute paths, so it serves only the same source root and build directory.

# prebuilt_stamp ROOT: one hash of the sources in the work tree (perf/gpu/source_stamp.py).
prebuilt_stamp() { python3 "$(dirname "${BASH_SOURCE[0]}")/source_stamp.py" "$1"; }

# prebuilt_field FILE KEY: the value of "KEY: value" in a stamp file.
prebuilt_field() { sed -n "s/^$2: //p" "$1" | head -n 1; }

# nccl_header_version HEADER: NCCL_VERSION_CODE of an nccl.h (22809 for 2.28.9), or nothing.
nccl_header_version() { sed -n 's/^#define NCCL_VERSION_CODE \([0-9][0-9]*\).*/\1/p' "$1" 2> /dev/null | head -n 1; }

# cuda_major: the major version of the nvcc on PATH, or nothing.
cuda_major() { nvcc --version 2> /dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' | head -n 1; }

# prebuilt_describe ROOT BUILD ARCH SOURCES NCCL_TESTS: the stamp of BUILD, built for ARCH from
# SOURCES (prebuilt_stamp's hash); the fields prebuilt_use compares come first.
prebuilt_describe() {
  local root=$1 build=$2 arch=$3 sources=$4 nccl_tests=$5 cxx nccl_inc changed=""
  cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }
  cxx=$(cache CMAKE_CXX_COMPILER)
  nccl_inc=$(cache NCCL_INCLUDE_DIR)
  [ -z "$(git -C "$root" status --porcelain --untracked-files=all -- . ':(exclude)perf/results' 2> /dev/null)" ] ||
    changed=" with uncommitted changes or untracked files"
  echo "sources: $sources"
  echo "source-root: $root"
  echo "build-dir: $build"
  echo "cuda-arch: $arch"
  echo "cuda-major: $(cuda_major)"
  echo "nccl-version: $(nccl_header_version "$nccl_inc/nccl.h")"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)$changed"
  echo "made: $(date -u '+%Y-%m-%d %H:%M UTC'), $( (. /etc/os-release && echo "$PRETTY_NAME") 2> /dev/null), $(uname -n)"
  echo "compilers: $cxx ($("$cxx" -dumpfullversion 2> /dev/null || echo "version unknown")), nvcc $(nvcc --version 2> /dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "nccl: $(cache NCCL_LIBRARY) (headers $nccl_inc)"
  echo "nccl-tests: $nccl_tests"
  echo "cmake: $(cache CMAKE_COMMAND)"
  echo "readelf: $(cache CMAKE_READELF)"
}

# prebuilt_pack BUILD DEST JOBS: BUILD (with its prebuilt.txt written) into DEST/build-gpu.tar.xz,
# then its stamp beside it, each written under another name and renamed: an interrupted pack
# leaves no stamp, so no older archive passes for the new one.
prebuilt_pack() {
  local build=$1 dest=$2 jobs=$3 name
  name=$(basename "$build")
  mkdir -p "$dest"
  rm -f "$dest/build-gpu.txt"
  # Objects, static libraries, CMake's own files, the precompiled headers and the GPU machine's
  # unpacked .debs stay out.
  tar -C "$(dirname "$build")" -cf - --exclude=CMakeFiles --exclude='*.o' --exclude='*.a' --exclude='*.gch' \
      --exclude="$name/deps" "$name" | xz -6 -T"$jobs" > "$dest/build-gpu.tar.xz.tmp" || return 1
  mv "$dest/build-gpu.tar.xz.tmp" "$dest/build-gpu.tar.xz"
  cp "$build/prebuilt.txt" "$dest/build-gpu.txt.tmp" && mv "$dest/build-gpu.txt.tmp" "$dest/build-gpu.txt"
}

# prebuilt_mismatch STAMP ROOT BUILD ARCH NCCL_HEADER: why a build with this stamp does not fit
# these sources, root, build directory, GPU architecture (empty: not known), NCCL (the header
# of the NCCL the checks will load; empty: not known) and CUDA; nothing if it fits.
prebuilt_mismatch() {
  local stamp=$1 root=$2 build=$3 arch=$4 header=$5 want field have
  want=$(prebuilt_stamp "$root" 2>&1) || { echo "the sources here cannot be stamped: $want"; return; }
  [ "$(prebuilt_field "$stamp" sources)" = "$want" ] ||
    { echo "built from other sources (commit $(prebuilt_field "$stamp" commit); the work tree here differs)"; return; }
  for field in source-root build-dir; do
    have=$root
    [ $field = build-dir ] && have=$build
    [ "$(prebuilt_field "$stamp" $field)" = "$have" ] ||
      { echo "built for the $field $(prebuilt_field "$stamp" $field), here $have"; return; }
  done
  [ -z "$arch" ] || [ "$(prebuilt_field "$stamp" cuda-arch)" = "$arch" ] ||
    { echo "built for sm_$(prebuilt_field "$stamp" cuda-arch), this GPU is sm_$arch"; return; }
  have=$(nccl_header_version "$header")
  [ -z "$have" ] || [ "$(prebuilt_field "$stamp" nccl-version)" = "$have" ] ||
    { echo "built against NCCL $(prebuilt_field "$stamp" nccl-version)'s header, the checks here load $have ($header)"; return; }
  have=$(cuda_major)
  [ -z "$have" ] || [ "$(prebuilt_field "$stamp" cuda-major)" = "$have" ] ||
    { echo "built with CUDA $(prebuilt_field "$stamp" cuda-major), here CUDA $have"; return; }
}

# prebuilt_use ARCHIVE ROOT BUILD ARCH NCCL_HEADER: unpacks the archive into BUILD when its stamp
# fits (prebuilt_mismatch) and the archive holds the build its stamp describes; prints what it
# used, or why not (status 1), in one line. BUILD's deps/ (the unpacked .debs) is kept; a
# refused or failed unpack leaves nothing behind.
prebuilt_use() {
  local archive=$1 root=$2 build=$3 arch=$4 header=${5:-} stamp=${1%.tar.xz}.txt why tmp name err field tool path
  [ -f "$stamp" ] || { echo "no stamp $stamp beside the archive (an interrupted prebuild.sh?)"; return 1; }
  why=$(prebuilt_mismatch "$stamp" "$root" "$build" "$arch" "$header")
  [ -z "$why" ] || { echo "$why"; return 1; }
  name=$(basename "$build")
  # Beside BUILD under BUILD's name, so the ignore rule that keeps BUILD out of the sources
  # (/build*/) keeps this out too: a directory left by a killed unpack must not change the
  # source stamp. Those of killed unpacks go first.
  tmp=$build.unpack.$$
  rm -rf "$build".unpack.*
  mkdir -p "$tmp" || { echo "cannot make $tmp"; return 1; }
  if ! err=$(tar -C "$tmp" -xJf "$archive" 2>&1); then
    # No xz program: Python's tarfile reads the archive itself.
    err=$(python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
          "$archive" "$tmp" 2>&1) || { rm -rf "$tmp"; echo "cannot unpack $archive: ${err##*$'\n'}"; return 1; }
  fi
  for field in sources build-dir cuda-arch; do
    if [ ! -f "$tmp/$name/CMakeCache.txt" ] ||
       [ "$(prebuilt_field "$tmp/$name/prebuilt.txt" $field 2> /dev/null)" != "$(prebuilt_field "$stamp" $field)" ]; then
      rm -rf "$tmp"
      echo "$archive does not hold the build its stamp describes ($field differs; an interrupted prebuild.sh?)"
      return 1
    fi
  done
  [ ! -d "$build/deps" ] || mv "$build/deps" "$tmp/$name/deps"
  rm -rf "$build" && mv "$tmp/$name" "$build" && rm -rf "$tmp"
  # ctest's lists name the programs the configure found (cmake, readelf); where this machine has
  # them elsewhere, point the lists there.
  for tool in cmake readelf; do
    path=$(prebuilt_field "$stamp" "$tool")
    # Only a plain absolute path (it goes into sed's pattern), and only one this machine lacks.
    [[ "$path" =~ ^/[A-Za-z0-9._/+-]+$ ]] || continue
    if [ -x "$path" ] || ! command -v "$tool" > /dev/null; then continue; fi
    find "$build" -name CTestTestfile.cmake -exec sed -i "s|$path|$(command -v "$tool")|g" {} +
  done
  echo "prebuilt on $(prebuilt_field "$stamp" made) from $(prebuilt_field "$stamp" commit)"
}

# prebuilt_drop_stale ROOT BUILD: when BUILD is a prebuilt build (an earlier call unpacked it)
# for other sources than the work tree's, removes it (keeping deps/) and says so; it cannot be
# rebuilt in place, having no objects.
prebuilt_drop_stale() {
  local root=$1 build=$2 want
  [ -f "$build/prebuilt.txt" ] || return 0
  want=$(prebuilt_stamp "$root" 2> /dev/null)
  [ "$(prebuilt_field "$build/prebuilt.txt" sources)" != "$want" ] || return 0
  echo "the prebuilt build in $build was for other sources ($(prebuilt_field "$build/prebuilt.txt" commit)): removed"
  [ ! -d "$build/deps" ] || mv "$build/deps" "$build.deps.$$"
  rm -rf "$build"
  [ ! -d "$build.deps.$$" ] || { mkdir -p "$build" && mv "$build.deps.$$" "$build/deps"; }
}
