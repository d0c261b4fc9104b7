// Halving-doubling (Rabenseifner; Thakur, Rabenseifner & Gropp 2005) and its halves.
//
// `order` maps virtual rank -> communicator rank (identity when empty): this is the HD
// order of sched/hd_order.h. Let q be the largest power of two <= P. Virtual ranks
// 0..q-1 form the core; at halving step s the core pairs v with v XOR 2^s, distance 1
// first (the largest transfer, half the vector, goes to the nearest partner, which a
// placement puts on the host fabric). Doubling mirrors it (distance q/2 first, distance 1
// last).
//
// Non-power-of-two P: MPICH's pre/post step. Virtual rank q+e (e < P-q) folds into core
// rank e: it sends its whole vector to e before the core starts and gets the result back
// after. Chosen over Gloo's binary blocks because every core step stays one pairwise
// exchange of all core ranks with partner v XOR 2^s, so the placement's closed form and
// its contention analysis hold unchanged, and the result is still reduced in one order
// (bitwise identical everywhere); the price is two whole-vector steps for 2(P-q) ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sched/schedule.h"
#include "sched/schedule_builder.h"

namespace topocoll::sched {

// Allreduce: reduce-scatter by recursive halving then allgather by recursive doubling.
// Core rank v ends the halving with vector block bitrev(v) (q uneven blocks), which keeps
// every transferred range contiguous with distance 1 first.
Schedule hd_allreduce(int nranks, int64_t count, std::span<const int> order = {});

// Reduce-scatter alone (rank r gets input block r) and allgather alone. Their blocks are
// fixed by communicator rank, so these run distance q/2 first in halving (distance 1
// first in doubling), MPICH's convention, which keeps ranges contiguous when the order is
// the identity. Each step still pairs v with v XOR 2^s; only the step order differs from
// the allreduce, and per-step contention depends on the pairing, not on the order. With a
// scrambling order (a placement's), the blocks a step moves are scattered over the
// comm-rank layout and every block is its own op: about 3P ops per rank, P^2 in all,
// which is fine for thousands of ranks; the allreduce never has this cost.
Schedule hd_reduce_scatter(int nranks, int64_t count, std::span<const int> order = {});
Schedule hd_allgather(int nranks, int64_t count, std::span<const int> order = {});

// An allreduce order made for the reduce-scatter and allgather alone, which run distance
// q/2 first: virtual rank v takes the rank of v with its log2(P) bits reversed, so their
// step s pairs the ranks the allreduce's halving step s pairs (the same per-step loads,
// with the heavy steps where the allreduce has them). The order's size must be a power of two.
std::vector<int> bit_reversed_order(std::span<const int> order);

// Building block: HD allreduce among `members` (virtual rank -> comm rank) of
// Output[base, base+n) from step `first_step`; the value starts in `first_src` (Input or
// Output) at [base, base+n). Finalizes when `finalize`. Returns the steps used.
int append_hd_allreduce(ScheduleBuilder& b, int first_step, std::span<const int> members,
                        Buf first_src, int64_t base, int64_t n, bool finalize,
                        int64_t scratch_base = 0);

}  // namespace topocoll::sched
