// The verifier must catch every class of bug: each test breaks a correct schedule by hand.
#include "sched/verifier.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/halving_doubling.h"
#include "sched/nap_log_step.h"
#include "sched/ring.h"
#include "sched/schedule_builder.h"

namespace topocoll::sched {
namespace {

// Index of the first op of `kind` in rank r's step s (fails the test when absent).
size_t find_op(const Schedule& s, int r, int step, OpKind kind) {
  const RankProgram& p = s.programs[size_t(r)];
  for (uint32_t i = p.step_begin[size_t(step)]; i < p.step_begin[size_t(step) + 1]; ++i)
    if (p.ops[i].kind == kind) return i;
  ADD_FAILURE() << "no " << to_string(kind) << " at rank " << r << " step " << step;
  return 0;
}

void erase_op(Schedule& s, int r, size_t i) {
  RankProgram& p = s.programs[size_t(r)];
  p.ops.erase(p.ops.begin() + int64_t(i));
  for (uint32_t& b : p.step_begin)
    if (b > i) --b;
}

void expect_error(const Schedule& s, const std::string& needle, Aliasing a = Aliasing::OutOfPlace) {
  VerifyOptions o;
  o.aliasing = a;
  VerifyResult r = verify(s, o);
  EXPECT_FALSE(r.ok) << "expected an error containing '" << needle << "'";
  EXPECT_NE(r.error.find(needle), std::string::npos) << r.error;
}

TEST(Verifier, AcceptsTheUnbrokenSchedules) {
  for (int P : {1, 2, 3, 5, 8}) {
    for (const Schedule& s : {ring_allreduce(P, 37), hd_allreduce(P, 37)}) {
      VerifyResult r = verify(s);
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_TRUE(r.bitwise_identical);
      EXPECT_EQ(r.stats.steps, s.num_steps());
    }
  }
}

TEST(Verifier, CatchesAMissingSend) {
  Schedule s = ring_allreduce(4, 40);
  erase_op(s, 2, find_op(s, 2, 1, OpKind::Send));
  expect_error(s, "rank 3 step 1");
  expect_error(s, "no matching send from rank 2");
}

TEST(Verifier, CatchesAMissingRecv) {
  Schedule s = ring_allreduce(4, 40);
  erase_op(s, 3, find_op(s, 3, 1, OpKind::Recv));
  expect_error(s, "posts no matching recv");
}

TEST(Verifier, CatchesACountMismatch) {
  Schedule s = ring_allreduce(4, 40);
  s.programs[1].ops[find_op(s, 1, 0, OpKind::Send)].count -= 1;
  expect_error(s, "carries 9 elements");
}

TEST(Verifier, CatchesAWrongPeer) {
  Schedule s = ring_allreduce(4, 40);
  s.programs[0].ops[find_op(s, 0, 0, OpKind::Send)].peer = 2;
  expect_error(s, "no matching");
}

TEST(Verifier, CatchesADoubleCountedContribution) {
  // Rank 1 adds its own input twice instead of the received block.
  Schedule s = ring_allreduce(3, 30);
  Op& red = s.programs[1].ops[find_op(s, 1, 0, OpKind::Reduce)];
  red.srcs[1] = red.srcs[0];
  expect_error(s, "finalizes an incomplete value");
  expect_error(s, "rank 1's 2 times");
}

TEST(Verifier, CatchesAMissingFinalize) {
  Schedule s = hd_allreduce(4, 40);
  erase_op(s, 2, find_op(s, 2, 1, OpKind::Finalize));
  expect_error(s, "is not finalized");
}

TEST(Verifier, CatchesADoubleFinalize) {
  Schedule s = ring_allreduce(4, 40);
  RankProgram& p = s.programs[0];
  const size_t f = find_op(s, 0, 2, OpKind::Finalize);
  p.ops.insert(p.ops.begin() + int64_t(f), p.ops[f]);
  for (size_t k = 3; k < p.step_begin.size(); ++k) ++p.step_begin[k];
  expect_error(s, "finalized twice");
}

TEST(Verifier, CatchesAFinalizeOfAPartialSum) {
  Schedule s = ring_allreduce(4, 40);
  RankProgram& p = s.programs[0];
  const size_t red = find_op(s, 0, 0, OpKind::Reduce);
  Op fin;
  fin.kind = OpKind::Finalize;
  fin.dst = p.ops[red].dst;
  fin.count = p.ops[red].count;
  p.ops.insert(p.ops.begin() + int64_t(red) + 1, fin);
  for (size_t k = 1; k < p.step_begin.size(); ++k) ++p.step_begin[k];
  expect_error(s, "finalizes an incomplete value");
  expect_error(s, "holds 2 of 4 contributions");
}

TEST(Verifier, CatchesARecvOverlappingASendOfTheSameStep) {
  Schedule s = ring_allreduce(4, 40);
  Op& recv = s.programs[2].ops[find_op(s, 2, 5, OpKind::Recv)];  // allgather step
  const Op& send = s.programs[2].ops[find_op(s, 2, 5, OpKind::Send)];
  recv.dst = send.src();
  expect_error(s, "overlaps");
}

TEST(Verifier, CatchesAnUninitialisedScratchRead) {
  Schedule s = ring_allreduce(4, 40);
  Op& red = s.programs[0].ops[find_op(s, 0, 0, OpKind::Reduce)];
  red.srcs[1].offset += 2;  // inside scratch, past what the recv wrote
  s.programs[0].scratch_elems += 2;
  expect_error(s, "reads uninitialised");
}

TEST(Verifier, CatchesOutOfBoundsRanges) {
  Schedule s = ring_allreduce(4, 40);
  s.programs[3].ops[find_op(s, 3, 0, OpKind::Recv)].dst.offset = 5;  // scratch holds 10
  expect_error(s, "out of bounds");
  Schedule t = ring_allreduce(4, 40);
  t.programs[3].ops[find_op(t, 3, 0, OpKind::Send)].srcs[0].offset = 35;
  expect_error(t, "out of bounds");
}

TEST(Verifier, CatchesWritesToInput) {
  Schedule s = ring_allreduce(4, 40);
  s.programs[1].ops[find_op(s, 1, 0, OpKind::Reduce)].dst.buf = Buf::Input;
  expect_error(s, "writes Input");
}

TEST(Verifier, CatchesMisalignedReductions) {
  Schedule s = ring_allreduce(4, 40);
  Op& red = s.programs[1].ops[find_op(s, 1, 0, OpKind::Reduce)];
  red.srcs[0].offset = (red.srcs[0].offset + 10) % 40;
  expect_error(s, "combines element");
}

TEST(Verifier, CatchesInPlaceHazards) {
  // Receiving the partner's vector straight into Output is fine with separate buffers, but
  // in place Output is the Input this step still sends.
  ScheduleBuilder b(Collective::AllReduce, "test", 2, 4, 4, 4);
  const BufRef in{Buf::Input, 0}, out{Buf::Output, 0};
  for (int q = 0; q < 2; ++q) {
    b.send(0, q, 1 - q, in, 4);
    b.recv(0, q, 1 - q, out, 4);
    b.reduce(0, q, out, {out, in}, 4);  // partner + own: each rank its own order
    b.finalize(0, q, out, 4);
  }
  b.set_bitwise_identical(false);
  const Schedule s = b.finish();
  const VerifyResult r = verify(s);
  EXPECT_TRUE(r.ok) << r.error;
  expect_error(s, "overlaps", Aliasing::InPlace);
  // What a plan passes before it is served checks both.
  const VerifyResult served = verify_as_served(s);
  EXPECT_FALSE(served.ok);
  EXPECT_EQ(served.error.rfind("in place: ", 0), 0u) << served.error;
  EXPECT_NE(served.error.find("overlaps"), std::string::npos) << served.error;
  EXPECT_TRUE(verify_as_served(ring_allreduce(4, 40)).ok);
}

TEST(Verifier, AllowsAReduceIntoAnyOneSourceButNotAPartOfOne) {
  // Two ranks reduce x0 + x1 in one order; rank 1 writes the sum over its second source.
  auto pair = [](int64_t rank1_dst_offset) {
    ScheduleBuilder b(Collective::AllReduce, "test", 2, 4, 4, 4);
    const BufRef in{Buf::Input, 0}, out{Buf::Output, 0}, tmp{Buf::Scratch, 0};
    for (int q = 0; q < 2; ++q) {
      b.send(0, q, 1 - q, in, 4);
      b.recv(0, q, 1 - q, q == 0 ? tmp : out, 4);
      b.need_scratch(q, 8);
    }
    b.reduce(0, 0, out, {in, tmp}, 4);
    b.copy(0, 1, {Buf::Scratch, 2}, in, 4);                       // x1 at Scratch[2, 6)
    b.reduce(0, 1, {Buf::Scratch, 2 + rank1_dst_offset}, {out, {Buf::Scratch, 2}}, 4);
    b.copy(0, 1, out, {Buf::Scratch, 2 + rank1_dst_offset}, 4);
    for (int q = 0; q < 2; ++q) b.finalize(0, q, out, 4);
    return b.finish();
  };
  const VerifyResult exact = verify(pair(0));
  EXPECT_TRUE(exact.ok) << exact.error;
  EXPECT_TRUE(exact.bitwise_identical) << exact.identity_note;
  expect_error(pair(1), "source 1 partly overlaps the destination");
}

TEST(ScheduleBuilder, AChainedReduceMayAliasItsFirstSourceOnly) {
  // More than kMaxReduceInputs sources are chained (dst = dst op the next ones): a later
  // source equal to dst would be read after the chain's first op overwrote it.
  ScheduleBuilder b(Collective::AllReduce, "test", 1, 4, 4, 4);
  std::vector<BufRef> srcs;
  for (int i = 0; i <= kMaxReduceInputs; ++i) srcs.push_back({Buf::Scratch, 4 * int64_t(i)});
  EXPECT_NO_THROW(b.reduce(0, 0, srcs[0], srcs, 4));
  EXPECT_THROW(b.reduce(0, 0, srcs[1], srcs, 4), std::logic_error);
  const std::vector<BufRef> few(srcs.begin(), srcs.begin() + kMaxReduceInputs);
  EXPECT_NO_THROW(b.reduce(0, 0, few.back(), few, 4));
}

TEST(Verifier, CatchesWrongAllgatherPlacement) {
  Schedule s = ring_allgather(4, 10);
  s.programs[1].ops[find_op(s, 1, 1, OpKind::Recv)].dst.offset = 20;  // should be 30
  expect_error(s, "reads uninitialised element 30 of output");
}

TEST(Verifier, CatchesShapeErrors) {
  Schedule s = ring_allreduce(4, 40);
  s.programs[2].step_begin.pop_back();
  expect_error(s, "rank 2 has 5 steps");
  Schedule t = ring_allreduce(4, 40);
  t.input_count = 41;
  expect_error(t, "needs input/output counts 40/40");
  Schedule u = ring_reduce_scatter(4, 10);
  u.collective = Collective::AllToAll;
  u.output_count = 40;
  expect_error(u, "in-place all-to-all", Aliasing::InPlace);
}

TEST(Verifier, SaysTheShiftedLogStepAllreduceIsNotBitwiseIdentical) {
  for (int N : {4, 5, 8, 16, 32}) {
    Schedule s = log_step_allreduce(N, 100);
    EXPECT_FALSE(s.claims_bitwise_identical);
    VerifyResult r = verify(s);
    EXPECT_TRUE(r.ok) << N << ": " << r.error;  // the sums are right
    EXPECT_FALSE(r.bitwise_identical) << N;
    EXPECT_NE(r.identity_note.find("different orders"), std::string::npos) << r.identity_note;
    // Claiming it anyway is an error.
    s.claims_bitwise_identical = true;
    VerifyResult c = verify(s);
    EXPECT_FALSE(c.ok);
    EXPECT_NE(c.error.find("claims bitwise-identical"), std::string::npos) << c.error;
  }
  // Two core ranks add the same two operands in one order: identical; N = 3 folds into 2.
  for (int N : {2, 3}) {
    VerifyResult r = verify(log_step_allreduce(N, 10));
    EXPECT_TRUE(r.ok && r.bitwise_identical) << N << r.error;
  }
}

TEST(Verifier, TreatsReductionsAsNeitherCommutativeNorAssociative) {
  // Three ranks each send their whole vector to rank 0 and rank 1; rank 0 computes
  // (x0+x1)+x2, rank 1 computes x0+(x1+x2): same contributions, different bits.
  ScheduleBuilder b(Collective::AllReduce, "test", 3, 4, 4, 4);
  const BufRef in{Buf::Input, 0}, out{Buf::Output, 0};
  const BufRef s0{Buf::Scratch, 0}, s1{Buf::Scratch, 4};
  b.send(0, 0, 1, in, 4);
  b.send(0, 1, 0, in, 4);
  b.send(0, 2, 0, in, 4);
  b.send(0, 2, 1, in, 4);
  b.recv(0, 0, 1, s0, 4);
  b.recv(0, 0, 2, s1, 4);
  b.reduce(0, 0, out, {in, s0, s1}, 4);  // (x0 + x1) + x2
  b.finalize(0, 0, out, 4);
  b.recv(0, 1, 0, s0, 4);
  b.recv(0, 1, 2, s1, 4);
  b.reduce(0, 1, s1, {s1, in}, 4);        // x2 + x1
  b.reduce(0, 1, out, {s0, s1}, 4);       // x0 + (x2 + x1)
  b.finalize(0, 1, out, 4);
  b.send(1, 0, 2, out, 4);
  b.recv(1, 2, 0, out, 4);
  for (int r = 0; r < 3; ++r) b.need_scratch(r, 8);
  b.set_bitwise_identical(false);
  VerifyResult r = verify(b.finish());
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.bitwise_identical);
  EXPECT_NE(r.identity_note.find("rank 0 and rank 1"), std::string::npos) << r.identity_note;

