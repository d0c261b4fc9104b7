// The CUDA kernels of one element type, for the type groups' translation units
// (kernels/kernel_table_cuda.h). The per-thread work lives in kernels/thread_loops.h; here
// the kernels themselves and the row of the table they fill.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/kernel_table_cuda.h"
#include "kernels/thread_loops.h"

namespace topocoll::kernels {
namespace {

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

template <DataType D, ReduceOp Op>
__global__ void __launch_bounds__(kKernelBlockThreads) reduce_kernel(const __grid_constant__ ReduceArgs a) {
  reduce_thread<D, Op>(a, thread_index(), thread_count());
}

template <MapKind K, DataType D>
__global__ void __launch_bounds__(kKernelBlockThreads) map_kernel(const __grid_constant__ MapArgs a) {
  map_thread<K, D>(a, thread_index(), thread_count());
}

// Fills type D's row: one reduce kernel per op (Avg is Sum's), finalize and premul.
template <DataType D>
void add_type_kernels(KernelTable& table) {
  TypeKernels& row = table[static_cast<int>(D)];
  row.reduce[static_cast<int>(ReduceOp::Sum)] = &reduce_kernel<D, ReduceOp::Sum>;
  row.reduce[static_cast<int>(ReduceOp::Prod)] = &reduce_kernel<D, ReduceOp::Prod>;
  row.reduce[static_cast<int>(ReduceOp::Max)] = &reduce_kernel<D, ReduceOp::Max>;
  row.reduce[static_cast<int>(ReduceOp::Min)] = &reduce_kernel<D, ReduceOp::Min>;
  row.reduce[static_cast<int>(ReduceOp::Avg)] = &reduce_kernel<D, ReduceOp::Sum>;
  row.finalize = &map_kernel<MapKind::Finalize, D>;
  row.premul = &map_kernel<MapKind::Premul, D>;
}

}  // namespace
}  // namespace topocoll::kernels
