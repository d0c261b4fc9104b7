// Ring collectives (the NCCL-like baseline): position i sends to position i+1.
// `order` maps ring position -> communicator rank (identity when empty), so a placement can
// hand in a rank-order ring or a topology-aware one.
#pragma once

#include <cstdint>
#include <span>

#include "sched/schedule.h"
#include "sched/schedule_builder.h"

namespace topocoll::sched {

// Allreduce: reduce-scatter (P-1 steps) then allgather (P-1 steps) over P uneven blocks.
// Each block is reduced along one chain and finalized once by its last rank, then passed
// on: every rank ends with identical bits.
Schedule ring_allreduce(int nranks, int64_t count, std::span<const int> order = {});
// Reduce-scatter: rank r ends with block r of the input (count elements each).
Schedule ring_reduce_scatter(int nranks, int64_t count, std::span<const int> order = {});
// Allgather: rank r's count input elements land at Output[r*count] on every rank.
Schedule ring_allgather(int nranks, int64_t count, std::span<const int> order = {});
// The ring's schedule for any collective: one of the three above, or for all-to-all the
// store-and-forward ring of sched/all_to_all.h.
Schedule ring_schedule(Collective collective, int nranks, int64_t count, std::span<const int> order = {});

// Building block for composed schedules: a ring allreduce among `members` (ring order) of
// Output[base, base+n), starting at step `first_step`. Before it, each member's value lives
// in `first_src` (Input or Output) at [base, base+n); after it, in Output. Finalizes when
// `finalize`. Uses Scratch[scratch_base, +block). Returns the number of steps used.
int append_ring_allreduce(ScheduleBuilder& b, int first_step, std::span<const int> members,
                          Buf first_src, int64_t base, int64_t n, bool finalize,
                          int64_t scratch_base = 0);
// Its two halves. After the reduce-scatter (P-1 steps; 1 step for a single member), the
// member at ring position p holds block (p+1) mod P (BlockSplit{n, P}) of the range in
// Output, finalized when asked; the allgather (P-1 steps) spreads every block back.
int append_ring_reduce_scatter(ScheduleBuilder& b, int first_step, std::span<const int> members,
                               Buf first_src, int64_t base, int64_t n, bool finalize,
                               int64_t scratch_base = 0);
int append_ring_allgather(ScheduleBuilder& b, int first_step, std::span<const int> members,
                          int64_t base, int64_t n);

}  // namespace topocoll::sched
