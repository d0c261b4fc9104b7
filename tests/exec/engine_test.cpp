// The engine against a recording backend: call order per step, batching and nesting of
// interleaved executions, empty transfers skipped, pointer resolution, and clear errors for
// programs that do not fit their buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec/engine.h"
#include "exec/host_backend.h"
#include "sched/schedule_builder.h"

namespace topocoll::exec {
namespace {

using sched::Buf;
using sched::BufRef;
using sched::Collective;

class RecordingBackend : public Backend {
 public:
  std::vector<std::string> calls;
  const char* base = nullptr;  // offsets are reported relative to this

  std::string at(const void* p) const {
    return std::to_string(static_cast<const char*>(p) - base);
  }
  void begin_transfers() override { calls.push_back("begin"); }
  void post_send(int peer, const void* src, std::size_t bytes) override {
    calls.push_back("send " + std::to_string(peer) + " @" + at(src) + " " + std::to_string(bytes));
  }
  void post_recv(int peer, void* dst, std::size_t bytes) override {
    calls.push_back("recv " + std::to_string(peer) + " @" + at(dst) + " " + std::to_string(bytes));
  }
  void end_transfers() override { calls.push_back("end"); }
  void reduce(const CollectiveBinding& b, void* dst, const void* const* srcs, int nsrc,
              int64_t count) override {
    std::string s = "reduce @" + at(dst);
    for (int i = 0; i < nsrc; ++i) s += " @" + at(srcs[i]);
    calls.push_back(s + " " + std::to_string(count) + " op" + std::to_string(int(b.op)));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    calls.push_back("copy @" + at(dst) + " @" + at(src) + " " + std::to_string(bytes));
  }
  void finalize(const CollectiveBinding& b, void* dst, int64_t count) override {
    calls.push_back("finalize @" + at(dst) + " " + std::to_string(count) + " n" +
                    std::to_string(b.nranks));
  }
  void avg_premul(const CollectiveBinding& b, void* dst, const void* src,
                  int64_t count) override {
    calls.push_back("avg_premul @" + at(dst) + " @" + at(src) + " " + std::to_string(count) +
                    " n" + std::to_string(b.nranks));
  }

