// Pipelined steps (exec/pipeline.h): how messages are cut, which round each local piece runs
// after (reads of received bytes, writes to bytes still being sent), and real data on
// threads: every generator, pipelined with overlap, without, and mixed across ranks, gives
// the same bytes as the uncut run.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/env.h"
#include "exec/collective_check.h"
#include "exec/engine.h"
#include "exec/host_backend.h"
#include "exec/in_process_transport.h"
#include "exec/local_op_worker.h"
#include "exec/pipeline.h"
#include "sched/cost_model.h"
#include "sched/generator.h"
#include "sched/placement.h"
#include "sched/schedule_builder.h"
#include "tests/exec/generator_list.h"
#include "topo/topology.h"
#include "topo/topology_json.h"

namespace topocoll::exec {
namespace {

using sched::Buf;
using sched::BufRef;
using sched::Collective;
using sched::PipelineShape;

TEST(PipelineShape, PiecesAreWholeChunksAtMostMaxAndNoneBelowTwoChunks) {
  const PipelineShape s{1 << 20, 8};
  EXPECT_EQ(s.pieces(0), 1);
  EXPECT_EQ(s.pieces((2 << 20) - 1), 1);
  EXPECT_EQ(s.pieces(2 << 20), 2);
  EXPECT_EQ(s.pieces((5 << 20) + 7), 5);
  EXPECT_EQ(s.pieces(std::size_t(1) << 40), 8);
  EXPECT_EQ((PipelineShape{0, 8}).pieces(std::size_t(1) << 40), 1);
  EXPECT_EQ((PipelineShape{1 << 20, 1}).pieces(std::size_t(1) << 40), 1);
}

TEST(PipelineShape, PieceBoundsCoverTheRangeOnSixteenByteBoundaries) {
  for (int64_t count : {int64_t(0), int64_t(3), int64_t(1000), int64_t(1000003)})
    for (int n : {1, 2, 3, 8})
      for (int64_t align : {int64_t(1), int64_t(4), int64_t(8)}) {
        EXPECT_EQ(sched::piece_begin(count, n, 0, align), 0);
        EXPECT_EQ(sched::piece_begin(count, n, n, align), count);
        for (int j = 1; j < n; ++j) {
          const int64_t b = sched::piece_begin(count, n, j, align);
          EXPECT_EQ(b % align, 0);
          EXPECT_LE(sched::piece_begin(count, n, j - 1, align), b);
        }
      }
}

PipelineOptions options_of(const std::map<std::string, std::string, std::less<>>& values,
                           std::size_t default_chunk_bytes = PipelineOptions::kDefaultChunkBytes) {
  return PipelineOptions::from_env(config::read_env(values), default_chunk_bytes);
}

// The Env validated the values (config/env.h: a bad one is its warning, and the default is
// used); the options take them, and the backend's default where the chunk is unset.
TEST(PipelineOptions, TheEnvsValuesOrTheBackendsDefault) {
  PipelineOptions o = options_of({{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "4M"}, {"TOPOCOLL_PIPELINE_MAX_CHUNKS", "16"}});
  EXPECT_EQ(o.shape.chunk_bytes, std::size_t(4) << 20);
  EXPECT_EQ(o.shape.max_chunks, 16);
  EXPECT_FALSE(options_of({{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "0"}}).shape.enabled());
  EXPECT_EQ(options_of({{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "64KiB"}}, 0).shape.chunk_bytes, std::size_t(64) << 10);
  for (const char* bad : {"4096", "abc", "-1", "2G"}) {
    const config::Env env = config::read_env({{"TOPOCOLL_PIPELINE_CHUNK_BYTES", bad}});
    ASSERT_EQ(env.warnings.size(), 1u) << bad;
    EXPECT_NE(env.warnings[0].find("TOPOCOLL_PIPELINE_CHUNK_BYTES"), std::string::npos) << env.warnings[0];
    EXPECT_EQ(PipelineOptions::from_env(env).shape.chunk_bytes, PipelineOptions::kDefaultChunkBytes);
    EXPECT_FALSE(PipelineOptions::from_env(env, 0).shape.enabled()) << "the host backend's default";
  }
  // Unset: the caller's default (the host backend's is off, the NCCL backend's 4 MiB).
  EXPECT_FALSE(options_of({}, 0).shape.enabled());
  EXPECT_EQ(options_of({}).shape.chunk_bytes, PipelineOptions::kDefaultChunkBytes);
  EXPECT_EQ(options_of({}).shape.max_chunks, PipelineOptions::kDefaultMaxChunks);
  const config::Env one = config::read_env({{"TOPOCOLL_PIPELINE_MAX_CHUNKS", "1"}});
  ASSERT_EQ(one.warnings.size(), 1u);
  EXPECT_NE(one.warnings[0].find("TOPOCOLL_PIPELINE_MAX_CHUNKS"), std::string::npos);
  EXPECT_EQ(PipelineOptions::from_env(one).shape.max_chunks, PipelineOptions::kDefaultMaxChunks);
}

// Addresses of a fake rank's buffers: input, output and scratch far apart, unless aliased.
struct FakeBuffers {
  uintptr_t input = 0x100000000, output = 0x200000000, scratch = 0x300000000;
  std::size_t elem = 4;
  uintptr_t operator()(const BufRef& r) const {
    const uintptr_t base = r.buf == Buf::Input ? input : r.buf == Buf::Output ? output : scratch;
    return base + uintptr_t(r.offset) * elem;
  }
};

// One rank's step: receive the peer's half into scratch, send our other half, reduce.
// With 4 pieces, local piece j reads only received piece j: it runs after round j.
// A two-rank step built by `ops(builder, rank, peer)` for both ranks.
template <typename Ops>
sched::Schedule two_rank_step(int64_t count, int64_t scratch, Ops&& ops) {
  sched::ScheduleBuilder b(Collective::AllReduce, "test", 2, count, count, count);
  for (int r = 0; r < 2; ++r) {
    b.need_scratch(r, scratch);
    ops(b, r, 1 - r);
  }
  return b.finish();
}

// One rank's step: receive the peer's half into scratch, send our other half, reduce.
// With 4 pieces, local piece j reads only received piece j: it runs after round j.
TEST(CutStep, AReducePieceRunsAfterTheRoundThatBroughtItsBytes) {
  const int64_t n = 1 << 20;  // 4 MiB of float32 per half
  const sched::Schedule s = two_rank_step(2 * n, n, [&](sched::ScheduleBuilder& b, int r, int peer) {
    b.recv(0, r, peer, {Buf::Scratch, 0}, n);
    b.send(0, r, peer, {Buf::Input, n}, n);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Input, 0}, BufRef{Buf::Scratch, 0}}, n);
  });
  const StepCut cut = cut_step(s.programs[0], 0, 4, PipelineShape{1 << 20, 4}, FakeBuffers{});
  ASSERT_TRUE(cut.pieces_cut);
  ASSERT_TRUE(cut.overlapped());
  ASSERT_EQ(cut.transfers.size(), 4u);
  for (int j = 0; j < 4; ++j) {
    ASSERT_EQ(cut.transfers[j].size(), 2u) << "round " << j;  // piece j of the recv and the send
    ASSERT_EQ(cut.local_ops[j].size(), 1u) << "round " << j;
    EXPECT_EQ(cut.local_ops[j][0].begin, cut.transfers[j][0].begin);
    EXPECT_EQ(cut.local_ops[j][0].end, cut.transfers[j][0].end);
  }
}

