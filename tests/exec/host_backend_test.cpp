// The host backend with real data on threads: every generator, every datatype and op,
// P = 1..33, uneven counts, in and out of place. Results must equal the exact reference
// (random data: within rounding of it, max exactly) and be bitwise identical across ranks
// where the schedule claims it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "exec/collective_check.h"
#include "tests/exec/generator_list.h"
#include "tests/exec/thread_group.h"

namespace topocoll::exec::testing {
namespace {

using kernels::kNumDataTypes;
using kernels::kNumReduceOps;

class HostBackendGenerator : public ::testing::TestWithParam<GeneratorEntry> {};

// Element i of `bytes` as a number (the random data's reference is in double).
double load_element(DataType t, const unsigned char* bytes, std::size_t i) {
  const unsigned char* p = bytes + i * kernels::datatype_size(t);
  auto as = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case DataType::Int8: return as(int8_t{});
    case DataType::Uint8: return as(uint8_t{});
    case DataType::Int32: return as(int32_t{});
    case DataType::Uint32: return as(uint32_t{});
    case DataType::Int64: return double(as(int64_t{}));
    case DataType::Uint64: return double(as(uint64_t{}));
    case DataType::Float16: return kernels::half_to_float(as(uint16_t{}));
    case DataType::Bfloat16: return kernels::bf16_to_float(as(uint16_t{}));
    case DataType::Fp8E4M3: return kernels::fp8_e4m3_to_float(as(uint8_t{}));
    case DataType::Fp8E5M2: return kernels::fp8_e5m2_to_float(as(uint8_t{}));
    case DataType::Float32: return as(float{});
    case DataType::Float64: return as(double{});
  }
  return 0;
}

// Unit roundoff of a floating type: each rounding errs by at most this times the value.
double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::Float16: return std::ldexp(1.0, -11);
    case DataType::Bfloat16: return std::ldexp(1.0, -8);
    case DataType::Fp8E4M3: return std::ldexp(1.0, -4);
    case DataType::Fp8E5M2: return std::ldexp(1.0, -3);
    case DataType::Float32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
  }
}

// Random data reduced in a schedule's own order: max exactly (it picks an input), sum and
// avg within the bound of P roundings of the terms' magnitudes (Higham's recursive sum, with
// one rounding more for avg's pre-multiplication). A wrong block or a term missing or added
// twice is off by a term's size, far outside it for the wider types; fp8's bound is a term's
// size itself, so fp8 is checked exactly only under max.
void check_random_reduction(const CollectiveCase& c, int r, const std::vector<std::vector<unsigned char>>& inputs,
                            const std::vector<unsigned char>& output) {
  const bool fp8 = c.dtype == DataType::Fp8E4M3 || c.dtype == DataType::Fp8E5M2;
  if (fp8 && c.op != ReduceOp::Max) return;
  const int64_t first = c.collective == Collective::ReduceScatter ? int64_t(r) * c.count : 0;
  const double u = unit_roundoff(c.dtype);
  for (int64_t i = 0; i < c.count; ++i) {
    double exact = 0, magnitude = 0, largest = -HUGE_VAL;
    for (int k = 0; k < c.nranks; ++k) {
      const double x = load_element(c.dtype, inputs[std::size_t(k)].data(), std::size_t(first + i));
      const double term = c.op == ReduceOp::Avg ? x / c.nranks : x;
      exact += term;
      magnitude += std::fabs(term);
      largest = std::max(largest, x);
    }
    const double got = load_element(c.dtype, output.data(), std::size_t(i));
    if (c.op == ReduceOp::Max) {
      ASSERT_EQ(got, largest) << "rank " << r << " element " << i;
    } else {
      const double bound = (c.nranks + 2) * u * magnitude + 1e-300;
      ASSERT_LE(std::fabs(got - exact), bound) << "rank " << r << " element " << i << ": " << got << " for " << exact;
    }
  }
}

