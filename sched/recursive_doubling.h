// Recursive-doubling allreduce (Thakur, Rabenseifner & Gropp 2005, "short messages"):
// log2 P steps, each a pairwise exchange of the whole vector with partner v XOR 2^s.
// Half the steps of halving-doubling (which moves less data per rank, 2 log2 P steps), so
// it wins where a step's fixed cost dominates: small messages. The planner's cost model
// decides where that is.
//
// Bitwise identical on every rank: at level s the two partners hold the reductions of
// their halves of a 2^(s+1) group, and both compute op(lower half, upper half) with the
// operands in that order. Every rank therefore evaluates the same tree, operands in the
// same order (op(a,b) and op(b,a) differ in the bits of a NaN result).
//
// `order` maps virtual rank -> communicator rank (identity when empty). The pairs of step
// s are exactly halving-doubling's pairs at distance 2^s, so a halving-doubling placement
// (sched/hd_order.h) keeps every step free of link contention here too.
// Non-power-of-two P: the MPICH fold of sched/halving_doubling.h (virtual rank q+e sends
// its vector to e first and gets the result back last). Scratch: two vectors per rank.
#pragma once

#include <cstdint>
#include <span>

#include "sched/schedule.h"

namespace topocoll::sched {

Schedule rd_allreduce(int nranks, int64_t count, std::span<const int> order = {});

}  // namespace topocoll::sched