TEST(CutStep, AWriteToBytesStillBeingSentWaitsForTheLastRoundThatSendsThem) {
  const int64_t n = 1 << 20;
  // In place (output = input): reduce piece j writes what send piece j reads and reads
  // received piece j, all of round j, so it still overlaps piece by piece.
  const sched::Schedule s = two_rank_step(n, n, [&](sched::ScheduleBuilder& b, int r, int peer) {
    b.recv(0, r, peer, {Buf::Scratch, 0}, n);
    b.send(0, r, peer, {Buf::Input, 0}, n);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Output, 0}, BufRef{Buf::Scratch, 0}}, n);
  });
  FakeBuffers in_place;
  in_place.output = in_place.input;
  const StepCut aliased = cut_step(s.programs[0], 0, 4, PipelineShape{1 << 19, 8}, in_place);
  ASSERT_TRUE(aliased.pieces_cut);
  EXPECT_EQ(aliased.transfers.size(), 8u);
  ASSERT_TRUE(aliased.overlapped());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(aliased.local_ops[j].size(), 1u);

  // The reduce writes the output's first half while the send reads the whole output:
  // reduce piece k covers [k n/16, (k+1) n/16), which send pieces k/2 reads, so it runs
  // no earlier than round k/2... and the round of the received piece it reads (k/2) too.
  const sched::Schedule t = two_rank_step(n, n, [&](sched::ScheduleBuilder& b, int r, int peer) {
    b.recv(0, r, peer, {Buf::Scratch, 0}, n);
    b.send(0, r, peer, {Buf::Output, 0}, n);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Input, 0}, BufRef{Buf::Scratch, n / 2}}, n / 2);
  });
  const StepCut late = cut_step(t.programs[0], 0, 4, PipelineShape{1 << 19, 8}, FakeBuffers{});
  ASSERT_TRUE(late.overlapped());
  for (int j = 0; j < 8; ++j)
    for (const OpPiece& p : late.local_ops[j]) {
      // The output range it writes is sent in rounds up to (p.end - 1) / (n / 8); the
      // scratch range it reads arrives in rounds up to (n / 2 + p.end - 1) / (n / 8).
      EXPECT_GE(j, int((p.end - 1) / (n / 8))) << "piece [" << p.begin << ", " << p.end << ")";
      EXPECT_GE(j, int((n / 2 + p.end - 1) / (n / 8))) << "piece [" << p.begin << ", " << p.end << ")";
    }
}

