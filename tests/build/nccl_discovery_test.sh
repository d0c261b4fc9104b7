#!/usr/bin/env bash
# Configures topocoll where NCCL's header does not sit inside the CUDA toolkit, as on Ubuntu
# with NVIDIA's libnccl-dev or with NCCL from the nvidia-nccl wheel, and builds the targets
# that include nccl.h (without the CUDA include directory: "nccl.h: cuda_runtime.h: No such
# file or directory"). Then checks that configure names the NCCL it took.
#
#   nccl_discovery_test.sh SOURCE_DIR WORK_DIR NCCL_HEADER NCCL_LIBRARY
set -euo pipefail
src=$1 work=$2 header=$3 library=$4
rm -rf "$work"
mkdir -p "$work"

# 1. NCCL_HOME holding only NCCL (no CUDA headers beside nccl.h).
home=$work/nccl-home
mkdir -p "$home/include" "$home/lib"
cp "$header" "$home/include/nccl.h"
ln -s "$library" "$home/lib/libnccl.so"
# nvcc is not needed to find and use nccl.h: CUDA stays off, so configure is quick.
NCCL_HOME=$home cmake -S "$src" -B "$work/home" -DTOPOCOLL_BUILD_TESTS=OFF -DTOPOCOLL_BUILD_PERF=OFF -DTOPOCOLL_ENABLE_CUDA=OFF \
  > "$work/home.log" 2>&1 || { cat "$work/home.log"; exit 1; }
grep -q "topocoll: NCCL [0-9.]* from NCCL_HOME ($home)" "$work/home.log" \
  || { echo "configure did not take NCCL_HOME:"; grep "topocoll:" "$work/home.log"; exit 1; }
cmake --build "$work/home" --target topocoll_plugin_common -j"${JOBS:-2}" > "$work/home-build.log" 2>&1 \
  || { tail -30 "$work/home-build.log"; exit 1; }

# 2. No NCCL in NCCL_HOME, the toolkit or the system: the nvidia-nccl wheel of the Python on
#    PATH (its lib/ has libnccl.so.2 only).
site=$work/site-packages
mkdir -p "$site/nvidia/nccl/include" "$site/nvidia/nccl/lib"
cp "$header" "$site/nvidia/nccl/include/nccl.h"
ln -s "$library" "$site/nvidia/nccl/lib/libnccl.so.2"
mkdir -p "$work/no-toolkit"
# A system NCCL (libnccl-dev's /usr/include/nccl.h, as in NVIDIA's CUDA images) is looked at
# before the wheel: its header directories are ignored here, as on a machine without one.
env -u NCCL_HOME PYTHONPATH=$site cmake -S "$src" -B "$work/wheel" -DTOPOCOLL_BUILD_TESTS=OFF \
  -DTOPOCOLL_BUILD_PERF=OFF -DTOPOCOLL_ENABLE_CUDA=OFF -DCUDAToolkit_ROOT="$work/no-toolkit" \
  "-DCMAKE_IGNORE_PATH=/usr/include;/usr/local/include;/usr/include/x86_64-linux-gnu;/usr/include/aarch64-linux-gnu" \
  > "$work/wheel.log" 2>&1 \
  || { cat "$work/wheel.log"; exit 1; }
grep -q "topocoll: NCCL [0-9.]* from the nvidia-nccl Python wheel ($site/nvidia/nccl)" "$work/wheel.log" \
  || { echo "configure did not take the wheel:"; grep "topocoll:" "$work/wheel.log"; exit 1; }
grep -q "$site/nvidia/nccl/lib/libnccl.so.2" "$work/wheel.log" \
  || { echo "configure did not take the wheel's libnccl.so.2:"; grep "topocoll:" "$work/wheel.log"; exit 1; }
echo "NCCL found from NCCL_HOME and from the wheel"
