// The element-wise arithmetic behind every reduction, shared verbatim by the CPU reference and
// the CUDA kernels so both produce the same bits. Only the narrow-float conversions differ in
// implementation (CUDA intrinsics on the device, kernels/narrow_float.h on the host) and those
// are bit-exact equivalents.
//
// Rules (NCCL's src/device/reduce_kernel.h semantics, made exact):
//   - Integers wrap modulo 2^bits (computed in the unsigned type: no signed-overflow UB).
//   - float32/float64 use the native IEEE operation, round to nearest even, no fused ops.
//   - float16/bfloat16/fp8: both operands are widened to float, the op is done in float and
//     the result is rounded back to the narrow type after EVERY binary op, as NCCL's
//     __hadd/__hmul do (float holds the exact product of two narrow values and, for sums,
//     float's 24 bits make the double rounding innocuous, so this equals the single-rounded
//     narrow op). fp8 rounds back with saturation to the largest finite value.
//   - Max/Min on floating types behave like fmaxf/fminf (and __hmax/__hmin): a NaN operand is
//     ignored unless both are NaN (then the first operand is returned); +0 > -0. The result is
//     always one of the inputs, bit for bit.
//   - Avg on integers divides once at the end (finalize), truncating toward zero like NCCL's
//     SumPostDiv. Avg on floating types is NCCL's PreMulSum: each input times 1/nranks, then
//     Sum (kernels/avg_scalar.h); divide_by_ranks leaves them unchanged.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/datatype.h"
#include "kernels/narrow_float.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace topocoll::kernels {

// Storage of the narrow float types: raw bits, no arithmetic of their own.
struct Float16Bits { std::uint16_t bits; };
struct Bfloat16Bits { std::uint16_t bits; };
struct Fp8E4M3Bits { std::uint8_t bits; };
struct Fp8E5M2Bits { std::uint8_t bits; };

template <class T> struct NarrowFloat : std::false_type {};

template <> struct NarrowFloat<Float16Bits> : std::true_type {
  TOPOCOLL_HD static float to_float(Float16Bits x) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(x.bits));
#else
    return half_to_float(x.bits);
#endif
  }
  TOPOCOLL_HD static Float16Bits from_float(float f) {
#if defined(__CUDA_ARCH__)
    return {__half_as_ushort(__float2half_rn(f))};
#else
    return {float_to_half(f)};
#endif
  }
  TOPOCOLL_HD static bool is_nan(Float16Bits x) { return (x.bits & 0x7FFFu) > 0x7C00u; }
  TOPOCOLL_HD static bool sign(Float16Bits x) { return (x.bits >> 15) != 0; }
};

template <> struct NarrowFloat<Bfloat16Bits> : std::true_type {
  TOPOCOLL_HD static float to_float(Bfloat16Bits x) { return bf16_to_float(x.bits); }
  TOPOCOLL_HD static Bfloat16Bits from_float(float f) {
#if defined(__CUDA_ARCH__)
    return {__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
    return {float_to_bf16(f)};
#endif
  }
  TOPOCOLL_HD static bool is_nan(Bfloat16Bits x) { return (x.bits & 0x7FFFu) > 0x7F80u; }
  TOPOCOLL_HD static bool sign(Bfloat16Bits x) { return (x.bits >> 15) != 0; }
};

template <> struct NarrowFloat<Fp8E4M3Bits> : std::true_type {
  TOPOCOLL_HD static float to_float(Fp8E4M3Bits x) {
#if defined(__CUDA_ARCH__)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
#else
    return fp8_e4m3_to_float(x.bits);
#endif
  }
  TOPOCOLL_HD static Fp8E4M3Bits from_float(float f) {
#if defined(__CUDA_ARCH__)
    return {__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)};
#else
    return {float_to_fp8_e4m3(f)};
#endif
  }
  TOPOCOLL_HD static bool is_nan(Fp8E4M3Bits x) { return (x.bits & 0x7Fu) == 0x7Fu; }
  TOPOCOLL_HD static bool sign(Fp8E4M3Bits x) { return (x.bits >> 7) != 0; }
};

template <> struct NarrowFloat<Fp8E5M2Bits> : std::true_type {
  TOPOCOLL_HD static float to_float(Fp8E5M2Bits x) {
#if defined(__CUDA_ARCH__)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E5M2)));
#else
    return fp8_e5m2_to_float(x.bits);
#endif
  }
  TOPOCOLL_HD static Fp8E5M2Bits from_float(float f) {
#if defined(__CUDA_ARCH__)
    return {__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2)};
#else
    return {float_to_fp8_e5m2(f)};
#endif
  }
  TOPOCOLL_HD static bool is_nan(Fp8E5M2Bits x) { return (x.bits & 0x7Fu) > 0x7Cu; }
  TOPOCOLL_HD static bool sign(Fp8E5M2Bits x) { return (x.bits >> 7) != 0; }
};

