# shellcheck shell=bash disable=SC2154  # root and build are the sourcing script's
# The GPU machine's environment for perf/gpu/run_all.sh and perf/gpu/fabric_nccl_tests.sh
# (sourced; needs `root` and `build`): what the machine lacks comes from the .debs of
# perf/gpu/fetch_debs.sh (DEPS_DIR, default perf/gpu/debs), unpacked into $build/deps; NCCL
# is NCCL_HOME if set, else the nvidia-nccl wheel of python3 (the NCCL PyTorch loads), put
# first on LD_LIBRARY_PATH so every process of every stage runs that one NCCL.
: "${root:?}" "${build:?}"
[ -n "${TOPOCOLL_GPU_ENV:-}" ] && return 0
export TOPOCOLL_GPU_ENV=1
deps_dir=${DEPS_DIR:-$root/perf/gpu/debs}
prefix=$build/deps
have_build_deps=1
dpkg-query -W nlohmann-json3-dev libgtest-dev > /dev/null 2>&1 || have_build_deps=0
if { [ $have_build_deps = 0 ] || ! command -v ip > /dev/null; } && [ ! -d "$prefix/usr" ] &&
   ls "$deps_dir"/*.deb > /dev/null 2>&1; then
  mkdir -p "$prefix"
  for deb in "$deps_dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
fi
if [ $have_build_deps = 0 ]; then
  if [ -d "$prefix/usr" ]; then
    export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  else
    echo "gpu_env.sh: nlohmann-json / GoogleTest are not installed and $deps_dir has no .debs" \
         "(run perf/gpu/fetch_debs.sh where apt works and carry the directory)" >&2
  fi
fi
# iproute2 from the .debs (the emulated fabric's ip and tc) when the machine has none: the
# fabric runs them with the prefix's libraries (fabric/iproute2.h); PATH and LD_LIBRARY_PATH
# stay as they are, so no other program loads Debian's libraries.
if ! command -v ip > /dev/null && { [ -x "$prefix/bin/ip" ] || [ -x "$prefix/usr/bin/ip" ]; }; then
  export TOPOCOLL_FABRIC_IPROUTE2=$prefix
fi
if [ -z "${NCCL_HOME:-}" ]; then
  wheel=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null)
  [ -n "$wheel" ] && [ -f "$wheel/include/nccl.h" ] && export NCCL_HOME=$wheel
fi
if [ -n "${NCCL_HOME:-}" ]; then
  nccl_lib=$NCCL_HOME/lib
  [ -d "$NCCL_HOME/lib64" ] && nccl_lib=$NCCL_HOME/lib64
  export LD_LIBRARY_PATH="$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