// A later local op that reads what an earlier one writes never runs before it.
TEST(CutStep, LocalPiecesKeepTheOrderOfTheOpsTheyDependOn) {
  const int64_t n = 1 << 20;
  const sched::Schedule s = two_rank_step(n, 2 * n, [&](sched::ScheduleBuilder& b, int r, int peer) {
    b.recv(0, r, peer, {Buf::Scratch, 0}, n);
    b.send(0, r, peer, {Buf::Input, 0}, n);
    // The received second half copied up, then reduced from there.
    b.copy(0, r, {Buf::Scratch, n}, {Buf::Scratch, n / 2}, n / 2);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Input, 0}, BufRef{Buf::Scratch, n}}, n / 2);
  });
  const StepCut cut = cut_step(s.programs[0], 0, 4, PipelineShape{1 << 19, 8}, FakeBuffers{});
  ASSERT_TRUE(cut.overlapped());
  // Copy piece k reads received elements [n/2 + k n/16, ...): round 4 + k/2. Reduce piece
  // k reads copy piece k: never an earlier round than it.
  std::vector<int> copy_round(8, -1), reduce_round(8, -1);
  for (int j = 0; j < 8; ++j)
    for (const OpPiece& p : cut.local_ops[j]) {
      const int piece = int(p.begin / (n / 16));
      (p.op == 2 ? copy_round : reduce_round)[std::size_t(piece)] = j;
    }
  for (int k = 0; k < 8; ++k) {
    EXPECT_GE(copy_round[k], 4 + k / 2) << k;
    EXPECT_GE(reduce_round[k], copy_round[k]) << k;
  }
  // Within a round the copy's piece comes before the reduce's.
  for (const auto& round : cut.local_ops)
    for (std::size_t i = 1; i < round.size(); ++i) {
      if (round[i].begin == round[i - 1].begin) {
        EXPECT_LT(round[i - 1].op, round[i].op);
      }
    }
}

TEST(LocalOpWorker, RunsWorkInOrderAndJoinRethrowsTheFirstError) {
  LocalOpWorker w;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) w.submit([&order, i] { order.push_back(i); });
  w.join();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  std::atomic<int> after{0};
  w.submit([] { throw std::runtime_error("first"); });
  w.submit([] { throw std::runtime_error("second"); });
  w.submit([&after] { ++after; });
  try {
    w.join();
    FAIL() << "join did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_EQ(after.load(), 1);  // join returned only when everything had run
  w.join();                    // the error is reported once
}

// --- real data on threads ---------------------------------------------------------------

enum class Mode { Uncut, Overlapped, CutNoOverlap, Mixed };

