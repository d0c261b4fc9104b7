// CPU reference reductions against the independent reference (tests/kernels/reference_numerics.h)
// for every type x op, several input counts, odd lengths and aliasing; plus the documented
// corner cases: integer wrap-around, NaN/inf/signed zero in max/min, Avg, fp8 saturation.
#include "kernels/reduce_cpu.h"

#include "kernels/avg_scalar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kernels/reference_numerics.h"

namespace topocoll::kernels {
namespace {

using test::load_bits;
using test::random_bits;
using test::same_result;
using test::store_bits;

// Element storage for one buffer: 16-byte aligned, sized in elements of a runtime type.
struct Buffer {
  explicit Buffer(DataType t, std::size_t n) : type(t), words((n * datatype_size(t) + 15) / 8 + 2) {}
  void* data() { return words.data(); }
  const void* data() const { return words.data(); }
  std::uint64_t get(std::size_t i) const { return load_bits(data(), i, type); }
  void set(std::size_t i, std::uint64_t b) { store_bits(data(), i, type, b); }
  DataType type;
  std::vector<std::uint64_t> words;
};

std::string describe(DataType t, ReduceOp op, int nsrc, std::size_t count) {
  return std::string(datatype_name(t)) + " " + std::string(reduce_op_name(op)) +
         " nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count);
}

std::vector<std::uint64_t> reference(DataType t, ReduceOp op, const std::vector<Buffer>& in,
                                     std::size_t count) {
  std::vector<std::uint64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t acc = in[0].get(i);
    for (std::size_t j = 1; j < in.size(); ++j) acc = test::ref_apply(t, op, acc, in[j].get(i));
    out[i] = acc;
  }
  return out;
}

// Compares every element; reports the first few differences.
void expect_elements(DataType t, const void* got, const std::vector<std::uint64_t>& want,
                     const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::uint64_t g = load_bits(got, i, t);
    if (!same_result(t, g, want[i]) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got 0x" << std::hex << g << " want 0x"
                    << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

class KernelsReduceCpu : public ::testing::TestWithParam<int> {
 protected:
  DataType type() const { return static_cast<DataType>(GetParam()); }
};

TEST_P(KernelsReduceCpu, EveryOpMatchesReference) {
  const DataType t = type();
  std::mt19937_64 rng(77 + GetParam());
  // 2053 and 5003 cross the implementation's internal block size unevenly.
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{2053}, std::size_t{5003}})
    for (int nsrc : {1, 2, 3, 5, 8}) {
      std::vector<Buffer> in;
      std::vector<const void*> ptrs;
      for (int j = 0; j < nsrc; ++j) {
        in.emplace_back(t, count);
        for (std::size_t i = 0; i < count; ++i) in.back().set(i, random_bits(t, rng));
      }
      for (auto& b : in) ptrs.push_back(b.data());
      for (int o = 0; o < kNumReduceOps; ++o) {
        const auto op = static_cast<ReduceOp>(o);
        const std::string what = describe(t, op, nsrc, count);
        const auto want = reference(t, op, in, count);
        Buffer out(t, count + 1);
        out.set(count, 0x5A5A5A5A5A5A5A5Aull);  // guard element just past the end
        reduce_cpu(t, op, out.data(), ptrs.data(), nsrc, count);
        expect_elements(t, out.data(), want, what);
        EXPECT_EQ(out.get(count), 0x5A5A5A5A5A5A5A5Aull & test::low_mask(t)) << what << " overran";

        if (op == ReduceOp::Avg) {
          for (int nranks : {1, nsrc, 3, 1000}) {
            Buffer fin = out;
            finalize_cpu(t, op, fin.data(), count, nranks);
            std::vector<std::uint64_t> want_avg(count);
            for (std::size_t i = 0; i < count; ++i)
              // Floating avg pre-multiplies instead (AvgPremultipliesLikeNccl).
              want_avg[i] = is_floating(t) ? out.get(i) : test::ref_divide(t, out.get(i), nranks);
            expect_elements(t, fin.data(), want_avg, what + " finalize nranks=" + std::to_string(nranks));
          }
        } else {
          Buffer fin = out;
          finalize_cpu(t, op, fin.data(), count, nsrc);
          EXPECT_EQ(fin.words, out.words) << what << ": finalize must be a no-op";
        }
      }
    }
}

TEST_P(KernelsReduceCpu, DestinationMayBeAnySource) {
  const DataType t = type();
  std::mt19937_64 rng(99 + GetParam());
  const std::size_t count = 4099;
  const int nsrc = 4;
  for (int alias = 0; alias < nsrc; ++alias)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      std::vector<Buffer> in;
      for (int j = 0; j < nsrc; ++j) {
        in.emplace_back(t, count);
        for (std::size_t i = 0; i < count; ++i) in.back().set(i, random_bits(t, rng));
      }
      const auto want = reference(t, op, in, count);
      std::vector<const void*> ptrs;
      for (auto& b : in) ptrs.push_back(b.data());
      reduce_cpu(t, op, in[alias].data(), ptrs.data(), nsrc, count);
      expect_elements(t, in[alias].data(), want,
                      describe(t, op, nsrc, count) + " dst=srcs[" + std::to_string(alias) + "]");
    }
}

