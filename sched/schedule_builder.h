// ScheduleBuilder: appends ops to the per-rank programs of a Schedule, step by step.
// Every op names its global step; a rank's ops must be added in step order, but ranks (and
// the concurrent sub-collectives of a hierarchical schedule) advance independently. finish()
// gives every rank the same number of steps (idle ranks get empty ones). Ops of zero
// elements are dropped, on both sides of a transfer alike, so uneven splits with empty
// blocks need no special cases in the generators.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sched/schedule.h"

namespace topocoll::sched {

// Split points are multiples of this many elements for the schedules generated on the
// calling thread: make_plan (sched/plan.h) sets 16 bytes' worth while it plans, so every
// block but the last starts 16-byte aligned (relative to the buffer) and the reduce kernels
// keep their 16-byte vector path (kernels/thread_loops.h) instead of one element per
// thread. 1 (plain even split) unless a ScopedSplitAlignment is active.
int64_t split_alignment();

class ScopedSplitAlignment {
 public:
  explicit ScopedSplitAlignment(int64_t elements);
  ~ScopedSplitAlignment();
  ScopedSplitAlignment(const ScopedSplitAlignment&) = delete;
  ScopedSplitAlignment& operator=(const ScopedSplitAlignment&) = delete;

 private:
  int64_t previous_;
};

// Block b of `parts` blocks of n elements, in units of `align` elements (the last unit may
// be short): the first (units % parts) blocks get one more unit. With align 1, the first
// n % parts blocks get one more element. Block 0 is always a largest one.
struct BlockSplit {
  int64_t n = 0;
  int64_t parts = 1;
  int64_t align = split_alignment();
  int64_t units() const { return (n + align - 1) / align; }
  int64_t unit_begin(int64_t b) const {
    const int64_t u = units();
    return b * (u / parts) + (b < u % parts ? b : u % parts);
  }
  int64_t begin(int64_t b) const { return std::min(n, unit_begin(b) * align); }
  int64_t end(int64_t b) const { return std::min(n, unit_begin(b + 1) * align); }
  int64_t size(int64_t b) const { return end(b) - begin(b); }
  int64_t max_size() const { return size(0); }
};

// The position -> communicator rank map every generator takes: identity when `order` is
// empty; otherwise it must be a permutation of 0..nranks-1 (std::invalid_argument if not).
std::vector<int> resolve_order(int nranks, std::span<const int> order);

class ScheduleBuilder {
 public:
  // input/output counts are per rank, in elements; ops_per_rank_hint reserves storage.
  ScheduleBuilder(Collective collective, std::string algo, int nranks, int64_t count,
                  int64_t input_count, int64_t output_count, int64_t ops_per_rank_hint = 0);

  int nranks() const { return int(schedule_.programs.size()); }
  // Number of steps any rank has reached so far.
  int steps() const { return steps_; }

  void send(int step, int rank, int peer, BufRef src, int64_t n);
  void recv(int step, int rank, int peer, BufRef dst, int64_t n);
  // dst = srcs[0] op srcs[1] op ... left to right. More than kMaxReduceInputs sources are
  // chained (dst = dst op the next ones), which keeps the left-to-right order. dst may
  // equal any one source; with more than kMaxReduceInputs sources, srcs[0] only (a chain's
  // later op would read the partial result in place of the source).
  void reduce(int step, int rank, BufRef dst, std::span<const BufRef> srcs, int64_t n);
  void reduce(int step, int rank, BufRef dst, std::initializer_list<BufRef> srcs, int64_t n) {
    reduce(step, rank, dst, std::span<const BufRef>(srcs.begin(), srcs.size()), n);
  }
  void copy(int step, int rank, BufRef dst, BufRef src, int64_t n);
  void finalize(int step, int rank, BufRef dst, int64_t n);
  // Makes sure `step` exists (for ranks whose only work there has zero elements).
  void touch(int step);
  // A reduction over one rank: its own values from `src` at `base` are the result, moved
  // into Output at `base` unless already there and finalized once when asked. One step.
  void single_rank_result(int step, int rank, Buf src, int64_t base, int64_t n, bool finalize);
  // Scratch of `rank` grows to at least `elems`.
  void need_scratch(int rank, int64_t elems);

  void set_bitwise_identical(bool claims) { schedule_.claims_bitwise_identical = claims; }
  Schedule finish();

 private:
  void push(int step, int rank, const Op& op);
  Schedule schedule_;
  int steps_ = 0;
};

}  // namespace topocoll::sched