struct Outcome {
  std::vector<std::vector<unsigned char>> outputs;
  int overlapped_steps = 0;  // rank 0's
};

Outcome run_mode(const CollectiveCase& c, const sched::Schedule& s,
                 const std::vector<std::vector<unsigned char>>& inputs, Mode mode,
                 const PipelineShape& shape) {
  InProcessFabric fabric(c.nranks, std::chrono::seconds(20));
  Outcome out;
  out.outputs.resize(std::size_t(c.nranks));
  std::exception_ptr error;
  std::mutex error_mutex;
  auto rank_main = [&](int r) {
    try {
      RankMemory mem(c, s, r, inputs[std::size_t(r)]);
      InProcessTransport transport(fabric, r);
      const bool overlap = mode == Mode::Overlapped || (mode == Mode::Mixed && r % 2 == 0);
      HostBackend backend(transport, overlap);
      PipelineOptions options;
      options.shape = mode == Mode::Uncut ? PipelineShape{0, 1} : shape;
      Execution e(s, r, c.dtype, c.op, mem.buffers, backend, options);
      if (r == 0) out.overlapped_steps = e.overlapped_steps();
      e.run();
      out.outputs[std::size_t(r)] = mem.output(c);
      if (mem.scratch.back() != 0) throw std::runtime_error("scratch overrun");
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < c.nranks; ++r) threads.emplace_back(rank_main, r);
  rank_main(0);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

using testing::GeneratorEntry;

class PipelinedGenerator : public ::testing::TestWithParam<GeneratorEntry> {};

// Small chunks (64 KiB, up to 8 pieces) so that modest buffers cut every step.
TEST_P(PipelinedGenerator, GivesTheUncutBytesWithOverlapWithoutAndMixedAcrossRanks) {
  const GeneratorEntry& g = GetParam();
  const PipelineShape shape{64 << 10, 8};
  for (int p : {2, 3, 4, 8})
    for (auto [dtype, op] : {std::pair{kernels::DataType::Float32, kernels::ReduceOp::Sum},
                             std::pair{kernels::DataType::Bfloat16, kernels::ReduceOp::Avg},
                             std::pair{kernels::DataType::Int32, kernels::ReduceOp::Max}})
      for (bool in_place : {false, true}) {
        CollectiveCase c;
        c.collective = g.collective;
        if (in_place && c.collective == Collective::AllToAll) continue;
        c.dtype = dtype;
        c.op = op;
        c.nranks = p;
        c.in_place = in_place;
        c.data = CheckData::Random;
        c.seed = uint64_t(p) * 7 + uint64_t(dtype);
        // Uneven, and large enough that even all-to-all blocks are cut.
        c.count = (c.collective == Collective::AllReduce ? int64_t(p) * 300000 : int64_t(150000)) + 37;
        SCOPED_TRACE(g.name + " " + c.describe());
        // Skipped only where the registry refuses the shape (with the generator agreeing).
        const std::optional<sched::Schedule> built = g.make_unless_refused(p, c.count);
        if (!built) continue;
        const sched::Schedule& s = *built;
        std::vector<std::vector<unsigned char>> inputs(static_cast<std::size_t>(p));
        for (int r = 0; r < p; ++r) inputs[std::size_t(r)] = c.input(r);
        const Outcome uncut = run_mode(c, s, inputs, Mode::Uncut, shape);
        EXPECT_EQ(uncut.overlapped_steps, 0);
        for (Mode m : {Mode::Overlapped, Mode::CutNoOverlap, Mode::Mixed}) {
          const Outcome cut = run_mode(c, s, inputs, m, shape);
          for (int r = 0; r < p; ++r) {
            ASSERT_TRUE(cut.outputs[std::size_t(r)] == uncut.outputs[std::size_t(r)])
                << "mode " << int(m) << " rank " << r << " differs from the uncut run";
          }
          if (m == Mode::CutNoOverlap) {
            EXPECT_EQ(cut.overlapped_steps, 0);
          }
        }
        const bool reduces = c.collective == Collective::AllReduce ||
                             c.collective == Collective::ReduceScatter;
        if (reduces && g.name == "hd" && p == 8) {
          EXPECT_GT(run_mode(c, s, inputs, Mode::Overlapped, shape).overlapped_steps, 0)
              << "halving-doubling's reduce-scatter steps should overlap";
        }
        if (c.data == CheckData::Exact || !reduces) {
          for (int r = 0; r < p; ++r) {
            ASSERT_TRUE(uncut.outputs[std::size_t(r)] == c.reference(r, inputs)) << "rank " << r;
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(AllGenerators, PipelinedGenerator,
                         ::testing::ValuesIn(testing::all_generators()),
                         [](const auto& info) {
                           std::string n = info.param.name + "_" +
                                           std::string(sched::to_string(info.param.collective));
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// --- the cost model's term ---------------------------------------------------------------

TEST(PipelineCost, OverlapHidesTheSmallerOfTransferAndReducePerRound) {
  const topo::Topology t =
      topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
  const sched::Placement placement = sched::first_endpoints(t, 8);
  const int64_t count = int64_t(64) << 20 >> 2;  // 64 MiB of float32
  const sched::Schedule s = sched::generate("hd", Collective::AllReduce, 8, count);
  sched::RouteCache routes(t);
  sched::CostParams off;
  off.gamma_us_per_byte = 1.0 / 2e3;  // a slow reducer (2 GB/s): reduce as long as the wire
  sched::CostParams on = off;
  on.pipeline = PipelineShape{1 << 20, 8};
  const sched::CostEstimate a = sched::estimate_cost(s, placement, 4, routes, off);
  const sched::CostEstimate b = sched::estimate_cost(s, placement, 4, routes, on);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  bool some_pipelined = false;
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    const sched::StepCost& x = a.steps[i];
    const sched::StepCost& y = b.steps[i];
    if (y.rounds == 1) {
      EXPECT_DOUBLE_EQ(x.time_us, y.time_us) << "step " << i;
      continue;
    }
    some_pipelined = true;
    const double c = y.rounds;
    // Never worse than serial by more than the extra rounds' alpha, and never better than
    // the longer of the two phases alone.
    EXPECT_LE(y.time_us, x.time_us + (c - 1) * on.alpha_us + 1e-6) << "step " << i;
    EXPECT_GE(y.time_us, std::max(x.transfer_us, x.reduce_us)) << "step " << i;
    EXPECT_LT(y.time_us, x.time_us) << "step " << i << " overlaps nothing";
  }
  EXPECT_TRUE(some_pipelined);
  EXPECT_LT(b.total_us, a.total_us);
}

// The model's rounds are the engine's: each message is cut on its own size, so four 1 MiB
// runs to one peer (one 4 MiB flow on the links) run in two rounds of 512 KiB pieces, not
// the eight a 4 MiB message would.
TEST(PipelineCost, RoundsAreThoseTheEngineCutsNotTheMergedFlows) {
  const int64_t run = (1 << 20) / 4;  // 1 MiB of float32
  const sched::Schedule s = two_rank_step(8 * run, 4 * run, [&](sched::ScheduleBuilder& b, int r, int peer) {
    for (int k = 0; k < 4; ++k) {  // runs apart, so not one message
      b.recv(0, r, peer, {Buf::Scratch, k * run}, run);
      b.send(0, r, peer, {Buf::Input, (2 * k + 1) * run}, run);
    }
    for (int k = 0; k < 4; ++k)
      b.reduce(0, r, {Buf::Output, 2 * k * run}, {BufRef{Buf::Input, 2 * k * run}, BufRef{Buf::Scratch, k * run}},
               run);
  });
  const PipelineShape shape{1 << 19, 8};
  const StepCut cut = cut_step(s.programs[0], 0, 4, shape, FakeBuffers{});
  ASSERT_TRUE(cut.pieces_cut);
  ASSERT_EQ(cut.transfers.size(), 2u);
  const topo::Topology t =
      topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
  sched::RouteCache routes(t);
  sched::CostParams params;
  params.pipeline = shape;
  const sched::CostEstimate c = sched::estimate_cost(s, sched::first_endpoints(t, 2), 4, routes, params);
  ASSERT_EQ(c.steps.size(), 1u);
  EXPECT_EQ(c.steps[0].rounds, int(cut.transfers.size()));
}

}  // namespace
}  // namespace topocoll::exec