// Runs one case and checks it (a failure recorded on a mismatch); false when the registry
// refuses the shape and nothing ran.
bool run_and_check(const GeneratorEntry& g, CollectiveCase c) {
  c.collective = g.collective;
  SCOPED_TRACE(g.name + " " + c.describe());
  // Only a shape the registry refuses (sched::refusal) may be skipped, and the generator must
  // refuse it with that reason; everything else must build.
  const std::optional<sched::Schedule> built = g.make_unless_refused(c.nranks, c.count);
  if (!built) return false;
  const sched::Schedule& s = *built;
  EXPECT_EQ(s.input_count, c.input_elems());
  EXPECT_EQ(s.output_count, c.output_elems());
  std::vector<std::vector<unsigned char>> inputs(c.nranks);
  for (int r = 0; r < c.nranks; ++r) inputs[r] = c.input(r);
  const auto outputs = run_on_threads(c, s, inputs);
  const bool reduces = c.collective == Collective::AllReduce || c.collective == Collective::ReduceScatter;
  for (int r = 0; r < c.nranks; ++r) {
    EXPECT_EQ(outputs[r].size(), std::size_t(c.output_elems()) * c.elem()) << "rank " << r;
    if (c.data == CheckData::Exact || !reduces) {
      const auto want = c.reference(r, inputs);
      EXPECT_EQ(outputs[r].size(), want.size());
      if (outputs[r] != want && outputs[r].size() == want.size()) {
        std::size_t i = 0;
        while (outputs[r][i] == want[i]) ++i;
        ADD_FAILURE() << "rank " << r << " differs from the reference at byte " << i << " (element "
                      << i / c.elem() << ")";
      }
    } else {
      check_random_reduction(c, r, inputs, outputs[r]);
    }
    if (c.collective == Collective::AllReduce && s.claims_bitwise_identical) {
      EXPECT_TRUE(outputs[r] == outputs[0]) << "rank " << r << " differs from rank 0 bitwise";
    }
  }
  return true;
}

bool in_place_supported(Collective c) { return c != Collective::AllToAll; }

TEST_P(HostBackendGenerator, EveryTypeAndOpOnFewRankCounts) {
  const auto& g = GetParam();
  int ran = 0;
  for (int p : {1, 2, 3, 5, 8})
    for (int t = 0; t < kNumDataTypes; ++t)
      for (int o = 0; o < kNumReduceOps; ++o)
        for (bool in_place : {false, true}) {
          if (in_place && !in_place_supported(g.collective)) continue;
          CollectiveCase c;
          c.dtype = DataType(t);
          c.op = ReduceOp(o);
          c.nranks = p;
          c.count = 3 * p + 2 + t;  // uneven: not a multiple of P
          c.in_place = in_place;
          ran += run_and_check(g, c);
          if (HasFailure()) return;
        }
  EXPECT_GT(ran, 0) << "the registry refused every shape";
}

TEST_P(HostBackendGenerator, EveryRankCountUpTo33) {
  const auto& g = GetParam();
  int ran = 0;
  for (int p = 1; p <= 33; ++p) {
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(p - 1), int64_t(7 * p + 5)}) {
      for (bool in_place : {false, true}) {
        if (in_place && !in_place_supported(g.collective)) continue;
        CollectiveCase c;
        c.dtype = (p % 2) ? DataType::Float32 : DataType::Bfloat16;
        c.op = (p % 3 == 0) ? ReduceOp::Avg : ReduceOp::Sum;
        c.nranks = p;
        c.count = count;
        c.in_place = in_place;
        ran += run_and_check(g, c);
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GT(ran, 0) << "the registry refused every shape";
}

TEST_P(HostBackendGenerator, RandomDataWithinRoundingOfTheReferenceAndBitwiseIdenticalWhereClaimed) {
  const auto& g = GetParam();
  int ran = 0;
  for (int p : {2, 3, 4, 6, 7, 13, 16, 33})
    for (DataType t : {DataType::Float32, DataType::Float16, DataType::Bfloat16,
                       DataType::Float64, DataType::Fp8E4M3})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        CollectiveCase c;
        c.dtype = t;
        c.op = op;
        c.nranks = p;
        c.count = 1000 + p;
        c.data = CheckData::Random;
        c.seed = uint64_t(p) * 31 + uint64_t(t);
        ran += run_and_check(g, c);
        if (HasFailure()) return;
      }
  EXPECT_GT(ran, 0) << "the registry refused every shape";
}

