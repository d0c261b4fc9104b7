// Reduce / finalize / premul: dispatch and launch. One kernel per (type, op), the number of
// inputs a runtime loop, so the build stays at 12 x 4 reduce instantiations; they are
// compiled per type group (kernels/kernel_table_cuda.h) and launched from the table here,
// with the grid sized to the resident-block limit.
//
// The per-thread work lives in kernels/thread_loops.h (16-byte packs with a scalar head and
// tail, kUnroll packs per input in flight, grid-stride).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/avg_scalar.h"
#include "kernels/device_occupancy.h"
#include "kernels/kernel_table_cuda.h"
#include "kernels/launch_arguments.h"
#include "kernels/reduce_cuda.h"

namespace topocoll::kernels {

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t{};
    add_integer_kernels(t);
    add_float_kernels(t);
    add_fp8_kernels(t);
    return t;
  }();
  return table;
}

namespace {

// Occupancy cache slots (kernels/device_occupancy.h).
constexpr int kSlotReduce = 0;                                           // + type * ops + op
constexpr int kSlotFinalize = kSlotReduce + kNumDataTypes * kNumReduceOps;  // + type
constexpr int kSlotPremul = kSlotFinalize + kNumDataTypes;                  // + type
static_assert(kSlotPremul + kNumDataTypes <= kOccupancySlots);

cudaError_t launch(const void* kernel, int slot, std::size_t work_items, void* args,
                   cudaStream_t stream) {
  int resident = 0;
  if (const cudaError_t e = max_resident_blocks(kernel, kKernelBlockThreads, slot, &resident);
      e != cudaSuccess)
    return e;
  // Spread even small jobs over as many SMs as there is work; never more than fits at once.
  const std::size_t wanted = (work_items + kKernelBlockThreads - 1) / kKernelBlockThreads;
  const unsigned blocks =
      static_cast<unsigned>(wanted < static_cast<std::size_t>(resident) ? wanted : resident);
  return cudaLaunchKernel(kernel, dim3(blocks > 0 ? blocks : 1), dim3(kKernelBlockThreads), &args, 0,
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
  return launch(reinterpret_cast<const void*>(kernel_table()[t].reduce[o]),
                kSlotReduce + t * kNumReduceOps + o, work, &a, stream);
}

namespace {
// Arguments already checked (check_map).
cudaError_t launch_map(MapKernel TypeKernels::*which, int slot_base, DataType type, MapArgs& a,
                       cudaStream_t stream) {
  const std::size_t elem = datatype_size(type);
  const void* ptrs[2] = {a.src, a.dst};
  const VectorSplit s = split_for_vectors(ptrs, 2, a.count, elem);
  a.head = s.head;
  a.packs = s.packs;
  const int t = static_cast<int>(type);
  return launch(reinterpret_cast<const void*>(kernel_table()[t].*which), slot_base + t, s.packs ? s.packs : a.count,
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
  return launch_map(&TypeKernels::finalize, kSlotFinalize, type, a, stream);
}

cudaError_t premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                        const void* host_scalar, cudaStream_t stream) {
  if (const Launch l = check_premul(type, dst, src, count, host_scalar); l != Launch::Run) return result_of(l);
  MapArgs a{};
  a.src = src;
  a.dst = dst;
  a.count = count;
  std::memcpy(&a.scalar, host_scalar, datatype_size(type));
  return launch_map(&TypeKernels::premul, kSlotPremul, type, a, stream);
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
