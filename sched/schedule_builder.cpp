#include "sched/schedule_builder.h"

#include <cstdint>
#include <stdexcept>
#include <utility>

namespace topocoll::sched {
namespace {
thread_local int64_t current_split_alignment = 1;
}  // namespace

int64_t split_alignment() { return current_split_alignment; }

ScopedSplitAlignment::ScopedSplitAlignment(int64_t elements) : previous_(current_split_alignment) {
  current_split_alignment = elements > 1 ? elements : 1;
}

ScopedSplitAlignment::~ScopedSplitAlignment() { current_split_alignment = previous_; }

std::vector<int> resolve_order(int nranks, std::span<const int> order) {
  std::vector<int> out(size_t(nranks > 0 ? nranks : 0));
  if (order.empty()) {
    for (int i = 0; i < nranks; ++i) out[size_t(i)] = i;
    return out;
  }
  if (int64_t(order.size()) != nranks)
    throw std::invalid_argument("rank order has " + std::to_string(order.size()) +
                                " entries for " + std::to_string(nranks) + " ranks");
  std::vector<char> seen(out.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    int r = order[i];
    if (r < 0 || r >= nranks)
      throw std::invalid_argument("rank order position " + std::to_string(i) + " names rank " +
                                  std::to_string(r) + ", outside 0.." +
                                  std::to_string(nranks - 1));
    if (seen[size_t(r)])
      throw std::invalid_argument("rank order names rank " + std::to_string(r) + " twice");
    seen[size_t(r)] = 1;
    out[i] = r;
  }
  return out;
}

ScheduleBuilder::ScheduleBuilder(Collective collective, std::string algo, int nranks,
                                 int64_t count, int64_t input_count, int64_t output_count,
                                 int64_t ops_per_rank_hint) {
  if (nranks < 1) throw std::invalid_argument("schedule needs nranks >= 1");
  if (count < 0) throw std::invalid_argument("schedule needs count >= 0");
  schedule_.collective = collective;
  schedule_.algo = std::move(algo);
  schedule_.nranks = nranks;
  schedule_.count = count;
  schedule_.input_count = input_count;
  schedule_.output_count = output_count;
  schedule_.programs.resize(size_t(nranks));
  for (RankProgram& p : schedule_.programs) {
    if (ops_per_rank_hint > 0) p.ops.reserve(size_t(ops_per_rank_hint));
    p.step_begin.push_back(0);
  }
}

void ScheduleBuilder::touch(int step) {
  if (step + 1 > steps_) steps_ = step + 1;
}

void ScheduleBuilder::single_rank_result(int step, int rank, Buf src, int64_t base, int64_t n,
                                         bool finalize) {
  if (src != Buf::Output) copy(step, rank, {Buf::Output, base}, {src, base}, n);
  if (finalize) this->finalize(step, rank, {Buf::Output, base}, n);
  touch(step);
}

void ScheduleBuilder::push(int step, int rank, const Op& op) {
  RankProgram& p = schedule_.programs[size_t(rank)];
  int have = int(p.step_begin.size()) - 1;
  if (step < have - 1)
    throw std::logic_error("ScheduleBuilder: rank " + std::to_string(rank) + " op for step " +
                           std::to_string(step) + " after step " + std::to_string(have - 1));
  // step_begin holds num_steps+1 entries; steps opened now start where the ops end.
  while (have <= step) {
    p.step_begin.push_back(uint32_t(p.ops.size()));
    ++have;
  }
  if (p.ops.size() >= UINT32_MAX)  // step_begin indexes ops with 32 bits
    throw std::length_error("schedule: more than 2^32-1 ops for rank " + std::to_string(rank));
  p.ops.push_back(op);
  p.step_begin.back() = uint32_t(p.ops.size());
  touch(step);
}

void ScheduleBuilder::send(int step, int rank, int peer, BufRef src, int64_t n) {
  if (n <= 0) return touch(step);
  Op op;
  op.kind = OpKind::Send;
  op.peer = peer;
  op.count = n;
  op.nsrc = 1;
  op.srcs[0] = src;
  push(step, rank, op);
}

void ScheduleBuilder::recv(int step, int rank, int peer, BufRef dst, int64_t n) {
  if (n <= 0) return touch(step);
  Op op;
  op.kind = OpKind::Recv;
  op.peer = peer;
  op.count = n;
  op.dst = dst;
  push(step, rank, op);
}

void ScheduleBuilder::reduce(int step, int rank, BufRef dst, std::span<const BufRef> srcs,
                             int64_t n) {
  if (n <= 0) return touch(step);
  if (srcs.size() < 2) throw std::logic_error("ScheduleBuilder: reduce needs >= 2 sources");
  if (srcs.size() > size_t(kMaxReduceInputs))
    for (size_t i = 1; i < srcs.size(); ++i)
      if (srcs[i].buf == dst.buf && srcs[i].offset == dst.offset)
        throw std::logic_error("ScheduleBuilder: a chained reduce's destination may alias its first source only");
  size_t next = 0;
  bool first = true;
  while (next < srcs.size()) {
    Op op;
    op.kind = OpKind::Reduce;
    op.count = n;
    op.dst = dst;
    int k = 0;
    if (!first) op.srcs[size_t(k++)] = dst;  // chain: dst = dst op the next sources
    while (k < kMaxReduceInputs && next < srcs.size()) op.srcs[size_t(k++)] = srcs[next++];
    op.nsrc = uint8_t(k);
    push(step, rank, op);
    first = false;
  }
}

void ScheduleBuilder::copy(int step, int rank, BufRef dst, BufRef src, int64_t n) {
  if (n <= 0) return touch(step);
  Op op;
  op.kind = OpKind::Copy;
  op.count = n;
  op.dst = dst;
  op.nsrc = 1;
  op.srcs[0] = src;
  push(step, rank, op);
}

void ScheduleBuilder::finalize(int step, int rank, BufRef dst, int64_t n) {
  if (n <= 0) return touch(step);
  Op op;
  op.kind = OpKind::Finalize;
  op.count = n;
  op.dst = dst;
  push(step, rank, op);
}

void ScheduleBuilder::need_scratch(int rank, int64_t elems) {
  int64_t& s = schedule_.programs[size_t(rank)].scratch_elems;
  if (elems > s) s = elems;
}

Schedule ScheduleBuilder::finish() {
  for (RankProgram& p : schedule_.programs)
    while (int(p.step_begin.size()) - 1 < steps_) p.step_begin.push_back(uint32_t(p.ops.size()));
  Schedule out = std::move(schedule_);
  schedule_ = Schedule{};
  steps_ = 0;
  return out;
}

}  // namespace topocoll::sched
