// Direct (fully connected) reduce-scatter + allgather for a crossbar: NAP's package with k
// local switches, or the NVSwitch inside a server. Bandwidth-optimal: every rank sends and
// receives (N-1)/N of the vector per phase, in one step per phase.
//   reduce-scatter: rank at position p receives block p from all N-1 peers in ONE step and
//                   reduces them with multi-input Reduce ops (up to kMaxReduceInputs
//                   sources: the own value plus 7 peers, then chained 7 at a time);
//   allgather:      it sends its finished (finalized) block to all N-1 peers in one step.
// Peers are reduced in the order p+1, p+2, ... (mod N); only the owner reduces a block, so
// every rank gets identical bits. `order` maps position -> communicator rank.
#pragma once

#include <cstdint>
#include <span>

#include "sched/schedule.h"
#include "sched/schedule_builder.h"

namespace topocoll::sched {

Schedule fc_direct_allreduce(int nranks, int64_t count, std::span<const int> order = {});
Schedule fc_direct_reduce_scatter(int nranks, int64_t count, std::span<const int> order = {});
Schedule fc_direct_allgather(int nranks, int64_t count, std::span<const int> order = {});

// Building blocks over Output[base, base+n) split into members.size() shards (BlockSplit):
// the reduce-scatter leaves shard p reduced in member p's Output (finalized when asked),
// reading each member's value from `first_src`; the allgather spreads each member's shard
// to all. One step each; Scratch[scratch_base, +(N-1)*shard) holds the received pieces.
void append_fc_direct_reduce_scatter(ScheduleBuilder& b, int step, std::span<const int> members,
                                     Buf first_src, int64_t base, int64_t n, bool finalize,
                                     int64_t scratch_base = 0);
void append_fc_direct_allgather(ScheduleBuilder& b, int step, std::span<const int> members,
                                int64_t base, int64_t n);

}  // namespace topocoll::sched
