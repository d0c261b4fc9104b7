// Reduce / finalize / premul kernels. One kernel per (type, op) through a dispatch table; the
// number of inputs is a runtime loop, so the build stays at 12 x 4 reduce instantiations.
//
// Memory access: when dst and every source share the same address mod 16, the body moves
// 16-byte packs (ld/st.global.v4) with a scalar head up to the first aligned element and a
// scalar tail; otherwise everything is element-wise. Each thread keeps kUnroll packs per input
// in flight before combining, in a grid-stride loop sized to the resident-block limit.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/device_occupancy.h"
#include "kernels/element_ops.h"
#include "kernels/reduce_cuda.h"

namespace topocoll::kernels {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kUnroll = 4;
constexpr int kPackBytes = 16;

struct ReduceArgs {
  const void* srcs[kMaxReduceInputs];
  void* dst;
  std::size_t count;  // elements
  std::size_t head;   // scalar elements before the first 16-byte aligned one (vector mode)
  std::size_t packs;  // 16-byte packs after the head (vector mode); 0 = all element-wise
  int nsrc;
};

struct MapArgs {
  const void* src;
  void* dst;
  std::size_t count, head, packs;
  std::uint64_t scalar;  // premul: the scalar's bits
  int nranks;            // finalize: the divisor
};

template <class T, int N>
struct Vec {
  T e[N];
};

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load(const T* base, std::size_t i) {
  Vec<T, N> v;
  if constexpr (sizeof(Vec<T, N>) == kPackBytes) {
    const uint4 u = reinterpret_cast<const uint4*>(base)[i];
    std::memcpy(&v, &u, sizeof v);
  } else {
    v.e[0] = base[i];
  }
  return v;
}

template <class T, int N>
__device__ __forceinline__ void store(T* base, std::size_t i, const Vec<T, N>& v) {
  if constexpr (sizeof(Vec<T, N>) == kPackBytes) {
    uint4 u;
    std::memcpy(&u, &v, sizeof u);
    reinterpret_cast<uint4*>(base)[i] = u;
  } else {
    base[i] = v.e[0];
  }
}

template <ReduceOp Op, class T, int N>
__device__ __forceinline__ void combine(Vec<T, N>& acc, const Vec<T, N>& in) {
#pragma unroll
  for (int e = 0; e < N; ++e) acc.e[e] = apply_op<Op>(acc.e[e], in.e[e]);
}

// Reduces `nvec` vectors of N elements starting at element `first`.
template <ReduceOp Op, class T, int N>
__device__ __forceinline__ void reduce_vectors(const ReduceArgs& a, std::size_t first,
                                               std::size_t nvec) {
  const std::size_t nthreads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  T* dst = static_cast<T*>(a.dst) + first;
  const T* s0 = static_cast<const T*>(a.srcs[0]) + first;
  for (; v + (kUnroll - 1) * nthreads < nvec; v += kUnroll * nthreads) {
    Vec<T, N> acc[kUnroll], in[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc[k] = load<T, N>(s0, v + k * nthreads);
    for (int j = 1; j < a.nsrc; ++j) {
      const T* sj = static_cast<const T*>(a.srcs[j]) + first;
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) in[k] = load<T, N>(sj, v + k * nthreads);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) combine<Op>(acc[k], in[k]);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) store<T, N>(dst, v + k * nthreads, acc[k]);
  }
  for (; v < nvec; v += nthreads) {
    Vec<T, N> acc = load<T, N>(s0, v);
    for (int j = 1; j < a.nsrc; ++j)
      combine<Op>(acc, load<T, N>(static_cast<const T*>(a.srcs[j]) + first, v));
    store<T, N>(dst, v, acc);
  }
}

template <DataType D, ReduceOp Op>
__global__ void __launch_bounds__(kBlockThreads) reduce_kernel(const __grid_constant__ ReduceArgs a) {
  using T = Element<D>;
  constexpr int N = kPackBytes / sizeof(T);
  if (a.packs == 0) {
    reduce_vectors<Op, T, 1>(a, 0, a.count);
    return;
  }
  reduce_vectors<Op, T, 1>(a, 0, a.head);
  reduce_vectors<Op, T, N>(a, a.head, a.packs);
  const std::size_t tail = a.head + a.packs * N;
  reduce_vectors<Op, T, 1>(a, tail, a.count - tail);
}

// Element-wise pre/post operations (finalize's division, premul's product) on one input.
enum class MapKind { Finalize, Premul };

template <MapKind K, class T>
__device__ __forceinline__ T map_element(T x, const MapArgs& a) {
  if constexpr (K == MapKind::Finalize) {
    return divide_by_ranks(x, a.nranks);
  } else {
    T s;
    std::memcpy(&s, &a.scalar, sizeof s);
    return apply_op<ReduceOp::Prod>(x, s);
  }
}

