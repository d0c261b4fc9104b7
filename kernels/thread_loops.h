// The per-thread work of the CUDA kernels, written as __host__ __device__ functions of
// (thread index, thread count). On the GPU each kernel calls them with its grid coordinates;
// on the host a test runs every "thread" in turn, which is exactly equivalent because no thread
// touches another's elements (tests/kernels/thread_loops_test.cpp).
//
// Layout of one call over [0, count): a scalar head up to the first 16-byte aligned element,
// 16-byte packs, a scalar tail (when every pointer has the same address mod 16, see
// split_for_vectors); otherwise all element-wise. Each thread loads kUnroll vectors of each
// input before combining, striding over the whole grid so every warp access is contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/element_ops.h"
#include "kernels/reduce_cpu.h"  // kMaxReduceInputs

#if defined(__CUDACC__)
#include <vector_types.h>
#define TOPOCOLL_UNROLL _Pragma("unroll")
#else
#define TOPOCOLL_UNROLL
#endif

namespace topocoll::kernels {

inline constexpr int kUnroll = 4;
inline constexpr int kPackBytes = 16;

#if defined(__CUDACC__)
using Pack16 = uint4;  // one ld/st.global.v4
#else
struct alignas(16) Pack16 {
  std::uint32_t x, y, z, w;
};
#endif

// Element range [0, count) split for 16-byte packs: `head` scalar elements, then `packs`
// packs, then the rest. packs == 0 means "all element-wise".
struct VectorSplit {
  std::size_t head = 0, packs = 0;
};

// Packs are possible when all pointers share one address mod 16 (and are element aligned).
inline VectorSplit split_for_vectors(const void* const* ptrs, int nptrs, std::size_t count,
                                     std::size_t elem) {
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(ptrs[0]) % kPackBytes;
  for (int i = 1; i < nptrs; ++i)
    if (reinterpret_cast<std::uintptr_t>(ptrs[i]) % kPackBytes != mis) return {};
  VectorSplit s;
  s.head = ((kPackBytes - mis) % kPackBytes) / elem;
  if (s.head >= count) return {};
  s.packs = (count - s.head) * elem / kPackBytes;
  if (s.packs == 0) return {};
  return s;
}

struct ReduceArgs {
  const void* srcs[kMaxReduceInputs];
  void* dst;
  std::size_t count;  // elements
  std::size_t head;   // VectorSplit
  std::size_t packs;
  int nsrc;
};

struct MapArgs {
  const void* src;
  void* dst;
  std::size_t count, head, packs;
  std::uint64_t scalar;  // premul: the scalar's bits
  int nranks;            // finalize: the divisor
};

enum class MapKind { Finalize, Premul };

namespace detail {

template <class T, int N>
struct Vec {
  T e[N];
};

template <class T, int N>
TOPOCOLL_HD Vec<T, N> load(const T* base, std::size_t i) {
  Vec<T, N> v;
  if constexpr (sizeof(Vec<T, N>) == kPackBytes) {
    const Pack16 p = reinterpret_cast<const Pack16*>(base)[i];
    std::memcpy(&v, &p, sizeof v);
  } else {
    v.e[0] = base[i];
  }
  return v;
}

template <class T, int N>
TOPOCOLL_HD void store(T* base, std::size_t i, const Vec<T, N>& v) {
  if constexpr (sizeof(Vec<T, N>) == kPackBytes) {
    Pack16 p;
    std::memcpy(&p, &v, sizeof p);
    reinterpret_cast<Pack16*>(base)[i] = p;
  } else {
    base[i] = v.e[0];
  }
}

template <ReduceOp Op, class T, int N>
TOPOCOLL_HD void combine(Vec<T, N>& acc, const Vec<T, N>& in) {
TOPOCOLL_UNROLL
  for (int e = 0; e < N; ++e) acc.e[e] = apply_op<Op>(acc.e[e], in.e[e]);
}

// Reduces `nvec` vectors of N elements starting at element `first`.
template <ReduceOp Op, class T, int N>
TOPOCOLL_HD void reduce_vectors(const ReduceArgs& a, std::size_t first, std::size_t nvec,
                                std::size_t tid, std::size_t nthreads) {
  std::size_t v = tid;
  T* dst = static_cast<T*>(a.dst) + first;
  const T* s0 = static_cast<const T*>(a.srcs[0]) + first;
  for (; v + (kUnroll - 1) * nthreads < nvec; v += kUnroll * nthreads) {
    Vec<T, N> acc[kUnroll], in[kUnroll];
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) acc[k] = load<T, N>(s0, v + k * nthreads);
    for (int j = 1; j < a.nsrc; ++j) {
      const T* sj = static_cast<const T*>(a.srcs[j]) + first;
TOPOCOLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) in[k] = load<T, N>(sj, v + k * nthreads);
TOPOCOLL_UNROLL
      for (int k = 0; k < kUnroll; ++k) combine<Op>(acc[k], in[k]);
    }
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) store<T, N>(dst, v + k * nthreads, acc[k]);
  }
  for (; v < nvec; v += nthreads) {
    Vec<T, N> acc = load<T, N>(s0, v);
    for (int j = 1; j < a.nsrc; ++j)
      combine<Op>(acc, load<T, N>(static_cast<const T*>(a.srcs[j]) + first, v));
    store<T, N>(dst, v, acc);
  }
}

