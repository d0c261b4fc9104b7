// NAP (Hou et al.) whole-vector log-step collectives for a package whose nodes are fully
// connected through local switches (any pair in one hop).
//
// Allreduce (paper Fig. 7): log2 N steps; at step S node i sends its whole current vector
// to (i + 2^(S-1)) mod N, receives from (i - 2^(S-1)) mod N and adds. The paper writes the
// distance as 2(S-1), which equals 2^(S-1) only for S <= 3 (N <= 8); 2^(S-1) is the rule
// that reaches every node exactly once for N = 16, 32, ... Latency-optimal, but it moves
// log2(N) whole vectors per node, and every node reduces in its own order, so results are
// not bitwise identical across nodes once the core has 4 or more ranks (the schedule says
// so: claims_bitwise_identical = false).
// Non-power-of-two N: the MPICH-style fold (as sched/halving_doubling.h): position q+e
// sends its vector to core position e first and gets the result back last.
//
// Allgather (paper Fig. 8): step S sends everything held so far (2^(S-1) blocks) to
// i + 2^(S-1); for non-power-of-two N the last step sends only the N - 2^(S-1) blocks the
// receiver still lacks (Bruck et al.), so ceil(log2 N) steps for any N.
//
// `order` maps position -> communicator rank (identity when empty).
#pragma once

#include <cstdint>
#include <span>

#include "sched/schedule.h"

namespace topocoll::sched {

Schedule log_step_allreduce(int nranks, int64_t count, std::span<const int> order = {});
Schedule log_step_allgather(int nranks, int64_t count, std::span<const int> order = {});

}  // namespace topocoll::sched