// Two NaNs meeting keep one operand's payload (x86 the first; topocoll's min/max the first
// NaN), so a schedule claiming identical bits must reduce every element with its operands
// in one order on every rank, not only in one tree. Every rank's NaNs carry other payloads.
TEST_P(HostBackendGenerator, NansOfDifferentPayloadsLeaveEveryRankTheSameBits) {
  const auto& g = GetParam();
  if (g.collective != Collective::AllReduce) return;
  for (int p : {2, 3, 4, 5, 8})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min}) {
      CollectiveCase c;
      c.op = op;
      c.nranks = p;
      c.count = 2 * p + 3;
      SCOPED_TRACE(g.name + " " + c.describe());
      const std::optional<sched::Schedule> s = g.make_unless_refused(c.nranks, c.count);
      if (!s || !s->claims_bitwise_identical) continue;
      std::vector<std::vector<unsigned char>> inputs(static_cast<size_t>(p));
      for (int r = 0; r < p; ++r) {
        inputs[size_t(r)].resize(size_t(c.count) * sizeof(float));
        for (int64_t i = 0; i < c.count; ++i) {
          // Mostly NaNs, quiet, of either sign, the payload naming rank and element; a few numbers.
          const uint32_t nan = ((i + r) % 2 ? 0xffc00000u : 0x7fc00000u) | uint32_t(r * 4096 + i + 1);
          const float number = float(r + 1) * 0.5f + float(i);
          const uint32_t bits = (i + r) % 5 == 0 ? std::bit_cast<uint32_t>(number) : nan;
          std::memcpy(inputs[size_t(r)].data() + size_t(i) * sizeof(float), &bits, sizeof bits);
        }
      }
      const auto outputs = run_on_threads(c, *s, inputs);
      for (int r = 1; r < p; ++r) ASSERT_TRUE(outputs[size_t(r)] == outputs[0]) << "rank " << r << " differs from rank 0";
    }
}

// The tiled reference the benchmark uses agrees with the direct one, also past one period.
TEST(CollectiveCheck, TiledExpectedOutputMatchesTheDirectReference) {
  for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter,
                          Collective::AllGather, Collective::AllToAll})
    for (auto [t, op] : {std::pair{DataType::Float32, ReduceOp::Sum},
                         std::pair{DataType::Bfloat16, ReduceOp::Avg},
                         std::pair{DataType::Int8, ReduceOp::Prod},
                         std::pair{DataType::Fp8E5M2, ReduceOp::Min}})
      for (int p : {1, 3, 8})
        for (int64_t count : {int64_t(5), int64_t(p == 3 ? 70001 : 9)}) {
          CollectiveCase c;
          c.collective = coll;
          c.dtype = t;
          c.op = op;
          c.nranks = p;
          c.count = count;
          std::vector<std::vector<unsigned char>> inputs(p);
          for (int r = 0; r < p; ++r) inputs[r] = c.input(r);
          for (int r = 0; r < p; ++r)
            ASSERT_TRUE(expected_output(c, r) == c.reference(r, inputs)) << c.describe();
        }
}

std::string generator_name(const ::testing::TestParamInfo<GeneratorEntry>& info) {
  std::string n = info.param.name + "_" + std::string(sched::to_string(info.param.collective));
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllGenerators, HostBackendGenerator,
                         ::testing::ValuesIn(all_generators()), generator_name);

}  // namespace
}  // namespace topocoll::exec::testing