template <MapKind K, class T>
TOPOCOLL_HD T map_element(T x, const MapArgs& a) {
  if constexpr (K == MapKind::Finalize) {
    return divide_by_ranks(x, a.nranks);
  } else {
    T s;
    std::memcpy(&s, &a.scalar, sizeof s);
    return apply_op<ReduceOp::Prod>(x, s);
  }
}

template <MapKind K, class T, int N>
TOPOCOLL_HD void map_vectors(const MapArgs& a, std::size_t first, std::size_t nvec,
                             std::size_t tid, std::size_t nthreads) {
  std::size_t v = tid;
  const T* src = static_cast<const T*>(a.src) + first;
  T* dst = static_cast<T*>(a.dst) + first;
  for (; v + (kUnroll - 1) * nthreads < nvec; v += kUnroll * nthreads) {
    Vec<T, N> x[kUnroll];
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) x[k] = load<T, N>(src, v + k * nthreads);
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
TOPOCOLL_UNROLL
      for (int e = 0; e < N; ++e) x[k].e[e] = map_element<K>(x[k].e[e], a);
      store<T, N>(dst, v + k * nthreads, x[k]);
    }
  }
  for (; v < nvec; v += nthreads) {
    Vec<T, N> x = load<T, N>(src, v);
TOPOCOLL_UNROLL
    for (int e = 0; e < N; ++e) x.e[e] = map_element<K>(x.e[e], a);
    store<T, N>(dst, v, x);
  }
}

template <class W>
TOPOCOLL_HD void copy_words(W* dst, const W* src, std::size_t n, std::size_t tid,
                            std::size_t nthreads) {
  std::size_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < n; i += kUnroll * nthreads) {
    W w[kUnroll];
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) w[k] = src[i + k * nthreads];
TOPOCOLL_UNROLL
    for (int k = 0; k < kUnroll; ++k) dst[i + k * nthreads] = w[k];
  }
  for (; i < n; i += nthreads) dst[i] = src[i];
}

template <class W>
TOPOCOLL_HD void copy_aligned(char* d, const char* s, std::size_t bytes, std::size_t tid,
                              std::size_t nthreads) {
  constexpr std::size_t w = sizeof(W);
  std::size_t head = (w - reinterpret_cast<std::uintptr_t>(d) % w) % w;
  if (head > bytes) head = bytes;
  copy_words(d, s, head, tid, nthreads);
  const std::size_t words = (bytes - head) / w;
  copy_words(reinterpret_cast<W*>(d + head), reinterpret_cast<const W*>(s + head), words, tid,
             nthreads);
  const std::size_t done = head + words * w;
  copy_words(d + done, s + done, bytes - done, tid, nthreads);
}

}  // namespace detail

// One thread's share of reduce_cuda (ReduceArgs filled by the launcher).
template <DataType D, ReduceOp Op>
TOPOCOLL_HD void reduce_thread(const ReduceArgs& a, std::size_t tid, std::size_t nthreads) {
  using T = Element<D>;
  constexpr int N = kPackBytes / sizeof(T);
  if (a.packs == 0) {
    detail::reduce_vectors<Op, T, 1>(a, 0, a.count, tid, nthreads);
    return;
  }
  detail::reduce_vectors<Op, T, 1>(a, 0, a.head, tid, nthreads);
  detail::reduce_vectors<Op, T, N>(a, a.head, a.packs, tid, nthreads);
  const std::size_t tail = a.head + a.packs * N;
  detail::reduce_vectors<Op, T, 1>(a, tail, a.count - tail, tid, nthreads);
}

// One thread's share of finalize_cuda / premul_cuda.
template <MapKind K, DataType D>
TOPOCOLL_HD void map_thread(const MapArgs& a, std::size_t tid, std::size_t nthreads) {
  using T = Element<D>;
  constexpr int N = kPackBytes / sizeof(T);
  if (a.packs == 0) {
    detail::map_vectors<K, T, 1>(a, 0, a.count, tid, nthreads);
    return;
  }
  detail::map_vectors<K, T, 1>(a, 0, a.head, tid, nthreads);
  detail::map_vectors<K, T, N>(a, a.head, a.packs, tid, nthreads);
  const std::size_t tail = a.head + a.packs * N;
  detail::map_vectors<K, T, 1>(a, tail, a.count - tail, tid, nthreads);
}

// One thread's share of copying one range: the widest word (16/8/4/2/1 bytes) dividing
// dst - src, so both sides are aligned after the same byte head.
TOPOCOLL_HD void copy_range_thread(void* dst, const void* src, std::size_t bytes, std::size_t tid,
                                   std::size_t nthreads) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const std::uintptr_t dist =
      reinterpret_cast<std::uintptr_t>(d) - reinterpret_cast<std::uintptr_t>(s);
  if (dist % 16 == 0) detail::copy_aligned<Pack16>(d, s, bytes, tid, nthreads);
  else if (dist % 8 == 0) detail::copy_aligned<std::uint64_t>(d, s, bytes, tid, nthreads);
  else if (dist % 4 == 0) detail::copy_aligned<std::uint32_t>(d, s, bytes, tid, nthreads);
  else if (dist % 2 == 0) detail::copy_aligned<std::uint16_t>(d, s, bytes, tid, nthreads);
  else detail::copy_words(d, s, bytes, tid, nthreads);
}

}  // namespace topocoll::kernels
