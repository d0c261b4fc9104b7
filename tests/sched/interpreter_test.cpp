// Runs verifier-accepted schedules on real int64 data with a tiny interpreter of the IR
// (sum, max, avg) and compares with a reference: the symbolic proof and the numbers agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "sched/algorithm_registry.h"
#include "sched/generator.h"
#include "sched/hierarchical.h"
#include "sched/verifier.h"

namespace topocoll::sched {
namespace {

enum class RedOp { Sum, Max, Avg };

struct Memory {
  std::vector<int64_t> main, output, scratch;  // main: Input (aliased with Output in place)
};

// Executes s. in[r] is rank r's input; returns every rank's output.
std::vector<std::vector<int64_t>> run(const Schedule& s, const std::vector<std::vector<int64_t>>& in, RedOp red,
                                      bool in_place) {
  const int P = s.nranks;
  const int64_t c = s.count;
  std::vector<Memory> mem(static_cast<size_t>(P));
  // In place, Input and Output share one allocation the NCCL way.
  auto at = [&](int r, BufRef b) -> int64_t* {
    Memory& m = mem[size_t(r)];
    if (b.buf == Buf::Scratch) return m.scratch.data() + b.offset;
    if (!in_place) return (b.buf == Buf::Input ? m.main.data() : m.output.data()) + b.offset;
    int64_t shift = 0;
    if (s.collective == Collective::ReduceScatter && b.buf == Buf::Output) shift = r * c;
    if (s.collective == Collective::AllGather && b.buf == Buf::Input) shift = r * c;
    return m.main.data() + b.offset + shift;
  };
  for (int r = 0; r < P; ++r) {
    Memory& m = mem[size_t(r)];
    m.main.assign(size_t(in_place ? std::max(s.input_count, s.output_count) : s.input_count), -7);
    m.output.assign(size_t(s.output_count), -7);
    m.scratch.assign(size_t(s.programs[size_t(r)].scratch_elems), -7);
    std::copy(in[size_t(r)].begin(), in[size_t(r)].end(), at(r, {Buf::Input, 0}));
  }
  std::map<std::pair<int, int>, std::deque<std::vector<int64_t>>> wire;
  for (int st = 0; st < s.num_steps(); ++st) {
    for (int r = 0; r < P; ++r)
      for (const Op& op : s.programs[size_t(r)].step(st))
        if (op.kind == OpKind::Send) {
          const int64_t* p = at(r, op.src());
          wire[{r, op.peer}].emplace_back(p, p + op.count);
        }
    for (int r = 0; r < P; ++r) {
      for (const Op& op : s.programs[size_t(r)].step(st))
        if (op.kind == OpKind::Recv) {
          auto& q = wire[{op.peer, r}];
          EXPECT_FALSE(q.empty());
          if (q.empty()) return {};
          std::copy(q.front().begin(), q.front().end(), at(r, op.dst));
          q.pop_front();
        }
      for (const Op& op : s.programs[size_t(r)].step(st)) {
        int64_t* d = at(r, op.dst);
        switch (op.kind) {
          case OpKind::Reduce: {
            std::vector<int64_t> acc(at(r, op.srcs[0]), at(r, op.srcs[0]) + op.count);
            for (int k = 1; k < op.nsrc; ++k) {
              const int64_t* x = at(r, op.srcs[size_t(k)]);
              for (int64_t e = 0; e < op.count; ++e)
                acc[size_t(e)] = red == RedOp::Max ? std::max(acc[size_t(e)], x[e]) : acc[size_t(e)] + x[e];
            }
            std::copy(acc.begin(), acc.end(), d);
            break;
          }
          case OpKind::Copy: {
            std::vector<int64_t> tmp(at(r, op.src()), at(r, op.src()) + op.count);
            std::copy(tmp.begin(), tmp.end(), d);
            break;
          }
          case OpKind::Finalize:
            if (red == RedOp::Avg)
              for (int64_t e = 0; e < op.count; ++e) d[e] /= P;
            break;
          default:
            break;
        }
      }
    }
  }
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    const int64_t* p = at(r, {Buf::Output, 0});
    out[size_t(r)].assign(p, p + s.output_count);
  }
  return out;
}

std::vector<std::vector<int64_t>> reference(const Schedule& s, const std::vector<std::vector<int64_t>>& in, RedOp red) {
  const int P = s.nranks;
  const int64_t c = s.count;
  std::vector<std::vector<int64_t>> out(size_t(P), std::vector<int64_t>(size_t(s.output_count)));
  auto reduce_at = [&](int64_t g) {
    int64_t v = in[0][size_t(g)];
    for (int q = 1; q < P; ++q) v = red == RedOp::Max ? std::max(v, in[size_t(q)][size_t(g)]) : v + in[size_t(q)][size_t(g)];
    return red == RedOp::Avg ? v / P : v;
  };
  for (int r = 0; r < P; ++r)
    for (int64_t y = 0; y < s.output_count; ++y) {
      int64_t& o = out[size_t(r)][size_t(y)];
      switch (s.collective) {
        case Collective::AllReduce: o = reduce_at(y); break;
        case Collective::ReduceScatter: o = reduce_at(r * c + y); break;
        case Collective::AllGather: o = in[size_t(y / c)][size_t(y % c)]; break;
        case Collective::AllToAll: o = in[size_t(y / c)][size_t(r * c + y % c)]; break;
      }
    }
  return out;
}

void check(const Schedule& s, uint32_t seed) {
  const std::string what = s.algo + " " + std::string(to_string(s.collective)) + " P=" + std::to_string(s.nranks) +
                           " count=" + std::to_string(s.count);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> in(size_t(s.nranks));
  for (auto& v : in) {
    v.resize(size_t(s.input_count));
    for (int64_t& x : v) x = int64_t(rng() % 2001) * s.nranks - 1000 * s.nranks;  // multiples of P: avg is exact
  }
  for (bool in_place : {false, true}) {
    if (in_place && s.collective == Collective::AllToAll) continue;
    VerifyOptions o;
    o.aliasing = in_place ? Aliasing::InPlace : Aliasing::OutOfPlace;
    const VerifyResult v = verify(s, o);
    ASSERT_TRUE(v.ok) << what << ": " << v.error;
    const bool reduces = s.collective == Collective::AllReduce || s.collective == Collective::ReduceScatter;
    for (RedOp red : {RedOp::Sum, RedOp::Max, RedOp::Avg}) {
      if (!reduces && red != RedOp::Sum) continue;
      EXPECT_EQ(run(s, in, red, in_place), reference(s, in, red))
          << what << (in_place ? " in place" : " out of place") << " op " << int(red);
    }
  }
}

TEST(Interpreter, EveryGeneratorComputesTheReference) {
  uint32_t seed = 1;
  for (Collective coll : kCollectives)
    for (const Algorithm& algorithm : algorithms()) {
      if (!algorithm.collectives.contains(coll)) continue;
      for (int P : {1, 2, 3, 5, 8, 12, 16, 17}) {
        const int64_t per_rank_max = coll == Collective::AllReduce ? 7 * int64_t(P) + 3 : 3;
        for (int64_t c : {int64_t(0), int64_t(1), int64_t(P) + 1, per_rank_max}) check(generate(algorithm.name, coll, P, c), seed++);
      }
    }
}

TEST(Interpreter, NoticesWhatTheVerifierRejects) {
  // Without rank 0's finalize, avg is wrong on real data too (and the verifier says so).
  Schedule s = generate("hd", Collective::AllReduce, 4, 8);
  RankProgram& p = s.programs[0];
  const auto f = std::find_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return op.kind == OpKind::Finalize; });
  ASSERT_NE(f, p.ops.end());
  const uint32_t i = uint32_t(f - p.ops.begin());
  p.ops.erase(f);
  for (uint32_t& b : p.step_begin)
    if (b > i) --b;
  EXPECT_FALSE(verify(s).ok);
  std::vector<std::vector<int64_t>> in(4, std::vector<int64_t>(8));
  for (int r = 0; r < 4; ++r)
    for (int e = 0; e < 8; ++e) in[size_t(r)][size_t(e)] = 4 * (r + 1) * (e + 1);
  EXPECT_NE(run(s, in, RedOp::Avg, false), reference(s, in, RedOp::Avg));
  EXPECT_EQ(run(s, in, RedOp::Sum, false), reference(s, in, RedOp::Sum));
}

