#include "kernels/reduce_cpu.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/avg_scalar.h"
#include "kernels/element_ops.h"

namespace topocoll::kernels {
namespace {

// Elements reduced per block: the running result stays in a stack buffer, so dst may alias any
// source, and each inner loop is a plain vectorisable pass over contiguous arrays.
constexpr std::size_t kBlockBytes = 8192;

// Narrow floats (float16, bfloat16, fp8) under Sum/Prod: the same steps as apply_op (widen,
// op in float, round back after every step) split into separate passes over raw bit arrays
// (decode, op, encode), each a branch-free loop the compiler vectorises.
template <class T, ReduceOp Op>
void reduce_narrow_block(T* out, const T* const* in, int nsrc, std::size_t n) {
  using N = NarrowFloat<T>;
  using Raw = decltype(T::bits);
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  float acc[kBlock], x[kBlock];
  Raw bits[kBlock];
  const Raw* s0 = reinterpret_cast<const Raw*>(in[0]);
  for (std::size_t i = 0; i < n; ++i) acc[i] = N::to_float(T{s0[i]});
  for (int j = 1; j < nsrc; ++j) {
    const Raw* sj = reinterpret_cast<const Raw*>(in[j]);
    for (std::size_t i = 0; i < n; ++i) x[i] = N::to_float(T{sj[i]});
    if constexpr (Op == ReduceOp::Prod)
      for (std::size_t i = 0; i < n; ++i) bits[i] = N::from_float(acc[i] * x[i]).bits;
    else
      for (std::size_t i = 0; i < n; ++i) bits[i] = N::from_float(acc[i] + x[i]).bits;
    if (j + 1 < nsrc)
      for (std::size_t i = 0; i < n; ++i) acc[i] = N::to_float(T{bits[i]});
  }
  std::memcpy(out, bits, n * sizeof(T));
}

template <DataType D, ReduceOp Op>
void reduce_typed(void* dst, const void* const* srcs, int nsrc, std::size_t count) {
  using T = Element<D>;
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  constexpr bool kNarrowArith =
      NarrowFloat<T>::value && Op != ReduceOp::Max && Op != ReduceOp::Min;
  T acc[kBlock];
  T* out = static_cast<T*>(dst);
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    if (nsrc == 1) {
      std::memmove(out + base, s0, n * sizeof(T));
      continue;
    }
    if constexpr (kNarrowArith) {
      const T* in[kMaxReduceInputs];
      for (int j = 0; j < nsrc; ++j) in[j] = static_cast<const T*>(srcs[j]) + base;
      reduce_narrow_block<T, Op>(out + base, in, nsrc, n);
      continue;
    }
    const T* s1 = static_cast<const T*>(srcs[1]) + base;
    for (std::size_t i = 0; i < n; ++i) acc[i] = apply_op<Op>(s0[i], s1[i]);
    for (int j = 2; j < nsrc; ++j) {
      const T* sj = static_cast<const T*>(srcs[j]) + base;
      for (std::size_t i = 0; i < n; ++i) acc[i] = apply_op<Op>(acc[i], sj[i]);
    }
    std::memcpy(out + base, acc, n * sizeof(T));
  }
}

template <DataType D>
void finalize_typed(void* dst, std::size_t count, int nranks) {
  using T = Element<D>;
  T* p = static_cast<T*>(dst);
  for (std::size_t i = 0; i < count; ++i) p[i] = divide_by_ranks(p[i], nranks);
}

template <DataType D>
void premul_typed(void* dst, const void* src, std::size_t count, const void* scalar) {
  using T = Element<D>;
  T s;
  std::memcpy(&s, scalar, sizeof s);
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  for (std::size_t i = 0; i < count; ++i) out[i] = apply_op<ReduceOp::Prod>(in[i], s);
}

using ReduceFn = void (*)(void*, const void* const*, int, std::size_t);
using FinalizeFn = void (*)(void*, std::size_t, int);
using PremulFn = void (*)(void*, const void*, std::size_t, const void*);

template <int... T, int... O>
constexpr auto make_reduce_table(std::integer_sequence<int, T...>,
                                 std::integer_sequence<int, O...> ops) {
  auto row = [&]<int D>(std::integral_constant<int, D>) {
    return std::array<ReduceFn, kNumReduceOps>{
        &reduce_typed<static_cast<DataType>(D), static_cast<ReduceOp>(O)>...};
  };
  (void)ops;
  return std::array<std::array<ReduceFn, kNumReduceOps>, kNumDataTypes>{
      row(std::integral_constant<int, T>{})...};
}

template <int... T>
constexpr auto make_finalize_table(std::integer_sequence<int, T...>) {
  return std::array<FinalizeFn, kNumDataTypes>{&finalize_typed<static_cast<DataType>(T)>...};
}
template <int... T>
constexpr auto make_premul_table(std::integer_sequence<int, T...>) {
  return std::array<PremulFn, kNumDataTypes>{&premul_typed<static_cast<DataType>(T)>...};
}

constexpr auto kReduceTable = make_reduce_table(std::make_integer_sequence<int, kNumDataTypes>{},
                                                std::make_integer_sequence<int, kNumReduceOps>{});
constexpr auto kFinalizeTable =
    make_finalize_table(std::make_integer_sequence<int, kNumDataTypes>{});
constexpr auto kPremulTable = make_premul_table(std::make_integer_sequence<int, kNumDataTypes>{});

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string(fn) + ": " + what);
}

