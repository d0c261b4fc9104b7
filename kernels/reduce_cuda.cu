// Reduce / finalize / premul kernels. One kernel per (type, op) through a dispatch table; the
// number of inputs is a runtime loop, so the build stays at 12 x 4 reduce instantiations.
//
// The per-thread work lives in kernels/thread_loops.h (16-byte packs with a scalar head and
// tail, kUnroll packs per input in flight, grid-stride); here: kernels, dispatch and launch,
// with the grid sized to the resident-block limit.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/avg_scalar.h"
#include "kernels/device_occupancy.h"
#include "kernels/element_ops.h"
#include "kernels/launch_arguments.h"
#include "kernels/reduce_cuda.h"
#include "kernels/thread_loops.h"

namespace topocoll::kernels {
namespace {

constexpr int kBlockThreads = 256;

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

template <DataType D, ReduceOp Op>
__global__ void __launch_bounds__(kBlockThreads) reduce_kernel(const __grid_constant__ ReduceArgs a) {
  reduce_thread<D, Op>(a, thread_index(), thread_count());
}

template <MapKind K, DataType D>
__global__ void __launch_bounds__(kBlockThreads) map_kernel(const __grid_constant__ MapArgs a) {
  map_thread<K, D>(a, thread_index(), thread_count());
}

// --- Dispatch tables ----------------------------------------------------------------------
using ReduceKernel = void (*)(ReduceArgs);
using MapKernel = void (*)(MapArgs);

// Avg reduces with the Sum kernel: no separate instantiation.
template <int D>
constexpr std::array<ReduceKernel, kNumReduceOps> reduce_row() {
  constexpr DataType t = static_cast<DataType>(D);
  return {&reduce_kernel<t, ReduceOp::Sum>, &reduce_kernel<t, ReduceOp::Prod>,
          &reduce_kernel<t, ReduceOp::Max>, &reduce_kernel<t, ReduceOp::Min>,
          &reduce_kernel<t, ReduceOp::Sum>};
}
template <int... D>
constexpr auto reduce_table(std::integer_sequence<int, D...>) {
  return std::array<std::array<ReduceKernel, kNumReduceOps>, kNumDataTypes>{reduce_row<D>()...};
}
template <MapKind K, int... D>
constexpr auto map_table(std::integer_sequence<int, D...>) {
  return std::array<MapKernel, kNumDataTypes>{&map_kernel<K, static_cast<DataType>(D)>...};
}

const auto kReduceKernels = reduce_table(std::make_integer_sequence<int, kNumDataTypes>{});
const auto kFinalizeKernels =
    map_table<MapKind::Finalize>(std::make_integer_sequence<int, kNumDataTypes>{});
const auto kPremulKernels =
    map_table<MapKind::Premul>(std::make_integer_sequence<int, kNumDataTypes>{});

// Occupancy cache slots (kernels/device_occupancy.h).
constexpr int kSlotReduce = 0;                                           // + type * ops + op
constexpr int kSlotFinalize = kSlotReduce + kNumDataTypes * kNumReduceOps;  // + type
constexpr int kSlotPremul = kSlotFinalize + kNumDataTypes;                  // + type
static_assert(kSlotPremul + kNumDataTypes <= kOccupancySlots);

cudaError_t launch(const void* kernel, int slot, std::size_t work_items, void* args,
                   cudaStream_t stream) {
  int resident = 0;
  if (const cudaError_t e = max_resident_blocks(kernel, kBlockThreads, slot, &resident);
      e != cudaSuccess)
    return e;
  // Spread even small jobs over as many SMs as there is work; never more than fits at once.
  const std::size_t wanted = (work_items + kBlockThreads - 1) / kBlockThreads;
  const unsigned blocks =
      static_cast<unsigned>(wanted < static_cast<std::size_t>(resident) ? wanted : resident);
  return cudaLaunchKernel(kernel, dim3(blocks > 0 ? blocks : 1), dim3(kBlockThreads), &args, 0,
                          stream);
}

}  // namespace

cudaError_t reduce_cuda(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                        std::size_t count, cudaStream_t stream) {
  if (const Launch l = check_reduce(type, op, dst, srcs, nsrc, count); l != Launch::Run)
    return l == Launch::Nothing ? cudaSuccess : cudaErrorInvalidValue;
  const std::size_t elem = datatype_size(type);
  ReduceArgs a{};
  const void* ptrs[kMaxReduceInputs + 1];
  for (int j = 0; j < nsrc; ++j) {
    a.srcs[j] = srcs[j];
    ptrs[j] = srcs[j];
  }
  ptrs[nsrc] = dst;
  a.dst = dst;
  a.count = count;
  a.nsrc = nsrc;
  const VectorSplit s = split_for_vectors(ptrs, nsrc + 1, count, elem);
  a.head = s.head;
  a.packs = s.packs;
  const int t = static_cast<int>(type), o = static_cast<int>(op);
  const std::size_t work = s.packs ? s.packs : count;
  return launch(reinterpret_cast<const void*>(kReduceKernels[t][o]),
                kSlotReduce + t * kNumReduceOps + o, work, &a, stream);
}

namespace {
// Arguments already checked (check_map).
cudaError_t launch_map(const std::array<MapKernel, kNumDataTypes>& table, int slot_base,
                       DataType type, MapArgs& a, cudaStream_t stream) {
  const std::size_t elem = datatype_size(type);
  const void* ptrs[2] = {a.src, a.dst};
  const VectorSplit s = split_for_vectors(ptrs, 2, a.count, elem);
  a.head = s.head;
  a.packs = s.packs;
  const int t = static_cast<int>(type);
  return launch(reinterpret_cast<const void*>(table[t]), slot_base + t, s.packs ? s.packs : a.count,
                &a, stream);
}

cudaError_t result_of(Launch l) { return l == Launch::Nothing ? cudaSuccess : cudaErrorInvalidValue; }
}  // namespace

cudaError_t finalize_cuda(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks,
                          cudaStream_t stream) {
  if (const Launch l = check_finalize(type, op, dst, count, nranks); l != Launch::Run) return result_of(l);
  MapArgs a{};
  a.src = dst;
  a.dst = dst;
  a.count = count;
  a.nranks = nranks;
  return launch_map(kFinalizeKernels, kSlotFinalize, type, a, stream);
}

cudaError_t premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                        const void* host_scalar, cudaStream_t stream) {
  if (const Launch l = check_premul(type, dst, src, count, host_scalar); l != Launch::Run) return result_of(l);
  MapArgs a{};
  a.src = src;
  a.dst = dst;
  a.count = count;
  std::memcpy(&a.scalar, host_scalar, datatype_size(type));
  return launch_map(kPremulKernels, kSlotPremul, type, a, stream);
}

cudaError_t avg_premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                            int nranks, cudaStream_t stream) {
  if (const Launch l = check_avg_premul(type, dst, src, count, nranks); l != Launch::Run) return result_of(l);
  // Default: the kind follows the pointers (unified addressing), as the kernels' own loads
  // do; a user buffer in mapped host or managed memory is then no undefined copy.
  if (!avg_premultiplies(type))
    return cudaMemcpyAsync(dst, src, count * datatype_size(type), cudaMemcpyDefault, stream);
  const std::uint64_t scalar = avg_scalar_bits(type, nranks);
  return premul_cuda(type, dst, src, count, &scalar, stream);
}

}  // namespace topocoll::kernels