// The C++ storage type of each DataType.
template <DataType D> struct ElementOf;
template <> struct ElementOf<DataType::Int8> { using type = std::int8_t; };
template <> struct ElementOf<DataType::Uint8> { using type = std::uint8_t; };
template <> struct ElementOf<DataType::Int32> { using type = std::int32_t; };
template <> struct ElementOf<DataType::Uint32> { using type = std::uint32_t; };
template <> struct ElementOf<DataType::Int64> { using type = std::int64_t; };
template <> struct ElementOf<DataType::Uint64> { using type = std::uint64_t; };
template <> struct ElementOf<DataType::Float16> { using type = Float16Bits; };
template <> struct ElementOf<DataType::Float32> { using type = float; };
template <> struct ElementOf<DataType::Float64> { using type = double; };
template <> struct ElementOf<DataType::Bfloat16> { using type = Bfloat16Bits; };
template <> struct ElementOf<DataType::Fp8E4M3> { using type = Fp8E4M3Bits; };
template <> struct ElementOf<DataType::Fp8E5M2> { using type = Fp8E5M2Bits; };
template <DataType D> using Element = typename ElementOf<D>::type;

namespace detail {

template <class T> TOPOCOLL_HD bool float_is_nan(T x) { return x != x; }
template <class T> TOPOCOLL_HD bool float_sign(T x) {
  if constexpr (sizeof(T) == 4) return (float_bits(x) >> 31) != 0;
  else {
    std::uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    return (u >> 63) != 0;
  }
}

// fmax-like selection shared by every floating type: va/vb are the exact values of a/b.
template <bool IsMax, class T, class V>
TOPOCOLL_HD T select_float(T a, T b, V va, V vb, bool nan_a, bool nan_b, bool sign_a) {
  if (nan_b) return a;
  if (nan_a) return b;
  if (va == vb) return (sign_a == IsMax) ? b : a;  // only +0/-0 differ here: max keeps +0
  return (IsMax ? va > vb : va < vb) ? a : b;
}

}  // namespace detail

// One binary step of op on two elements. Avg is Sum here; its division is finalize's job.
template <ReduceOp Op, class T>
TOPOCOLL_HD T apply_op(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Avg)
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    else if constexpr (Op == ReduceOp::Prod)
      // uint8 promotes to int (no overflow up to 255*255); wider types multiply unsigned.
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    else if constexpr (Op == ReduceOp::Max)
      return a > b ? a : b;
    else
      return a < b ? a : b;
  } else if constexpr (NarrowFloat<T>::value) {
    using N = NarrowFloat<T>;
    const float fa = N::to_float(a), fb = N::to_float(b);
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Avg)
      return N::from_float(fa + fb);
    else if constexpr (Op == ReduceOp::Prod)
      return N::from_float(fa * fb);
    else {
      // NCCL 2.28: __hmax/__hmin, whose result is the canonical NaN when both are NaN; fp8
      // through half and back with __NV_SATFINITE (an e5m2 ±inf becomes ±57344). The round
      // trip through float is exact for every other value.
      const T m = detail::select_float<Op == ReduceOp::Max>(a, b, fa, fb, N::is_nan(a), N::is_nan(b),
                                                            N::sign(a));
      return N::from_float(N::to_float(m));
    }
  } else {  // float, double
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Avg)
      return a + b;
    else if constexpr (Op == ReduceOp::Prod)
      return a * b;
    else
      return detail::select_float<Op == ReduceOp::Max>(a, b, a, b, detail::float_is_nan(a),
                                                       detail::float_is_nan(b),
                                                       detail::float_sign(a));
  }
}

// Avg's final step: x / nranks, once, for integers, truncating toward zero (NCCL's
// SumPostDiv). Floating types were pre-multiplied (kernels/avg_scalar.h): x unchanged.
template <class T>
TOPOCOLL_HD T divide_by_ranks(T x, int nranks) {
  if constexpr (std::is_integral_v<T>) {
    // Divide in the narrowest sufficient width (64-bit division is slow on GPUs).
    using Wide = std::conditional_t<(sizeof(T) > 4), std::int64_t, std::int32_t>;
    using UWide = std::make_unsigned_t<Wide>;
    if constexpr (std::is_signed_v<T>)
      return static_cast<T>(static_cast<Wide>(x) / static_cast<Wide>(nranks));
    else
      return static_cast<T>(static_cast<UWide>(x) / static_cast<UWide>(nranks));
  } else {
    (void)nranks;
    return x;
  }
}

}  // namespace topocoll::kernels