// Soundness: whatever random damage a schedule takes, if the verifier still accepts it,
// it computes the right numbers (and the verifier never crashes on the damaged ones).
TEST(Interpreter, RandomDamageNeverFoolsTheVerifier) {
  std::mt19937_64 rng(2024);
  const std::vector<Schedule> bases = {
      generate("ring", Collective::AllReduce, 4, 9),       generate("hd", Collective::AllReduce, 5, 11),
      generate("fc-direct", Collective::ReduceScatter, 4, 3), generate("hd", Collective::AllGather, 3, 2),
      generate("fc", Collective::AllToAll, 4, 2),          generate("fc", Collective::AllReduce, 4, 5),
      generate("ring", Collective::AllToAll, 3, 2),        generate("hd", Collective::ReduceScatter, 6, 2)};
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Schedule s = bases[size_t(trial) % bases.size()];
    const int damages = 1 + int(rng() % 2);
    for (int d = 0; d < damages; ++d) {
      RankProgram& p = s.programs[size_t(rng() % uint64_t(s.nranks))];
      if (p.ops.empty()) continue;
      const size_t i = size_t(rng() % p.ops.size());
      Op& op = p.ops[i];
      const int k = int(rng() % 8);
      switch (rng() % 10) {
        case 0: op.peer = int(rng() % uint64_t(s.nranks + 1)) - (rng() % 4 == 0 ? 1 : 0); break;
        case 1: op.count += (rng() % 2) ? 1 : -1; break;
        case 2: op.dst.offset += int64_t(rng() % 5) - 2; break;
        case 3: op.srcs[size_t(k)].offset += int64_t(rng() % 5) - 2; break;
        case 4: op.dst.buf = Buf(rng() % 3); break;
        case 5: op.srcs[size_t(k)].buf = Buf(rng() % 3); break;
        case 6: op.kind = OpKind(rng() % 5); break;
        case 7: op.nsrc = uint8_t(rng() % 10); break;
        case 8: {  // drop the op
          p.ops.erase(p.ops.begin() + int64_t(i));
          for (uint32_t& b : p.step_begin)
            if (b > i) --b;
          break;
        }
        default: {  // swap with a neighbour inside the same buffer of ops
          const size_t j = i + 1 < p.ops.size() ? i + 1 : i;
          std::swap(p.ops[i], p.ops[j]);
          break;
        }
      }
    }
    std::vector<std::vector<int64_t>> in(size_t(s.nranks));
    for (auto& v : in) {
      v.resize(size_t(s.input_count));
      for (int64_t& x : v) x = int64_t(rng() % 1001) * s.nranks;
    }
    for (bool in_place : {false, true}) {
      VerifyOptions o;
      o.aliasing = in_place ? Aliasing::InPlace : Aliasing::OutOfPlace;
      o.self_check = true;
      const VerifyResult v = verify(s, o);
      if (!v.ok) {
        ++rejected;
        EXPECT_FALSE(v.error.empty());
        continue;
      }
      ++accepted;
      const bool reduces = s.collective == Collective::AllReduce || s.collective == Collective::ReduceScatter;
      for (RedOp red : {RedOp::Sum, RedOp::Max, RedOp::Avg}) {
        if (!reduces && red != RedOp::Sum) continue;
        ASSERT_EQ(run(s, in, red, in_place), reference(s, in, red))
            << "trial " << trial << ": accepted a schedule that computes wrong numbers";
      }
    }
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 10);  // harmless damage (e.g. to unused fields) must still pass
}

TEST(Interpreter, HierarchicalComputesTheReference) {
  uint32_t seed = 100;
  for (int G : {2, 4}) {
    for (std::vector<int> dims : {std::vector<int>{}, std::vector<int>{2, 3}})
      for (int variant = 0; variant < 3; ++variant) {
        const InterGroupAlgo a = variant == 1 ? InterGroupAlgo::HalvingDoubling : InterGroupAlgo::Ring;
        HierParams params;
        params.group_size = G;
        params.torus_dims = dims;
        params.inter = a;
        params.reduce_scatter_first = variant == 2;
        const int nranks = G * 6;
        check(hierarchical_allreduce(nranks, 7 * nranks + 3, params), seed++);
      }
  }
}

}  // namespace
}  // namespace topocoll::sched