  // Off by default, so the other tests' call lists stay as they were.
  bool record_boundaries = false;
  bool overlaps = false;
  void step_boundary(int boundary) override {
    if (record_boundaries) calls.push_back("| " + std::to_string(boundary));
  }
  bool overlaps_local_ops() const override { return overlaps; }
  void begin_overlapped_local_ops() override { calls.push_back("overlap"); }
  void end_overlapped_local_ops() override { calls.push_back("overlap end"); }
  void join_local_ops() override {
    if (overlaps) calls.push_back("join");
  }
};

// Two ranks exchanging halves: a hand-written allreduce of 4 elements.
sched::Schedule two_rank_allreduce() {
  sched::ScheduleBuilder b(Collective::AllReduce, "test", 2, 4, 4, 4);
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    const int64_t mine = r * 2, theirs = (1 - r) * 2;
    b.send(0, r, peer, {Buf::Input, theirs}, 2);
    b.recv(0, r, peer, {Buf::Scratch, 0}, 2);
    b.reduce(0, r, {Buf::Output, mine}, {BufRef{Buf::Input, mine}, BufRef{Buf::Scratch, 0}}, 2);
    b.finalize(0, r, {Buf::Output, mine}, 2);
    b.send(1, r, peer, {Buf::Output, mine}, 2);
    b.recv(1, r, peer, {Buf::Output, theirs}, 2);
    b.need_scratch(r, 2);
  }
  return b.finish();
}

// One step and no transfer: each rank copies its one element of input to its output.
sched::Schedule one_step_copy() {
  sched::ScheduleBuilder b(Collective::AllReduce, "one-step", 2, 1, 1, 1);
  b.copy(0, 0, {Buf::Output, 0}, {Buf::Input, 0}, 1);
  b.copy(0, 1, {Buf::Output, 0}, {Buf::Input, 0}, 1);
  return b.finish();
}

TEST(Engine, WalksStepsTransfersFirstThenLocalOpsWithResolvedPointers) {
  const auto s = two_rank_allreduce();
  // One arena: input at 0, output at 100, scratch at 200 (float32: 4 bytes per element).
  std::vector<char> arena(300);
  RecordingBackend be;
  be.base = arena.data();
  Execution e(s, 1, kernels::DataType::Int32, kernels::ReduceOp::Avg,
              {arena.data(), arena.data() + 100, arena.data() + 200}, be);
  EXPECT_EQ(e.num_steps(), 2);
  EXPECT_TRUE(e.advance_one_step());
  EXPECT_FALSE(e.advance_one_step());
  EXPECT_TRUE(e.done());
  const std::vector<std::string> want = {
      "begin", "send 0 @0 8", "recv 0 @200 8", "end", "reduce @108 @8 @200 2 op4",
      "finalize @108 2 n2", "begin", "send 0 @108 8", "recv 0 @100 8", "end"};
  EXPECT_EQ(be.calls, want);
}

// Floating avg is NCCL's PreMulSum: the input is pre-multiplied once, before step 0 posts
// anything, into the output (same size as the input), and the program then runs in place.
TEST(Engine, FloatingAvgPremultipliesTheInputIntoTheOutputFirst) {
  const auto s = two_rank_allreduce();
  std::vector<char> arena(300);
  RecordingBackend be;
  be.base = arena.data();
  Execution e(s, 1, kernels::DataType::Float32, kernels::ReduceOp::Avg,
              {arena.data(), arena.data() + 100, arena.data() + 200}, be);
  EXPECT_TRUE(e.stages_input());
  e.run();
  const std::vector<std::string> want = {
      "avg_premul @100 @0 4 n2", "begin", "send 0 @100 8", "recv 0 @200 8", "end",
      "reduce @108 @108 @200 2 op4", "finalize @108 2 n2", "begin", "send 0 @108 8",
      "recv 0 @100 8", "end"};
  EXPECT_EQ(be.calls, want);
  // Run again: pre-multiplied again from the user's input.
  be.calls.clear();
  e.restart();
  e.run();
  EXPECT_EQ(be.calls, want);
  // Sum and integer avg read the input as it is.
  EXPECT_FALSE(Execution(s, 1, kernels::DataType::Float32, kernels::ReduceOp::Sum,
                         {arena.data(), arena.data() + 100, arena.data() + 200}, be)
                   .stages_input());
}

// Reduce-scatter's input is larger than its output: the staging area is scratch past the
// program's own, at a 16-byte boundary, counted by scratch_bytes(schedule, rank, type, op).
TEST(Engine, FloatingAvgStagesAReduceScatterInputInScratch) {
  sched::ScheduleBuilder b(Collective::ReduceScatter, "test", 2, 2, 4, 2);
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    b.send(0, r, peer, {Buf::Input, peer * 2}, 2);
    b.recv(0, r, peer, {Buf::Scratch, 0}, 2);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Input, r * 2}, BufRef{Buf::Scratch, 0}}, 2);
    b.need_scratch(r, 3);
  }
  const auto s = b.finish();
  EXPECT_EQ(scratch_bytes(s, 0, kernels::DataType::Float16, kernels::ReduceOp::Sum), 6u);
  EXPECT_EQ(scratch_bytes(s, 0, kernels::DataType::Float16, kernels::ReduceOp::Avg), 16u + 8u);
  EXPECT_EQ(scratch_bytes(s, 0, kernels::DataType::Int32, kernels::ReduceOp::Avg), 12u);
  std::vector<char> arena(300);
  RecordingBackend be;
  be.base = arena.data();
  Execution(s, 0, kernels::DataType::Float16, kernels::ReduceOp::Avg,
            {arena.data(), arena.data() + 100, arena.data() + 200}, be)
      .run();
  const std::vector<std::string> want = {
      "avg_premul @216 @0 4 n2", "begin", "send 1 @220 4", "recv 1 @200 4", "end",
      "reduce @100 @216 @200 2 op4"};
  EXPECT_EQ(be.calls, want);
}

