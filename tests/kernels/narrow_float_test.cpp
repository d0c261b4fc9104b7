// Software narrow-float conversions against the independent reference, for every bit pattern
// of the narrow formats and for midpoints, their neighbours and random floats.
#include "kernels/narrow_float.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/kernels/reference_numerics.h"

namespace topocoll::kernels {
namespace {

using test::NarrowFormat;

struct Converter {
  const char* name;
  const NarrowFormat* format;
  float (*to_float)(std::uint32_t);
  std::uint32_t (*from_float)(float);
};

const Converter kConverters[] = {
    {"float16", &test::kHalf, [](std::uint32_t b) { return half_to_float(static_cast<std::uint16_t>(b)); },
     [](float f) -> std::uint32_t { return float_to_half(f); }},
    {"bfloat16", &test::kBf16, [](std::uint32_t b) { return bf16_to_float(static_cast<std::uint16_t>(b)); },
     [](float f) -> std::uint32_t { return float_to_bf16(f); }},
    {"fp8_e4m3", &test::kE4M3, [](std::uint32_t b) { return fp8_e4m3_to_float(static_cast<std::uint8_t>(b)); },
     [](float f) -> std::uint32_t { return float_to_fp8_e4m3(f); }},
    {"fp8_e5m2", &test::kE5M2, [](std::uint32_t b) { return fp8_e5m2_to_float(static_cast<std::uint8_t>(b)); },
     [](float f) -> std::uint32_t { return float_to_fp8_e5m2(f); }},
};

std::uint32_t patterns(const NarrowFormat& f) { return 1u << (1 + f.exp_bits + f.man_bits); }

// Checks one float against the reference; returns false (and records) on mismatch.
bool encode_matches(const Converter& c, float x) {
  const std::uint32_t got = c.from_float(x);
  const std::uint32_t want = test::ref_encode(*c.format, static_cast<double>(x));
  if (got == want) return true;
  ADD_FAILURE() << c.name << ": float " << std::hexfloat << x << " (bits 0x" << std::hex
                << float_bits(x) << ") -> 0x" << got << ", reference 0x" << want;
  return false;
}

class KernelsNarrowFloat : public ::testing::TestWithParam<int> {};

TEST_P(KernelsNarrowFloat, DecodesEveryPattern) {
  const Converter& c = kConverters[GetParam()];
  int failures = 0;
  for (std::uint32_t b = 0; b < patterns(*c.format) && failures < 10; ++b) {
    const double want = test::ref_decode(*c.format, b);
    const float got = c.to_float(b);
    if (std::isnan(want)) {
      if (!std::isnan(got)) ++failures, ADD_FAILURE() << c.name << " 0x" << std::hex << b;
    } else if (static_cast<double>(got) != want || std::signbit(got) != std::signbit(want)) {
      ++failures;
      ADD_FAILURE() << c.name << " 0x" << std::hex << b << " -> " << got << ", want " << want;
    }
  }
}

TEST_P(KernelsNarrowFloat, RoundTripsEveryNonNaNPattern) {
  const Converter& c = kConverters[GetParam()];
  int failures = 0;
  for (std::uint32_t b = 0; b < patterns(*c.format) && failures < 10; ++b) {
    if (std::isnan(test::ref_decode(*c.format, b))) {
      EXPECT_EQ(c.from_float(c.to_float(b)), c.format->nan) << std::hex << b;
      continue;
    }
    std::uint32_t want = b;
    if (c.format->saturate && std::isinf(test::ref_decode(*c.format, b)))
      want = c.format->max_finite | (b & ~0x7Fu);  // fp8 satfinite: inf -> max finite
    const std::uint32_t back = c.from_float(c.to_float(b));
    if (back != want) ++failures, ADD_FAILURE() << c.name << " 0x" << std::hex << b << " -> 0x" << back;
  }
}

TEST_P(KernelsNarrowFloat, RoundsMidpointsAndNeighboursToNearestEven) {
  const Converter& c = kConverters[GetParam()];
  const NarrowFormat& f = *c.format;
  int failures = 0;
  for (std::uint32_t lo = 0; lo < f.max_finite && failures < 10; ++lo) {
    const double mid = (test::ref_decode(f, lo) + test::ref_decode(f, lo + 1)) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "midpoint not representable in float";
    for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY),
                    static_cast<float>(test::ref_decode(f, lo))})
      for (float s : {x, -x})
        if (!encode_matches(c, s)) ++failures;
  }
  // Around the top: max, the overflow midpoint and beyond, infinities.
  const double max = test::ref_decode(f, f.max_finite);
  const float top_mid = static_cast<float>(max + std::ldexp(1.0, std::ilogb(max) - f.man_bits - 1));
  for (float x : {static_cast<float>(max), top_mid, std::nextafter(top_mid, 0.0f),
                  std::nextafter(top_mid, INFINITY), 2 * static_cast<float>(max), 1e30f,
                  std::numeric_limits<float>::max(), INFINITY})
    for (float s : {x, -x}) encode_matches(c, s);
}

