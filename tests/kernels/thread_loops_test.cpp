// The CUDA kernels' per-thread work (kernels/thread_loops.h) run on the host: every simulated
// thread of a simulated grid in turn, which is equivalent to the GPU because threads never
// touch each other's elements. Checks the head / 16-byte pack / tail split, the unrolled
// grid-stride indexing and the in-place case against reduce_cpu / finalize_cpu / premul_cpu
// and memcpy, for many grid sizes, counts and alignments. No GPU needed.
#include "kernels/thread_loops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reduce_cpu.h"
#include "tests/kernels/reference_numerics.h"

namespace topocoll::kernels {
namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kPoison = 0xC3;

// 16-byte aligned bytes with poisoned guards; at(offset) is the payload start + offset.
struct Arena {
  explicit Arena(std::size_t bytes) : words((bytes + 2 * kGuard + 32) / 16 + 1) {
    std::memset(words.data(), kPoison, words.size() * 16);
  }
  char* at(std::size_t offset) { return reinterpret_cast<char*>(words.data()) + kGuard + offset; }
  const unsigned char* raw() const { return reinterpret_cast<const unsigned char*>(words.data()); }
  std::size_t size() const { return words.size() * 16; }
  std::vector<Pack16> words;
};

// Element-wise comparison: bitwise, except that any NaN matches any NaN (the host compiler may
// commute a vectorised operation, which changes which input NaN's payload and sign survive).
bool same_elements(DataType t, const void* got, const void* want, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!test::same_result(t, test::load_bits(got, i, t), test::load_bits(want, i, t)))
      return false;
  return true;
}

// Every byte outside [offset, offset + bytes) of the payload area is still poison.
void expect_untouched_outside(const Arena& a, std::size_t offset, std::size_t bytes,
                              const std::string& what) {
  const std::size_t first = kGuard + offset;
  for (std::size_t b = 0; b < a.size(); ++b) {
    if (b >= first && b < first + bytes) continue;
    if (a.raw()[b] != kPoison) {
      ADD_FAILURE() << what << ": byte " << b << " outside the output was written";
      return;
    }
  }
}

using ReduceThreadFn = void (*)(const ReduceArgs&, std::size_t, std::size_t);
using MapThreadFn = void (*)(const MapArgs&, std::size_t, std::size_t);

template <int... D>
constexpr auto reduce_fns(std::integer_sequence<int, D...>) {
  return std::array<std::array<ReduceThreadFn, 4>, kNumDataTypes>{
      std::array<ReduceThreadFn, 4>{&reduce_thread<static_cast<DataType>(D), ReduceOp::Sum>,
                                    &reduce_thread<static_cast<DataType>(D), ReduceOp::Prod>,
                                    &reduce_thread<static_cast<DataType>(D), ReduceOp::Max>,
                                    &reduce_thread<static_cast<DataType>(D), ReduceOp::Min>}...};
}
template <MapKind K, int... D>
constexpr auto map_fns(std::integer_sequence<int, D...>) {
  return std::array<MapThreadFn, kNumDataTypes>{&map_thread<K, static_cast<DataType>(D)>...};
}
const auto kReduce = reduce_fns(std::make_integer_sequence<int, kNumDataTypes>{});
const auto kFinalize = map_fns<MapKind::Finalize>(std::make_integer_sequence<int, kNumDataTypes>{});
const auto kPremul = map_fns<MapKind::Premul>(std::make_integer_sequence<int, kNumDataTypes>{});

// Runs all threads of a simulated grid of `nthreads`.
template <class Fn, class Args>
void run_grid(Fn fn, const Args& a, std::size_t nthreads) {
  for (std::size_t t = 0; t < nthreads; ++t) fn(a, t, nthreads);
}

void fill_random(DataType t, char* p, std::size_t count, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < count; ++i) test::store_bits(p, i, t, test::random_bits(t, rng));
}

class KernelsThreadLoops : public ::testing::TestWithParam<int> {
 protected:
  DataType type() const { return static_cast<DataType>(GetParam()); }
};

TEST_P(KernelsThreadLoops, ReduceMatchesCpuForEveryGridAndAlignment) {
  const DataType t = type();
  const std::size_t elem = datatype_size(t);
  std::mt19937_64 rng(31 + GetParam());
  for (std::size_t count : {0, 1, 7, 33, 1000, 4099})
    for (int nsrc : {1, 2, 3, 8})
      for (std::size_t off = 0; off < 16; off += elem)
        for (bool mixed : {false, true})
          for (std::size_t nthreads : {1, 3, 32, 1000}) {
            const int o = static_cast<int>(rng() % 4);  // Sum, Prod, Max, Min
            const std::string what = std::string(datatype_name(t)) + " op " + std::to_string(o) +
                                     " K=" + std::to_string(nsrc) + " count=" +
                                     std::to_string(count) + " off=" + std::to_string(off) +
                                     (mixed ? " mixed" : "") + " threads=" +
                                     std::to_string(nthreads);
            std::vector<Arena> src;
            for (int j = 0; j < nsrc; ++j) src.emplace_back(count * elem);
            ReduceArgs a{};
            std::vector<const void*> ptrs;
            for (int j = 0; j < nsrc; ++j) {
              // mixed: sources at different offsets, so the element-wise path runs
              const std::size_t so = mixed ? (off + j * elem) % 16 / elem * elem : off;
              fill_random(t, src[j].at(so), count, rng);
              a.srcs[j] = src[j].at(so);
              ptrs.push_back(a.srcs[j]);
            }
            Arena dst(count * elem);
            std::vector<char> want(count * elem + 16);
            reduce_cpu(t, static_cast<ReduceOp>(o), want.data(), ptrs.data(), nsrc, count);
            a.dst = dst.at(off);
            a.count = count;
            a.nsrc = nsrc;
            ptrs.push_back(a.dst);
            const VectorSplit s = split_for_vectors(ptrs.data(), nsrc + 1, count, elem);
            a.head = s.head;
            a.packs = s.packs;
            if (!mixed && count * elem >= 32) {
              EXPECT_GT(a.packs, 0u) << what;  // the pack path is really exercised
            }
            if (mixed && nsrc > 1) {
              EXPECT_EQ(a.packs, 0u) << what;  // and so is the element-wise one
            }
            run_grid(kReduce[GetParam()][o], a, nthreads);
            EXPECT_TRUE(same_elements(t, dst.at(off), want.data(), count)) << what;
            expect_untouched_outside(dst, off, count * elem, what);
            if (HasFailure()) return;
          }
}