TEST(Engine, SkipsEmptyTransfersButKeepsTheStep) {
  sched::Schedule s;
  s.collective = Collective::AllGather;
  s.nranks = 2;
  s.input_count = s.output_count = 1;
  s.programs.resize(2);
  for (auto& p : s.programs) {
    sched::Op send;
    send.kind = sched::OpKind::Send;
    send.peer = 1;
    send.count = 0;
    p.ops = {send};
    p.step_begin = {0, 1};
  }
  s.programs[1].ops[0].peer = 0;
  RecordingBackend be;
  char buf[8];
  be.base = buf;
  Execution(s, 0, kernels::DataType::Int8, kernels::ReduceOp::Sum, {buf, buf, nullptr}, be).run();
  EXPECT_EQ(be.calls, (std::vector<std::string>{"begin", "end"}));
}

TEST(Engine, InterleavedExecutionsShareOneNestedBatchPerRound) {
  const auto two = two_rank_allreduce();
  const auto one = one_step_copy();
  std::vector<char> arena(600);
  RecordingBackend be;
  be.base = arena.data();
  Execution a(two, 0, kernels::DataType::Float32, kernels::ReduceOp::Sum,
              {arena.data(), arena.data() + 100, arena.data() + 200}, be);
  Execution c(one, 0, kernels::DataType::Int8, kernels::ReduceOp::Sum,
              {arena.data() + 300, arena.data() + 400, nullptr}, be);
  Execution* both[] = {&a, &c};
  run_interleaved(both);
  const std::vector<std::string> want = {
      // round 0: both post, both batches close, then both run local ops
      "begin", "send 1 @8 8", "recv 1 @200 8", "begin", "end", "end",
      "reduce @100 @0 @200 2 op0", "finalize @100 2 n2", "copy @400 @300 1",
      // round 1: only the first is left
      "begin", "send 1 @100 8", "recv 1 @108 8", "end"};
  EXPECT_EQ(be.calls, want);
  EXPECT_TRUE(a.done() && c.done());
}

// Step k is what lies between boundaries k and k + 1 (exec/backend.h): the avg staging
// belongs to step 0, the last step's local ops come before the last boundary.
TEST(Engine, StepBoundariesEncloseEveryStepFromTheAvgStagingToTheLastLocalOp) {
  const auto s = two_rank_allreduce();
  std::vector<char> arena(300);
  RecordingBackend be;
  be.base = arena.data();
  be.record_boundaries = true;
  Execution e(s, 1, kernels::DataType::Float32, kernels::ReduceOp::Avg,
              {arena.data(), arena.data() + 100, arena.data() + 200}, be);
  e.run();
  const std::vector<std::string> want = {
      "| 0", "avg_premul @100 @0 4 n2", "begin", "send 0 @100 8", "recv 0 @200 8", "end",
      "reduce @108 @108 @200 2 op4", "finalize @108 2 n2",
      "| 1", "begin", "send 0 @108 8", "recv 0 @100 8", "end",
      "| 2"};
  EXPECT_EQ(be.calls, want);
  // A restarted run marks its boundaries again, from 0.
  be.calls.clear();
  e.restart();
  e.run();
  EXPECT_EQ(be.calls, want);
}

TEST(Engine, InterleavedExecutionsEachMarkTheirOwnBoundaries) {
  const auto two = two_rank_allreduce();
  const auto one = one_step_copy();
  std::vector<char> arena(600);
  RecordingBackend first, second;
  first.base = second.base = arena.data();
  first.record_boundaries = second.record_boundaries = true;
  Execution a(two, 0, kernels::DataType::Float32, kernels::ReduceOp::Sum,
              {arena.data(), arena.data() + 100, arena.data() + 200}, first);
  Execution c(one, 0, kernels::DataType::Int8, kernels::ReduceOp::Sum,
              {arena.data() + 300, arena.data() + 400, nullptr}, second);
  Execution* both[] = {&a, &c};
  run_interleaved(both);
  EXPECT_EQ(first.calls, (std::vector<std::string>{
                             "| 0", "begin", "send 1 @8 8", "recv 1 @200 8", "end",
                             "reduce @100 @0 @200 2 op0", "finalize @100 2 n2", "| 1", "begin",
                             "send 1 @100 8", "recv 1 @108 8", "end", "| 2"}));
  EXPECT_EQ(second.calls,
            (std::vector<std::string>{"| 0", "begin", "end", "copy @400 @300 1", "| 1"}));
}

