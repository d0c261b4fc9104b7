// All-to-all: rank r sends Input[j*count, +count) to rank j, which stores it at
// Output[r*count, +count). Input and Output hold count*P elements per rank.
#pragma once

#include <cstdint>
#include <span>

#include "sched/schedule.h"

namespace topocoll::sched {

// Direct (NAP paper Fig. 5; Thakur et al.): N-1 steps; at step i position p sends to
// p+i and receives from p-i (mod N), which on a crossbar is one hop per transfer. The own
// block is copied in the first step. `order` maps position -> communicator rank.
// NCCL defines no in-place all-to-all; this schedule is for distinct buffers only.
Schedule direct_all_to_all(int nranks, int64_t count, std::span<const int> order = {});

// Ring (store and forward, the NAP paper's baseline on a unidirectional ring): N-1 steps;
// at step t position p passes to p+1 the N-t blocks that position p-t+1 sent, keeps the
// one addressed to it and forwards the rest next step. Every hop is between ring
// neighbours; the ring carries N(N-1)/2 blocks per link in total, which is what makes
// all-to-all slow on a ring and fast on a crossbar.
Schedule ring_all_to_all(int nranks, int64_t count, std::span<const int> order = {});

}  // namespace topocoll::sched
