// Bit-exact software conversions between float and the narrow floating formats (IEEE binary16,
// bfloat16, OCP fp8 E4M3 and E5M2). Pure integer code: used by the CPU reference and usable in
// device code. Semantics follow CUDA's conversions so CPU and GPU results agree bitwise:
//   - float -> narrow rounds to nearest, ties to even (__float2half_rn, __float2bfloat16_rn).
//   - float16/bfloat16 overflow to +-inf.
//   - fp8 uses __NV_SATFINITE, as the __nv_fp8_e4m3/__nv_fp8_e5m2 constructors NCCL uses do:
//     finite overflow and +-inf become +-max finite (448 for E4M3, 57344 for E5M2).
//   - NaN becomes the canonical NaN of the target: 0x7FFF (float16, bfloat16), 0x7F (fp8).
//   - narrow -> float is exact; NaN payloads are kept (quiet bit set).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TOPOCOLL_HD __host__ __device__ __forceinline__
#else
#define TOPOCOLL_HD inline
#endif

namespace topocoll::kernels {

TOPOCOLL_HD std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
TOPOCOLL_HD float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Decodes a narrow float with E exponent bits and M mantissa bits (bias 2^(E-1)-1).
// HasInf: the all-ones exponent means inf/NaN (IEEE style). Otherwise only the all-ones
// pattern (E4M3's S.1111.111) is NaN and the top exponent holds finite values.
template <int E, int M, bool HasInf>
TOPOCOLL_HD float narrow_to_float(std::uint32_t bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr std::uint32_t exp_max = (1u << E) - 1;
  const std::uint32_t sign = (bits >> (E + M)) & 1u;
  const std::uint32_t exp = (bits >> M) & exp_max;
  const std::uint32_t man = bits & ((1u << M) - 1);
  std::uint32_t out;
  if (HasInf && exp == exp_max) {
    out = 0x7F800000u | (man ? (0x00400000u | (man << (23 - M))) : 0u);  // inf or quiet NaN
  } else if (!HasInf && exp == exp_max && man == (1u << M) - 1) {
    out = 0x7FC00000u;
  } else if (exp == 0) {
    // Subnormal (or zero): man * 2^(1-bias-M) is exact in float for every format here.
    const float scale = bits_float(static_cast<std::uint32_t>(127 + 1 - bias - M) << 23);
    out = float_bits(static_cast<float>(man) * scale);
  } else {
    out = ((exp + 127u - bias) << 23) | (man << (23 - M));
  }
  return bits_float(out | (sign << 31));
}

// Rounds a float to nearest-even in a narrow format (E, M as above) whose subnormals lie in the
// normal range of float (true for float16 and both fp8 formats; bfloat16 has its own below).
// Overflow gives inf_bits (unsaturated) or max_finite (SatFinite).
template <int E, int M, std::uint32_t MaxFinite, std::uint32_t Overflow, std::uint32_t NaN>
TOPOCOLL_HD std::uint32_t float_to_narrow(float f) {
  constexpr int bias = (1 << (E - 1)) - 1;
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 31) << (E + M);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return NaN;
  const int e = static_cast<int>(a >> 23) - 127;
  // Below half the smallest subnormal (2^(-bias-M)); the exact half ties to even, i.e. zero.
  if (e < -bias - M) return sign;
  const std::uint32_t mant = (a & 0x007FFFFFu) | 0x00800000u;
  int shift = 23 - M;
  if (e < 1 - bias) shift += (1 - bias) - e;  // target subnormal: drop more bits (shift <= 24)
  std::uint32_t q = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // A carry out of the mantissa bumps the exponent field, which is the correct result.
  std::uint32_t r = e >= 1 - bias ? (static_cast<std::uint32_t>(e + bias - 1) << M) + q : q;
  if (r > MaxFinite) r = Overflow;
  return r | sign;
}

TOPOCOLL_HD float half_to_float(std::uint16_t h) { return narrow_to_float<5, 10, true>(h); }
TOPOCOLL_HD std::uint16_t float_to_half(float f) {
  return static_cast<std::uint16_t>(float_to_narrow<5, 10, 0x7BFFu, 0x7C00u, 0x7FFFu>(f));
}

TOPOCOLL_HD float bf16_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}
TOPOCOLL_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
  // Round to nearest even on the low 16 bits; a carry into the exponent (and up to inf) is right.
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TOPOCOLL_HD float fp8_e4m3_to_float(std::uint8_t b) { return narrow_to_float<4, 3, false>(b); }
TOPOCOLL_HD std::uint8_t float_to_fp8_e4m3(float f) {
  return static_cast<std::uint8_t>(float_to_narrow<4, 3, 0x7Eu, 0x7Eu, 0x7Fu>(f));
}

TOPOCOLL_HD float fp8_e5m2_to_float(std::uint8_t b) { return narrow_to_float<5, 2, true>(b); }
TOPOCOLL_HD std::uint8_t float_to_fp8_e5m2(float f) {
  return static_cast<std::uint8_t>(float_to_narrow<5, 2, 0x7Bu, 0x7Bu, 0x7Fu>(f));
}

}  // namespace topocoll::kernels