// A step run in overlapped rounds ends at its join: the next boundary comes after it, so a
// timer on the user's stream counts the lane's reduces in the step they belong to.
TEST(Engine, AnOverlappedStepsBoundaryFollowsItsJoin) {
  constexpr int64_t kCount = 64 << 10;  // int8: two 32 KiB pieces of a 32 KiB chunk
  sched::ScheduleBuilder b(Collective::AllReduce, "one-step", 2, kCount, kCount, kCount);
  for (int r = 0; r < 2; ++r) {
    b.send(0, r, 1 - r, {Buf::Input, 0}, kCount);
    b.recv(0, r, 1 - r, {Buf::Scratch, 0}, kCount);
    b.reduce(0, r, {Buf::Output, 0}, {BufRef{Buf::Input, 0}, BufRef{Buf::Scratch, 0}}, kCount);
    b.need_scratch(r, kCount);
  }
  const auto s = b.finish();
  std::vector<char> arena(3 * kCount);
  RecordingBackend be;
  be.base = arena.data();
  be.record_boundaries = be.overlaps = true;
  PipelineOptions pipeline;
  pipeline.shape = sched::PipelineShape{32 << 10, 2};
  Execution e(s, 0, kernels::DataType::Int8, kernels::ReduceOp::Sum,
              {arena.data(), arena.data() + kCount, arena.data() + 2 * kCount}, be, pipeline);
  ASSERT_TRUE(e.next_step_overlaps());
  e.run();
  ASSERT_GE(be.calls.size(), 3u);
  EXPECT_EQ(be.calls.front(), "| 0");
  EXPECT_EQ(be.calls[be.calls.size() - 2], "join");
  EXPECT_EQ(be.calls.back(), "| 1");
  EXPECT_EQ(std::count(be.calls.begin(), be.calls.end(), "overlap"), 2) << "two rounds";
}

TEST(Engine, RejectsProgramsThatDoNotFitTheirBuffers) {
  auto s = two_rank_allreduce();
  std::vector<char> arena(300);
  RecordingBackend be;
  const Buffers bufs{arena.data(), arena.data() + 100, arena.data() + 200};
  auto make = [&](const sched::Schedule& sch, int rank) {
    Execution(sch, rank, kernels::DataType::Float32, kernels::ReduceOp::Sum, bufs, be);
  };
  EXPECT_NO_THROW(make(s, 0));
  EXPECT_THROW(make(s, 2), std::invalid_argument);
  EXPECT_THROW(make(s, -1), std::invalid_argument);

  auto out_of_range = s;
  out_of_range.programs[0].ops[0].srcs[0].offset = 3;  // [3, 5) of a 4-element input
  try {
    make(out_of_range, 0);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 step 0 op 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input range [3, 5)"), std::string::npos) << e.what();
  }
  auto bad_peer = s;
  bad_peer.programs[0].ops[0].peer = 0;  // itself
  EXPECT_THROW(make(bad_peer, 0), std::invalid_argument);
  auto writes_input = s;
  writes_input.programs[0].ops[1].dst = {Buf::Input, 0};
  EXPECT_THROW(make(writes_input, 0), std::invalid_argument);
  EXPECT_THROW(Execution(s, 0, kernels::DataType(42), kernels::ReduceOp::Sum, bufs, be),
               std::invalid_argument);
  EXPECT_THROW(Execution(s, 0, kernels::DataType::Float32, kernels::ReduceOp(9), bufs, be),
               std::invalid_argument);
  EXPECT_THROW(Execution(s, 0, kernels::DataType::Float32, kernels::ReduceOp::Sum,
                         {arena.data(), arena.data(), nullptr}, be),
               std::invalid_argument);  // the program uses scratch
}