TEST_P(KernelsReduceCpu, PremulMatchesReference) {
  const DataType t = type();
  std::mt19937_64 rng(555 + GetParam());
  const std::size_t count = 3001;
  Buffer src(t, count), dst(t, count);
  for (std::size_t i = 0; i < count; ++i) src.set(i, random_bits(t, rng));
  for (int trial = 0; trial < 4; ++trial) {
    const std::uint64_t scalar = random_bits(t, rng);
    std::vector<std::uint64_t> want(count);
    for (std::size_t i = 0; i < count; ++i)
      want[i] = test::ref_apply(t, ReduceOp::Prod, src.get(i), scalar);
    premul_cpu(t, dst.data(), src.data(), count, &scalar);
    expect_elements(t, dst.data(), want, std::string(datatype_name(t)) + " premul");
    Buffer inplace = src;
    premul_cpu(t, inplace.data(), inplace.data(), count, &scalar);
    expect_elements(t, inplace.data(), want, std::string(datatype_name(t)) + " premul in place");
  }
}

TEST_P(KernelsReduceCpu, ZeroCountIsANoOpEvenWithNullPointers) {
  EXPECT_NO_THROW(reduce_cpu(type(), ReduceOp::Sum, nullptr, nullptr, 2, 0));
  EXPECT_NO_THROW(finalize_cpu(type(), ReduceOp::Avg, nullptr, 0, 4));
  EXPECT_NO_THROW(premul_cpu(type(), nullptr, nullptr, 0, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Types, KernelsReduceCpu, ::testing::Range(0, kNumDataTypes),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(datatype_name(static_cast<DataType>(info.param)));
                         });

template <class T>
std::vector<T> reduce2(DataType t, ReduceOp op, std::vector<T> a, const std::vector<T>& b) {
  const void* srcs[2] = {a.data(), b.data()};
  reduce_cpu(t, op, a.data(), srcs, 2, a.size());
  return a;
}

TEST(KernelsReduceCpuCases, IntegersWrapAround) {
  EXPECT_EQ(reduce2<std::int8_t>(DataType::Int8, ReduceOp::Sum, {127, -128}, {1, -1}),
            (std::vector<std::int8_t>{-128, 127}));
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Uint8, ReduceOp::Sum, {255}, {1}),
            (std::vector<std::uint8_t>{0}));
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Uint8, ReduceOp::Prod, {255}, {255}),
            (std::vector<std::uint8_t>{1}));
  EXPECT_EQ(reduce2<std::int8_t>(DataType::Int8, ReduceOp::Prod, {-128}, {-1}),
            (std::vector<std::int8_t>{-128}));
  const auto imax = std::numeric_limits<std::int32_t>::max();
  EXPECT_EQ(reduce2<std::int32_t>(DataType::Int32, ReduceOp::Sum, {imax}, {1}),
            (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min()}));
  EXPECT_EQ(reduce2<std::int64_t>(DataType::Int64, ReduceOp::Prod, {std::int64_t{1} << 62}, {4}),
            (std::vector<std::int64_t>{0}));
  const auto umax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(reduce2<std::uint64_t>(DataType::Uint64, ReduceOp::Prod, {umax}, {umax}),
            (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(reduce2<std::int32_t>(DataType::Int32, ReduceOp::Max, {-5, 3}, {-6, 2}),
            (std::vector<std::int32_t>{-5, 3}));
  EXPECT_EQ(reduce2<std::uint32_t>(DataType::Uint32, ReduceOp::Min, {0xFFFFFFFFu}, {1u}),
            (std::vector<std::uint32_t>{1u}));
}

TEST(KernelsReduceCpuCases, FloatMaxMinIgnoreNaNAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const auto mx = reduce2<float>(DataType::Float32, ReduceOp::Max,
                                 {nan, 1.0f, nan, -0.0f, 0.0f, -inf, 3.0f},
                                 {1.0f, nan, nan, 0.0f, -0.0f, -7.0f, inf});
  EXPECT_EQ(mx[0], 1.0f);
  EXPECT_EQ(mx[1], 1.0f);
  EXPECT_TRUE(std::isnan(mx[2]));
  EXPECT_EQ(mx[3], 0.0f);
  EXPECT_FALSE(std::signbit(mx[3]));
  EXPECT_FALSE(std::signbit(mx[4]));
  EXPECT_EQ(mx[5], -7.0f);
  EXPECT_EQ(mx[6], inf);
  const auto mn = reduce2<float>(DataType::Float32, ReduceOp::Min, {nan, -0.0f, 0.0f, inf},
                                 {-2.0f, 0.0f, -0.0f, -inf});
  EXPECT_EQ(mn[0], -2.0f);
  EXPECT_TRUE(std::signbit(mn[1]));
  EXPECT_TRUE(std::signbit(mn[2]));
  EXPECT_EQ(mn[3], -inf);
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(reduce2<double>(DataType::Float64, ReduceOp::Min, {dnan}, {5.0})[0], 5.0);
  // Narrow types: NaN ignored too (half 0x7E00 = NaN, 0x3C00 = 1; fp8 e4m3 0x7F = NaN).
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Float16, ReduceOp::Max, {0x7E00}, {0x3C00})[0], 0x3C00);
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Bfloat16, ReduceOp::Min, {0x3F80}, {0x7FC0})[0], 0x3F80);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E4M3, ReduceOp::Max, {0x7F}, {0x38})[0], 0x38);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Max, {0x80}, {0x00})[0], 0x00);
  // Both NaN: the canonical NaN, as __hmax/__hmin return it (any NaN is equal to any NaN
  // in the sweeps, so the bits are checked here). fp8 Max/Min go through half and back
  // saturating, as NCCL's __nv_fp8_e5m2(__hmax(__half(x), __half(y))): e5m2 ±inf (0x7C,
  // 0xFC) become ±57344 (0x7B, 0xFB).
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Float16, ReduceOp::Max, {0xFE00}, {0x7E01})[0], 0x7FFF);
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Bfloat16, ReduceOp::Min, {0xFFC1}, {0x7FC0})[0], 0x7FFF);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E4M3, ReduceOp::Max, {0xFF}, {0xFF})[0], 0x7F);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Min, {0xFE}, {0x7D})[0], 0x7F);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Max, {0x00}, {0x7C})[0], 0x7B);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Min, {0xFC}, {0x3C})[0], 0xFB);
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Float16, ReduceOp::Max, {0x0000}, {0x7C00})[0], 0x7C00);
}