TEST_P(KernelsNarrowFloat, RoundsRandomFloats) {
  const Converter& c = kConverters[GetParam()];
  std::mt19937_64 rng(1234 + GetParam());
  int failures = 0;
  for (int i = 0; i < (1 << 20) && failures < 10; ++i) {
    // Half the draws over all floats, half within +-2^±20 where the narrow values live.
    std::uint32_t u = static_cast<std::uint32_t>(rng());
    if (i & 1) u = (u & 0x807FFFFFu) | ((107u + static_cast<std::uint32_t>(rng() % 41)) << 23);
    if (!encode_matches(c, bits_float(u))) ++failures;
  }
}

TEST_P(KernelsNarrowFloat, SpecialValues) {
  const Converter& c = kConverters[GetParam()];
  const NarrowFormat& f = *c.format;
  const std::uint32_t sign = 1u << (f.exp_bits + f.man_bits);
  EXPECT_EQ(c.from_float(0.0f), 0u);
  EXPECT_EQ(c.from_float(-0.0f), sign);
  EXPECT_EQ(c.from_float(std::numeric_limits<float>::denorm_min()), 0u);
  EXPECT_EQ(c.from_float(-std::numeric_limits<float>::denorm_min()), sign);
  EXPECT_EQ(c.from_float(std::numeric_limits<float>::quiet_NaN()), f.nan);
  EXPECT_EQ(c.from_float(-std::numeric_limits<float>::quiet_NaN()), f.nan);
  EXPECT_EQ(c.from_float(bits_float(0x7F800001u)), f.nan);  // signalling NaN
  const std::uint32_t overflow = f.saturate ? f.max_finite : f.inf;
  EXPECT_EQ(c.from_float(INFINITY), overflow);
  EXPECT_EQ(c.from_float(-INFINITY), overflow | sign);
  EXPECT_EQ(c.from_float(1.0f), test::ref_encode(f, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Formats, KernelsNarrowFloat, ::testing::Range(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kConverters[info.param].name);
                         });

TEST(KernelsNarrowFloatValues, KnownEncodings) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00u);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFFu);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00u);  // the tie above max goes to inf
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001u);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000u);  // tie to even: zero
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80u);
  EXPECT_EQ(float_to_bf16(bits_float(0x3F808000u)), 0x3F80u);  // tie to even, down
  EXPECT_EQ(float_to_bf16(bits_float(0x3F818000u)), 0x3F82u);  // tie to even, up
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7Eu);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7Eu);   // tie at max + ulp/2 rounds to even (448)
  EXPECT_EQ(float_to_fp8_e4m3(1e6f), 0x7Eu);     // saturates
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-9f), 0x01u);  // smallest subnormal
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7Bu);
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7Bu);  // would round to inf: saturates
  EXPECT_EQ(float_to_fp8_e5m2(0x1p-16f), 0x01u);
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
  EXPECT_EQ(fp8_e5m2_to_float(0x7C), INFINITY);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(bf16_to_float(0x0001), 0x1p-133f);
}

}  // namespace
}  // namespace topocoll::kernels
