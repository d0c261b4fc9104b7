// The table of CUDA kernels, one row per element type. Each row is compiled in the
// translation unit of its type group (kernels/kernels_*_cuda.cu), not all in one: nvcc's
// device passes (cicc, ptxas) run once per architecture and per unit, and with every
// instantiation in one file they were the build's longest step, which everything linking
// the kernels waited for (perf/results/build-time.md).
#pragma once

#include <array>

#include "kernels/datatype.h"
#include "kernels/thread_loops.h"  // ReduceArgs, MapArgs

namespace topocoll::kernels {

// Every kernel's launch bounds, and the block size it is launched with.
inline constexpr int kKernelBlockThreads = 256;

using ReduceKernel = void (*)(ReduceArgs);
using MapKernel = void (*)(MapArgs);

struct TypeKernels {
  ReduceKernel reduce[kNumReduceOps] = {};  // Avg reduces with the Sum kernel
  MapKernel finalize = nullptr;
  MapKernel premul = nullptr;
};
using KernelTable = std::array<TypeKernels, kNumDataTypes>;

// Every row, filled once by the groups below (thread-safe).
const KernelTable& kernel_table();

// Each fills the rows of its group's types. Measured cicc + ptxas per architecture on the
// 2-core build machine (perf/results/build-time.md): integer 9 s (sm_80) / 12 s (sm_90),
// float 7 / 7 s, fp8 21 / 5 s (sm_80 has no fp8 conversion instructions, so its fp8 code is
// emulated and long); with all 72 kernels in one unit, 41 / 28 s.
void add_integer_kernels(KernelTable& table);  // kernels/kernels_integer_cuda.cu
void add_float_kernels(KernelTable& table);    // kernels/kernels_float_cuda.cu
void add_fp8_kernels(KernelTable& table);      // kernels/kernels_fp8_cuda.cu

}  // namespace topocoll::kernels