// A receive overlapping another transfer of its step in the same buffer, or a local op's
// source overlapping its destination without being it, is refused before anything runs: a
// plan may run unverified (no verifier in the build, the acceptance run), and pieces and
// transfers run concurrently. Buffers the caller made alias (in place, or a layout NCCL
// leaves undefined) are not the program's fault: the verifier checks the in-place layouts.
TEST(Engine, RejectsStepsWhoseTransfersOrLocalOpsOverlap) {
  std::vector<char> arena(300);
  RecordingBackend be;
  const Buffers bufs{arena.data(), arena.data() + 100, arena.data() + 200};
  const auto refused = [&](const sched::Schedule& sch, const char* why) {
    try {
      Execution(sch, 0, kernels::DataType::Float32, kernels::ReduceOp::Sum, bufs, be);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  auto receive_over_send = two_rank_allreduce();
  receive_over_send.programs[0].ops[5].dst = {Buf::Output, 1};  // step 1 receives [1, 3) while sending [0, 2)
  refused(receive_over_send, "overlaps a receive of the same step");
  sched::ScheduleBuilder copy(Collective::AllReduce, "shifted-copy", 2, 12, 12, 12);
  copy.copy(0, 0, {Buf::Output, 4}, {Buf::Output, 0}, 8);
  copy.copy(0, 1, {Buf::Output, 0}, {Buf::Input, 0}, 12);
  refused(copy.finish(), "a source overlaps its destination without being it");
  // In place runs: the caller's aliased buffers are checked by the verifier, not refused here.
  EXPECT_NO_THROW(Execution(two_rank_allreduce(), 0, kernels::DataType::Float32, kernels::ReduceOp::Sum,
                            {arena.data(), arena.data(), arena.data() + 200}, be));
}

TEST(Engine, PhasesMustRunInOrder) {
  const auto s = two_rank_allreduce();
  std::vector<char> arena(300);
  RecordingBackend be;
  Execution e(s, 0, kernels::DataType::Float32, kernels::ReduceOp::Sum,
              {arena.data(), arena.data() + 100, arena.data() + 200}, be);
  EXPECT_THROW(e.run_local_ops(), std::logic_error);
  EXPECT_THROW(e.complete_transfers(), std::logic_error);
  e.post_transfers();
  EXPECT_THROW(e.post_transfers(), std::logic_error);
  e.complete_transfers();
  e.run_local_ops();
  e.run();
  EXPECT_THROW(e.post_transfers(), std::logic_error);
  e.restart();
  EXPECT_EQ(e.next_step(), 0);
  e.post_transfers();
  EXPECT_THROW(e.restart(), std::logic_error);
}

}  // namespace
}  // namespace topocoll::exec

namespace topocoll::exec {
namespace {

// A transport whose first send throws (a peer gone while the step is posted); counts waits.
class FailingOnceTransport : public HostTransport {
 public:
  int rank() const override { return 0; }
  int nranks() const override { return 2; }
  void post_send(int, const void*, std::size_t) override {
    if (!failed_) {
      failed_ = true;
      throw BackendError("peer 1 is gone");
    }
  }
  void post_recv(int, void*, std::size_t) override {}
  void wait_all() override { ++waits; }
  int waits = 0;

 private:
  bool failed_ = false;
};

// A post that throws ends the open batch: the backend's next batch still waits for its
// transfers at its end (a batch left open made every later end skip the wait, and the local
// ops read receives not yet complete).
TEST(HostBackendBatches, APostThatThrowsLeavesNoBatchOpen) {
  FailingOnceTransport transport;
  HostBackend backend(transport);
  char buffer[8] = {};
  backend.begin_transfers();
  EXPECT_THROW(backend.post_send(1, buffer, sizeof buffer), BackendError);
  backend.begin_transfers();
  backend.post_send(1, buffer, sizeof buffer);
  backend.end_transfers();
  EXPECT_EQ(transport.waits, 1) << "the batch after the failed one did not wait for its transfers";
  EXPECT_THROW(backend.end_transfers(), BackendError) << "no batch is open any more";
}

}  // namespace
}  // namespace topocoll::exec