TEST_P(KernelsThreadLoops, ReduceInPlace) {
  const DataType t = type();
  const std::size_t elem = datatype_size(t);
  std::mt19937_64 rng(77 + GetParam());
  const std::size_t count = 1237;
  for (int alias = 0; alias < 3; ++alias)
    for (std::size_t off : {std::size_t{0}, elem % 16}) {
      std::vector<Arena> src;
      ReduceArgs a{};
      std::vector<const void*> ptrs;
      for (int j = 0; j < 3; ++j) {
        src.emplace_back(count * elem);
        fill_random(t, src[j].at(off), count, rng);
        a.srcs[j] = src[j].at(off);
        ptrs.push_back(a.srcs[j]);
      }
      std::vector<char> want(count * elem);
      reduce_cpu(t, ReduceOp::Sum, want.data(), ptrs.data(), 3, count);
      a.dst = src[alias].at(off);
      a.count = count;
      a.nsrc = 3;
      const VectorSplit s = split_for_vectors(ptrs.data(), 3, count, elem);
      a.head = s.head;
      a.packs = s.packs;
      run_grid(kReduce[GetParam()][0], a, 96);
      EXPECT_TRUE(same_elements(t, src[alias].at(off), want.data(), count))
          << datatype_name(t) << " in place on srcs[" << alias << "] off=" << off;
    }
}

TEST_P(KernelsThreadLoops, FinalizeAndPremulMatchCpu) {
  const DataType t = type();
  const std::size_t elem = datatype_size(t);
  std::mt19937_64 rng(99 + GetParam());
  for (std::size_t count : {1, 17, 3001})
    for (std::size_t off = 0; off < 16; off += elem)
      for (std::size_t nthreads : {1, 64, 5000}) {
        Arena src(count * elem), dst(count * elem);
        fill_random(t, src.at(off), count, rng);
        const void* ptrs[2] = {src.at(off), dst.at(off)};
        const VectorSplit s = split_for_vectors(ptrs, 2, count, elem);
        MapArgs a{};
        a.src = src.at(off);
        a.dst = dst.at(off);
        a.count = count;
        a.head = s.head;
        a.packs = s.packs;
        a.nranks = 1 + static_cast<int>(rng() % 9);
        std::vector<char> want(count * elem);
        std::memcpy(want.data(), src.at(off), count * elem);
        finalize_cpu(t, ReduceOp::Avg, want.data(), count, a.nranks);
        run_grid(kFinalize[GetParam()], a, nthreads);
        EXPECT_TRUE(same_elements(t, dst.at(off), want.data(), count))
            << datatype_name(t) << " finalize count=" << count << " off=" << off;
        a.scalar = test::random_bits(t, rng);
        premul_cpu(t, want.data(), src.at(off), count, &a.scalar);
        run_grid(kPremul[GetParam()], a, nthreads);
        EXPECT_TRUE(same_elements(t, dst.at(off), want.data(), count))
            << datatype_name(t) << " premul count=" << count << " off=" << off;
        expect_untouched_outside(dst, off, count * elem, "map");
        if (HasFailure()) return;
      }
}

INSTANTIATE_TEST_SUITE_P(Types, KernelsThreadLoops, ::testing::Range(0, kNumDataTypes),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(datatype_name(static_cast<DataType>(info.param)));
                         });

TEST(KernelsThreadLoopsCopy, CopiesAnyAlignmentExactly) {
  std::mt19937_64 rng(5);
  for (std::size_t bytes : {0, 1, 2, 15, 16, 17, 100, 4096, 10007})
    for (std::size_t so = 0; so < 16; ++so)
      for (std::size_t doff : {0, 1, 2, 4, 8, 9, 15})
        for (std::size_t nthreads : {1, 7, 256}) {
          Arena src(bytes), dst(bytes);
          for (std::size_t i = 0; i < bytes; ++i) src.at(so)[i] = static_cast<char>(rng());
          for (std::size_t t = 0; t < nthreads; ++t)
            copy_range_thread(dst.at(doff), src.at(so), bytes, t, nthreads);
          const std::string what = "bytes=" + std::to_string(bytes) + " src+" +
                                   std::to_string(so) + " dst+" + std::to_string(doff) +
                                   " threads=" + std::to_string(nthreads);
          EXPECT_EQ(std::memcmp(dst.at(doff), src.at(so), bytes), 0) << what;
          expect_untouched_outside(dst, doff, bytes, what);
          if (HasFailure()) return;
        }
}

}  // namespace
}  // namespace topocoll::kernels