TEST(KernelsReduceCpuCases, InfinitiesAndOverflow) {
  const float inf = INFINITY;
  EXPECT_TRUE(std::isnan(reduce2<float>(DataType::Float32, ReduceOp::Sum, {inf}, {-inf})[0]));
  EXPECT_EQ(reduce2<float>(DataType::Float32, ReduceOp::Sum, {3e38f}, {3e38f})[0], inf);
  // float16: 65504 + 65504 overflows to inf; fp8 saturates to the largest finite value.
  EXPECT_EQ(reduce2<std::uint16_t>(DataType::Float16, ReduceOp::Sum, {0x7BFF}, {0x7BFF})[0], 0x7C00);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E4M3, ReduceOp::Sum, {0x7E}, {0x7E})[0], 0x7E);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Prod, {0x7B}, {0x7B})[0], 0x7B);
  EXPECT_EQ(reduce2<std::uint8_t>(DataType::Fp8E5M2, ReduceOp::Sum, {0x7C}, {0x3C})[0], 0x7B);
  // Each binary step rounds to the narrow type: bf16 256 + 1 + 1 = 256 (1 is below half an ulp).
  std::vector<std::uint16_t> a{0x4380}, b{0x3F80}, c{0x3F80};
  const void* srcs[3] = {a.data(), b.data(), c.data()};
  reduce_cpu(DataType::Bfloat16, ReduceOp::Sum, a.data(), srcs, 3, 1);
  EXPECT_EQ(a[0], 0x4380);
}