template <MapKind K, class T, int N>
__device__ __forceinline__ void map_vectors(const MapArgs& a, std::size_t first, std::size_t nvec) {
  const std::size_t nthreads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const T* src = static_cast<const T*>(a.src) + first;
  T* dst = static_cast<T*>(a.dst) + first;
  for (; v + (kUnroll - 1) * nthreads < nvec; v += kUnroll * nthreads) {
    Vec<T, N> x[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) x[k] = load<T, N>(src, v + k * nthreads);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
#pragma unroll
      for (int e = 0; e < N; ++e) x[k].e[e] = map_element<K>(x[k].e[e], a);
      store<T, N>(dst, v + k * nthreads, x[k]);
    }
  }
  for (; v < nvec; v += nthreads) {
    Vec<T, N> x = load<T, N>(src, v);
#pragma unroll
    for (int e = 0; e < N; ++e) x.e[e] = map_element<K>(x.e[e], a);
    store<T, N>(dst, v, x);
  }
}

template <MapKind K, DataType D>
__global__ void __launch_bounds__(kBlockThreads) map_kernel(const __grid_constant__ MapArgs a) {
  using T = Element<D>;
  constexpr int N = kPackBytes / sizeof(T);
  if (a.packs == 0) {
    map_vectors<K, T, 1>(a, 0, a.count);
    return;
  }
  map_vectors<K, T, 1>(a, 0, a.head);
  map_vectors<K, T, N>(a, a.head, a.packs);
  const std::size_t tail = a.head + a.packs * N;
  map_vectors<K, T, 1>(a, tail, a.count - tail);
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

// Splits [0, count) into head / 16-byte packs / tail when every pointer has the same
// address mod 16; otherwise packs = 0 and the kernel goes element-wise.
struct Split {
  std::size_t head = 0, packs = 0;
};
Split split_for_vectors(const void* const* ptrs, int nptrs, std::size_t count, std::size_t elem) {
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(ptrs[0]) % kPackBytes;
  for (int i = 1; i < nptrs; ++i)
    if (reinterpret_cast<std::uintptr_t>(ptrs[i]) % kPackBytes != mis) return {};
  Split s;
  s.head = ((kPackBytes - mis) % kPackBytes) / elem;
  if (s.head >= count) return {};
  s.packs = (count - s.head) * elem / kPackBytes;
  if (s.packs == 0) return {};
  return s;
}

bool aligned_to(const void* p, std::size_t elem) {
  return reinterpret_cast<std::uintptr_t>(p) % elem == 0;
}

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
  if (!is_valid(type) || !is_valid(op) || nsrc < 1 || nsrc > kMaxReduceInputs)
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const std::size_t elem = datatype_size(type);
  if (dst == nullptr || srcs == nullptr || !aligned_to(dst, elem)) return cudaErrorInvalidValue;
  ReduceArgs a{};
  const void* ptrs[kMaxReduceInputs + 1];
  for (int j = 0; j < nsrc; ++j) {
    if (srcs[j] == nullptr || !aligned_to(srcs[j], elem)) return cudaErrorInvalidValue;
    a.srcs[j] = srcs[j];
    ptrs[j] = srcs[j];
  }
  ptrs[nsrc] = dst;
  a.dst = dst;
  a.count = count;
  a.nsrc = nsrc;
  const Split s = split_for_vectors(ptrs, nsrc + 1, count, elem);
  a.head = s.head;
  a.packs = s.packs;
  const int t = static_cast<int>(type), o = static_cast<int>(op);
  const std::size_t work = s.packs ? s.packs : count;
  return launch(reinterpret_cast<const void*>(kReduceKernels[t][o]),
                kSlotReduce + t * kNumReduceOps + o, work, &a, stream);
}

namespace {
cudaError_t launch_map(const std::array<MapKernel, kNumDataTypes>& table, int slot_base,
                       DataType type, MapArgs& a, cudaStream_t stream) {
  const std::size_t elem = datatype_size(type);
  if (a.dst == nullptr || a.src == nullptr || !aligned_to(a.dst, elem) || !aligned_to(a.src, elem))
    return cudaErrorInvalidValue;
  const void* ptrs[2] = {a.src, a.dst};
  const Split s = split_for_vectors(ptrs, 2, a.count, elem);
  a.head = s.head;
  a.packs = s.packs;
  const int t = static_cast<int>(type);
  return launch(reinterpret_cast<const void*>(table[t]), slot_base + t, s.packs ? s.packs : a.count,
                &a, stream);
}
}  // namespace

cudaError_t finalize_cuda(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks,
                          cudaStream_t stream) {
  if (!is_valid(type) || !is_valid(op) || nranks < 1) return cudaErrorInvalidValue;
  if (op != ReduceOp::Avg || count == 0) return cudaSuccess;
  MapArgs a{};
  a.src = dst;
  a.dst = dst;
  a.count = count;
  a.nranks = nranks;
  return launch_map(kFinalizeKernels, kSlotFinalize, type, a, stream);
}

cudaError_t premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                        const void* host_scalar, cudaStream_t stream) {
  if (!is_valid(type)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (host_scalar == nullptr) return cudaErrorInvalidValue;
  MapArgs a{};
  a.src = src;
  a.dst = dst;
  a.count = count;
  std::memcpy(&a.scalar, host_scalar, datatype_size(type));
  return launch_map(kPremulKernels, kSlotPremul, type, a, stream);
}

}  // namespace topocoll::kernels