void check_type(const char* fn, DataType type) {
  if (!is_valid(type))
    fail(fn, "invalid DataType " + std::to_string(static_cast<int>(type)) + " (valid: 0.." +
                 std::to_string(kNumDataTypes - 1) + ")");
}

void check_op(const char* fn, ReduceOp op) {
  if (!is_valid(op))
    fail(fn, "invalid ReduceOp " + std::to_string(static_cast<int>(op)) + " (valid: 0.." +
                 std::to_string(kNumReduceOps - 1) + ")");
}

void check_aligned(const char* fn, const char* what, const void* p, DataType type) {
  if (reinterpret_cast<std::uintptr_t>(p) % datatype_size(type) != 0)
    fail(fn, std::string(what) + " is not aligned to the " + std::string(datatype_name(type)) +
                 " element size");
}

}  // namespace

void reduce_cpu(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                std::size_t count) {
  constexpr const char* fn = "reduce_cpu";
  check_type(fn, type);
  check_op(fn, op);
  if (nsrc < 1 || nsrc > kMaxReduceInputs)
    fail(fn, "nsrc " + std::to_string(nsrc) + " out of range 1.." +
                 std::to_string(kMaxReduceInputs));
  if (count == 0) return;
  if (dst == nullptr) fail(fn, "dst is null");
  if (srcs == nullptr) fail(fn, "srcs is null");
  check_aligned(fn, "dst", dst, type);
  for (int j = 0; j < nsrc; ++j) {
    if (srcs[j] == nullptr) fail(fn, "srcs[" + std::to_string(j) + "] is null");
    check_aligned(fn, ("srcs[" + std::to_string(j) + "]").c_str(), srcs[j], type);
  }
  kReduceTable[static_cast<int>(type)][static_cast<int>(op)](dst, srcs, nsrc, count);
}

void finalize_cpu(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks) {
  constexpr const char* fn = "finalize_cpu";
  check_type(fn, type);
  check_op(fn, op);
  if (nranks < 1) fail(fn, "nranks " + std::to_string(nranks) + " must be >= 1");
  if (op != ReduceOp::Avg || avg_premultiplies(type) || count == 0) return;
  if (dst == nullptr) fail(fn, "dst is null");
  check_aligned(fn, "dst", dst, type);
  kFinalizeTable[static_cast<int>(type)](dst, count, nranks);
}

void premul_cpu(DataType type, void* dst, const void* src, std::size_t count, const void* scalar) {
  constexpr const char* fn = "premul_cpu";
  check_type(fn, type);
  if (count == 0) return;
  if (dst == nullptr) fail(fn, "dst is null");
  if (src == nullptr) fail(fn, "src is null");
  if (scalar == nullptr) fail(fn, "scalar is null");
  check_aligned(fn, "dst", dst, type);
  check_aligned(fn, "src", src, type);
  kPremulTable[static_cast<int>(type)](dst, src, count, scalar);
}

void avg_premul_cpu(DataType type, void* dst, const void* src, std::size_t count, int nranks) {
  constexpr const char* fn = "avg_premul_cpu";
  check_type(fn, type);
  if (nranks < 1) fail(fn, "nranks " + std::to_string(nranks) + " must be >= 1");
  if (count == 0) return;
  if (dst == nullptr) fail(fn, "dst is null");
  if (src == nullptr) fail(fn, "src is null");
  if (!avg_premultiplies(type)) {
    if (dst != src) std::memmove(dst, src, count * datatype_size(type));
    return;
  }
  const std::uint64_t scalar = avg_scalar_bits(type, nranks);
  premul_cpu(type, dst, src, count, &scalar);
}

}  // namespace topocoll::kernels