TEST(KernelsReduceCpuCases, AvgOnIntegersDividesOnceAtTheEnd) {
  std::vector<std::int32_t> x{-7, 7, std::numeric_limits<std::int32_t>::min()};
  finalize_cpu(DataType::Int32, ReduceOp::Avg, x.data(), x.size(), 2);
  EXPECT_EQ(x, (std::vector<std::int32_t>{-3, 3, -1073741824}));
  std::vector<std::uint8_t> u{255};
  finalize_cpu(DataType::Uint8, ReduceOp::Avg, u.data(), 1, 2);
  EXPECT_EQ(u[0], 127);
  // Floating avg was pre-multiplied: nothing left to do at the end.
  std::vector<float> f{1.0f, 10.0f};
  finalize_cpu(DataType::Float32, ReduceOp::Avg, f.data(), 2, 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, 10.0f}));
  std::vector<std::uint16_t> h{0x4200};  // float16 3.0
  finalize_cpu(DataType::Float16, ReduceOp::Avg, h.data(), 1, 2);
  EXPECT_EQ(h[0], 0x4200);
  std::vector<float> unchanged{5.0f};
  finalize_cpu(DataType::Float32, ReduceOp::Sum, unchanged.data(), 1, 8);
  EXPECT_EQ(unchanged[0], 5.0f);
}

// NCCL 2.28's ncclAvg on floating types (src/enqueue.cc, hostToDevRedOp): every input
// times s = round_T(float(1.0/nranks)) (double: 1.0/nranks), each product rounded to T,
// then a Sum. Reference: values in double (exact for every narrow product and sum), rounded
// to the type after every step, ranks in order; inputs at the top of each type's range,
// where summing first overflows (float16, bfloat16, float32 to inf; fp8 saturates).
TEST(KernelsReduceCpuCases, AvgPremultipliesLikeNccl) {
  const DataType types[] = {DataType::Float16, DataType::Bfloat16, DataType::Fp8E4M3,
                            DataType::Fp8E5M2, DataType::Float32, DataType::Float64};
  for (DataType t : types)
    for (int nranks : {2, 3, 5, 8, 16}) {
      // Largest finite, its half, 1.0, -largest, the smallest subnormal: one element each.
      const std::uint64_t max_bits = t == DataType::Float16    ? 0x7BFF
                                   : t == DataType::Bfloat16   ? 0x7F7F
                                   : t == DataType::Fp8E4M3    ? 0x7E
                                   : t == DataType::Fp8E5M2    ? 0x7B
                                   : t == DataType::Float32    ? 0x7F7FFFFFull
                                                               : 0x7FEFFFFFFFFFFFFFull;
      const double top = test::float_value(t, max_bits);
      const std::vector<double> values = {top, top / 2, 1.0, -top, 0.0};
      const std::size_t n = values.size();
      std::vector<Buffer> in;
      for (int r = 0; r < nranks; ++r) {
        in.emplace_back(t, n);
        for (std::size_t i = 0; i < n; ++i) in.back().set(i, test::float_bits_of(t, values[i]));
        in.back().set(n - 1, 1);  // smallest subnormal, on every rank
      }
      // The reference.
      const double s = t == DataType::Float64 ? 1.0 / nranks
                                              : test::float_value(t, test::float_bits_of(t, float(1.0 / nranks)));
      std::vector<std::uint64_t> want(n);
      for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t acc = 0;
        for (int r = 0; r < nranks; ++r) {
          const double x = test::float_value(t, in[std::size_t(r)].get(i));
          // x * s is exact in double for every type but float64, whose own product it is.
          const std::uint64_t scaled = test::float_bits_of(t, x * s);
          acc = r == 0 ? scaled : test::ref_apply(t, ReduceOp::Sum, acc, scaled);
        }
        want[i] = acc;
      }
      // The implementation: pre-multiply each rank's input, reduce with Avg in rank order,
      // finalize (a no-op).
      Buffer acc(t, n), scaled(t, n);
      avg_premul_cpu(t, acc.data(), in[0].data(), n, nranks);
      for (int r = 1; r < nranks; ++r) {
        avg_premul_cpu(t, scaled.data(), in[std::size_t(r)].data(), n, nranks);
        const void* srcs[2] = {acc.data(), scaled.data()};
        reduce_cpu(t, ReduceOp::Avg, acc.data(), srcs, 2, n);
      }
      finalize_cpu(t, ReduceOp::Avg, acc.data(), n, nranks);
      const std::string what = std::string(datatype_name(t)) + " nranks=" + std::to_string(nranks);
      expect_elements(t, acc.data(), want, what);
      // The average of equal inputs at the top of the range stays finite and near them
      // (summing first would give inf, or a saturated fp8 sum divided by nranks). With a
      // power-of-two rank count s is exact; otherwise s > 1/nranks may overflow as in NCCL.
      if ((nranks & (nranks - 1)) != 0) continue;
      const double avg_top = test::float_value(t, acc.get(0));
      EXPECT_TRUE(std::isfinite(avg_top)) << what;
      // Sums of a few mantissa bits stall (fp8 e5m2, 16 ranks: 32768), yet stay far above
      // the saturated sum over nranks (57344 / 16) that summing first gives.
      EXPECT_GE(avg_top / top, 0.5) << what << " average of " << top << " is " << avg_top;
      EXPECT_LE(avg_top / top, 1.0) << what << " average of " << top << " is " << avg_top;
    }
  // The case: 8 ranks of 100 in fp8 e4m3 no longer give the saturated 448/8 = 56.
  std::vector<Buffer> hundred;
  Buffer acc(DataType::Fp8E4M3, 1), scaled(DataType::Fp8E4M3, 1);
  Buffer one(DataType::Fp8E4M3, 1);
  one.set(0, test::float_bits_of(DataType::Fp8E4M3, 100.0));
  avg_premul_cpu(DataType::Fp8E4M3, acc.data(), one.data(), 1, 8);
  for (int r = 1; r < 8; ++r) {
    avg_premul_cpu(DataType::Fp8E4M3, scaled.data(), one.data(), 1, 8);
    const void* srcs[2] = {acc.data(), scaled.data()};
    reduce_cpu(DataType::Fp8E4M3, ReduceOp::Avg, acc.data(), srcs, 2, 1);
  }
  EXPECT_GE(test::float_value(DataType::Fp8E4M3, acc.get(0)), 88.0);
}

