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
# CMake's own files: the programs, libraries, ctest's lists and BUILD/prebuilt.txt. ctest's lists
# name absolute paths, so the archive serves only the same source root and build directory; its
# stamp says which sources it was built from.

# prebuilt_stamp ROOT: the sources the working tree holds, as one line: HEAD, then a hash of the
# tracked files' changes against it and of the untracked files git does not ignore (both travel
# to the device machine). File modes are left out: a copy may not keep them.
prebuilt_stamp() {
  local root=$1 head
  head=$(git -C "$root" rev-parse HEAD 2>/dev/null) || { echo "no-git"; return 1; }
  {
    git -C "$root" -c core.fileMode=false diff HEAD --binary
    (cd "$root" && git ls-files --others --exclude-standard -z | sort -z | xargs -0 -r sha256sum)
  } | sha256sum | { read -r hash _; echo "$head $hash"; }
}

# prebuilt_field FILE KEY: the value of "KEY: value" in a stamp file.
prebuilt_field() { sed -n "s/^$2: //p" "$1" | head -n 1; }

# prebuilt_use ARCHIVE ROOT BUILD ARCH: unpacks the archive into BUILD when its stamp file
# (ARCHIVE without .tar.xz, plus .txt) says it was built from these sources, for this source root,
# build directory and architecture; prints what it used, or why not (status 1), in one line.
prebuilt_use() {
  local archive=$1 root=$2 build=$3 arch=$4 stamp_file=${1%.tar.xz}.txt want got tool path
  [ -f "$stamp_file" ] || { echo "no stamp file $stamp_file beside the archive"; return 1; }
  got=$(prebuilt_field "$stamp_file" sources)
  want=$(prebuilt_stamp "$root") || { echo "the sources here are not a git checkout, so cannot be matched"; return 1; }
  [ "$got" = "$want" ] || { echo "built from other sources (its stamp: $got; here: $want)"; return 1; }
  [ "$(prebuilt_field "$stamp_file" source-root)" = "$root" ] ||
    { echo "built for the source root $(prebuilt_field "$stamp_file" source-root), here $root"; return 1; }
  [ "$(prebuilt_field "$stamp_file" build-dir)" = "$build" ] ||
    { echo "built in $(prebuilt_field "$stamp_file" build-dir), not $build"; return 1; }
  [ -z "$arch" ] || [ "$(prebuilt_field "$stamp_file" cuda-arch)" = "$arch" ] ||
    { echo "built for sm_$(prebuilt_field "$stamp_file" cuda-arch), this GPU is sm_$arch"; return 1; }
  mkdir -p "$(dirname "$build")"
  if ! tar -C "$(dirname "$build")" -xJf "$archive" 2> /dev/null; then
    # No xz program: Python's tarfile reads the archive itself.
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$archive" "$(dirname "$build")" || { echo "cannot unpack $archive"; return 1; }
  fi
  if [ ! -f "$build/prebuilt.txt" ] || [ ! -f "$build/CMakeCache.txt" ]; then
    echo "$archive did not hold $(basename "$build")/prebuilt.txt and CMakeCache.txt"
    return 1
  fi
  # ctest's lists name the programs the configure found (cmake, readelf); where this machine has
  # them elsewhere, point the lists there.
  for tool in cmake readelf; do
    path=$(prebuilt_field "$stamp_file" "$tool")
    if [ -z "$path" ] || [ -x "$path" ] || ! command -v "$tool" > /dev/null; then continue; fi
    find "$build" -name CTestTestfile.cmake -exec sed -i "s|$path|$(command -v "$tool")|g" {} +
  done
  echo "prebuilt on $(prebuilt_field "$stamp_file" made) from $(prebuilt_field "$stamp_file" commit)"
}