  // x0 + x1 on both ranks: the same bits.
  auto pair = [&](bool same_order) {
    ScheduleBuilder c(Collective::AllReduce, "test", 2, 4, 4, 4);
    for (int q = 0; q < 2; ++q) {
      c.send(0, q, 1 - q, in, 4);
      c.recv(0, q, 1 - q, s0, 4);
      const bool own_first = q == 0 || !same_order;
      c.reduce(0, q, out, {own_first ? in : s0, own_first ? s0 : in}, 4);
      c.finalize(0, q, out, 4);
      c.need_scratch(q, 4);
    }
    c.set_bitwise_identical(same_order);
    return verify(c.finish());
  };
  VerifyResult rc = pair(true);
  EXPECT_TRUE(rc.ok) << rc.error;
  EXPECT_TRUE(rc.bitwise_identical);
  // x0 + x1 on one rank, x1 + x0 on the other: the same value, but not the same bits when
  // both are NaN (x86 keeps the first operand's payload, min/max the first NaN).
  VerifyResult rd = pair(false);
  EXPECT_TRUE(rd.ok) << rd.error;
  EXPECT_FALSE(rd.bitwise_identical);
  EXPECT_NE(rd.identity_note.find("different orders"), std::string::npos) << rd.identity_note;
}

TEST(Verifier, ReportsStatistics) {
  Schedule s = hd_allreduce(8, 800);
  VerifyOptions o;
  o.element_bytes = 8;
  VerifyResult r = verify(s, o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.steps, 6);
  EXPECT_EQ(r.stats.max_send_elems_per_rank, 2 * 7 * 100);  // 2(P-1)/P of the vector
  EXPECT_EQ(r.stats.max_send_bytes_per_rank, 8 * 2 * 7 * 100);
  EXPECT_TRUE(r.stats.exact_contributions);
  // A tiny budget falls back to the count+hash check, and says so.
  o.exact_check_budget = 0;
  VerifyResult h = verify(s, o);
  EXPECT_TRUE(h.ok) << h.error;
  EXPECT_FALSE(h.stats.exact_contributions);
}

}  // namespace
}  // namespace topocoll::sched
