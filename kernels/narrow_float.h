// Bit-exact software conversions between float and the narrow floating formats (IEEE binary16,
// bfloat16, OCP fp8 E4M3 and E5M2), branch-free integer code plus exactly known float steps;
// used by the CPU reference and usable in
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
// Branch-free so loops over it vectorise: normal values only need the exponent rebiased (an
// integer add); subnormals are mantissa * 2^(1-bias-M), exact in float. No float subnormal
// is ever an operand (those are slow on x86).
template <int E, int M, bool HasInf>
TOPOCOLL_HD float narrow_to_float(std::uint32_t bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr std::uint32_t magnitude_mask = (1u << (E + M)) - 1;
  constexpr std::uint32_t exp_all = ((1u << E) - 1) << M;
  const std::uint32_t sign = ((bits >> (E + M)) & 1u) << 31;
  const std::uint32_t em = bits & magnitude_mask;
  const std::uint32_t normal = (em << (23 - M)) + (static_cast<std::uint32_t>(127 - bias) << 23);
  const float subnormal_scale = bits_float(static_cast<std::uint32_t>(128 - bias - M) << 23);
  const std::uint32_t subnormal = float_bits(static_cast<float>(em) * subnormal_scale);
  std::uint32_t out = em < (1u << M) ? subnormal : normal;
  if constexpr (HasInf) {
    // inf, or a quiet NaN keeping the payload
    const std::uint32_t special = 0x7F800000u | (em << (23 - M)) | (em > exp_all ? 0x00400000u : 0u);
    out = em >= exp_all ? special : out;
  } else {
    out = em == magnitude_mask ? 0x7FC00000u : out;
  }
  return bits_float(out | sign);
}

// Rounds a float to nearest-even in a narrow format (E, M as above) whose subnormals lie in the
// normal range of float (true for float16 and both fp8 formats; bfloat16 has its own below).
// Overflow gives Overflow (inf, or max finite for SatFinite); NaN gives the canonical NaN.
template <int E, int M, std::uint32_t MaxFinite, std::uint32_t Overflow, std::uint32_t NaN>
TOPOCOLL_HD std::uint32_t float_to_narrow(float f) {
  constexpr int bias = (1 << (E - 1)) - 1;
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 31) << (E + M);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  // Both paths are computed and one selected, so loops over this vectorise.
  // Below the smallest normal 2^(1-bias): add a magic number whose float ulp is the smallest
  // subnormal, so the float adder rounds (to nearest even); the low bits are the code.
  constexpr std::uint32_t magic = static_cast<std::uint32_t>(128 - bias + 23 - M) << 23;
  const float tiny = bits_float(a < (static_cast<std::uint32_t>(128 - bias) << 23) ? a : 0u);
  const std::uint32_t sub = float_bits(tiny + bits_float(magic)) - magic;
  // Normal: rebias the exponent and round the dropped 23-M bits to nearest even; a carry out of
  // the mantissa correctly bumps the exponent (up to overflow, caught below).
  const std::uint32_t odd = (a >> (23 - M)) & 1u;
  const std::uint32_t normal =
      (a - (static_cast<std::uint32_t>(127 - bias) << 23) + ((1u << (22 - M)) - 1u) + odd) >>
      (23 - M);
  std::uint32_t r = a < (static_cast<std::uint32_t>(128 - bias) << 23) ? sub : normal;
  r = r > MaxFinite ? Overflow : r;
  return a > 0x7F800000u ? NaN : r | sign;
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
