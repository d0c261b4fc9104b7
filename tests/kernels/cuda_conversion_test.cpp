// The software conversions of kernels/narrow_float.h against the host implementations in
// CUDA's own headers (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h), which define the semantics the
// device code uses. Host code only: no device needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/narrow_float.h"

namespace topocoll::kernels {
namespace {

std::uint16_t cuda_half_bits(float f) {
  const __half h = __float2half_rn(f);
  std::uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
std::uint16_t cuda_bf16_bits(float f) {
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  std::uint16_t u;
  std::memcpy(&u, &b, 2);
  return u;
}

// Floats to check: random over all patterns, random within the narrow range, and specials.
std::vector<float> probe_floats() {
  std::vector<float> v;
  std::mt19937_64 rng(4242);
  for (int i = 0; i < (1 << 20); ++i) {
    std::uint32_t u = static_cast<std::uint32_t>(rng());
    if (i & 1) u = (u & 0x807FFFFFu) | ((100u + static_cast<std::uint32_t>(rng() % 56)) << 23);
    v.push_back(bits_float(u));
  }
  for (std::uint32_t u : {0u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u,
                          0xFFC00001u, 0x00000001u, 0x7F7FFFFFu, 0x477FF000u, 0x477FE000u,
                          0x43E00000u, 0x43E80000u, 0x43F00000u, 0x47600000u, 0x47700000u})
    v.push_back(bits_float(u));
  return v;
}

TEST(KernelsCudaConversion, HalfMatchesCudaHostConversion) {
  int bad = 0;
  for (float f : probe_floats()) {
    const std::uint16_t want = cuda_half_bits(f), got = float_to_half(f);
    const bool both_nan = (want & 0x7FFF) > 0x7C00 && (got & 0x7FFF) > 0x7C00;
    if (got != want && !both_nan && ++bad < 10)
      ADD_FAILURE() << std::hexfloat << f << ": 0x" << std::hex << got << " vs cuda 0x" << want;
  }
  EXPECT_EQ(bad, 0);
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const std::uint16_t hb = static_cast<std::uint16_t>(b);
    __half_raw raw;
    raw.x = hb;
    const __half h(raw);
    const float want = __half2float(h), got = half_to_float(hb);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << b;
    else EXPECT_EQ(float_bits(got), float_bits(want)) << b;
  }
}

TEST(KernelsCudaConversion, Bfloat16MatchesCudaHostConversion) {
  int bad = 0;
  for (float f : probe_floats()) {
    const std::uint16_t want = cuda_bf16_bits(f), got = float_to_bf16(f);
    const bool both_nan = (want & 0x7FFF) > 0x7F80 && (got & 0x7FFF) > 0x7F80;
    if (got != want && !both_nan && ++bad < 10)
      ADD_FAILURE() << std::hexfloat << f << ": 0x" << std::hex << got << " vs cuda 0x" << want;
  }
  EXPECT_EQ(bad, 0);
}

TEST(KernelsCudaConversion, Fp8MatchesCudaSatfiniteConversion) {
  for (auto [interp, name] : {std::pair{__NV_E4M3, "e4m3"}, std::pair{__NV_E5M2, "e5m2"}}) {
    int bad = 0;
    for (float f : probe_floats()) {
      const std::uint8_t want = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, interp);
      const std::uint8_t got = interp == __NV_E4M3 ? float_to_fp8_e4m3(f) : float_to_fp8_e5m2(f);
      if (got != want && ++bad < 10)
        ADD_FAILURE() << name << " " << std::hexfloat << f << " (0x" << std::hex << float_bits(f)
                      << "): 0x" << int(got) << " vs cuda 0x" << int(want);
    }
    EXPECT_EQ(bad, 0) << name;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const __half_raw hr = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), interp);
      const float want = half_to_float(hr.x);
      const float got = interp == __NV_E4M3 ? fp8_e4m3_to_float(static_cast<std::uint8_t>(b))
                                            : fp8_e5m2_to_float(static_cast<std::uint8_t>(b));
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << name << " " << b;
      else EXPECT_EQ(float_bits(got), float_bits(want)) << name << " " << b;
    }
  }
}

}  // namespace
}  // namespace topocoll::kernels
