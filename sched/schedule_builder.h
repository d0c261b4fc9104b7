// ScheduleBuilder: appends ops to the per-rank programs of a Schedule, step by step.
// Every op names its global step; a rank's ops must be added in step order, but ranks (and
// the concurrent sub-collectives of a hierarchical schedule) advance independently. finish()
// gives every rank the same number of steps (idle ranks get empty ones). Ops of zero
// elements are dropped, on both sides of a transfer alike, so uneven splits with empty
// blocks need no special cases in the generators.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sched/schedule.h"

namespace topocoll::sched {

// Block b of `parts` blocks of n elements: the first n % parts blocks get one more element.
struct BlockSplit {
  int64_t n = 0;
  int64_t parts = 1;
  int64_t begin(int64_t b) const { return b * (n / parts) + (b < n % parts ? b : n % parts); }
  int64_t size(int64_t b) const { return n / parts + (b < n % parts ? 1 : 0); }
  int64_t end(int64_t b) const { return begin(b) + size(b); }
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
  // equal srcs[0] only.
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