TEST(KernelsReduceCpuCases, AvgScalarIsNcclsRoundedReciprocal) {
  // float16 1/3 = 0x3555, bfloat16 1/3 = 0x3EAB, fp8 e4m3 1/8 = 0x20, e5m2 1/3 = 0x35 (0.3125).
  EXPECT_EQ(avg_scalar_bits(DataType::Float16, 3), 0x3555u);
  EXPECT_EQ(avg_scalar_bits(DataType::Bfloat16, 3), 0x3EABu);
  EXPECT_EQ(avg_scalar_bits(DataType::Fp8E4M3, 8), 0x20u);
  EXPECT_EQ(avg_scalar_bits(DataType::Fp8E5M2, 3), 0x35u);
  EXPECT_EQ(avg_scalar_bits(DataType::Int32, 3), 0u);
  std::vector<std::int32_t> ints{7, -7};
  std::vector<std::int32_t> copy(2);
  avg_premul_cpu(DataType::Int32, copy.data(), ints.data(), 2, 4);  // integers: a copy
  EXPECT_EQ(copy, ints);
}

TEST(KernelsReduceCpuCases, BadArgumentsAreRejectedWithTheirName) {
  std::vector<float> a(4), b(4);
  const void* srcs[9] = {a.data(), b.data(), a.data(), a.data(), a.data(),
                         a.data(), a.data(), a.data(), a.data()};
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, ReduceOp::Sum, a.data(), srcs, 0, 4); })
                .find("nsrc"), std::string::npos);
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, ReduceOp::Sum, a.data(), srcs, 9, 4); })
                .find("nsrc"), std::string::npos);
  EXPECT_NE(message([&] { reduce_cpu(static_cast<DataType>(12), ReduceOp::Sum, a.data(), srcs, 2, 4); })
                .find("DataType"), std::string::npos);
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, static_cast<ReduceOp>(5), a.data(), srcs, 2, 4); })
                .find("ReduceOp"), std::string::npos);
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, ReduceOp::Sum, nullptr, srcs, 2, 4); })
                .find("dst"), std::string::npos);
  const void* with_null[2] = {a.data(), nullptr};
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, ReduceOp::Sum, a.data(), with_null, 2, 4); })
                .find("srcs[1]"), std::string::npos);
  const void* misaligned[2] = {a.data(), reinterpret_cast<const char*>(b.data()) + 1};
  EXPECT_NE(message([&] { reduce_cpu(DataType::Float32, ReduceOp::Sum, a.data(), misaligned, 2, 2); })
                .find("aligned"), std::string::npos);
  EXPECT_NE(message([&] { finalize_cpu(DataType::Float32, ReduceOp::Avg, a.data(), 4, 0); })
                .find("nranks"), std::string::npos);
  EXPECT_NE(message([&] { premul_cpu(DataType::Float32, a.data(), b.data(), 4, nullptr); })
                .find("scalar"), std::string::npos);
}

}  // namespace
}  // namespace topocoll::kernels
