// What NCCL itself would take for a call: the best of NCCL 2.28's algorithms and protocols
// (Ring, Tree, PAT with LL / LL128 / Simple) as the model the tuner uses too lays them over
// the topology (sched/nccl_algorithm_model.h), so `auto` compares topocoll against
// NCCL's best and not against a rank-order ring only. NVLS, NVLS-Tree and CollNet are not
// modelled: where they apply (NVSwitch hosts), NCCL may be faster than predicted here,
// which TOPOCOLL_AUTO_MARGIN has to cover.
#pragma once

#include <optional>
#include <string>

#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::plugin::interposer {

struct NcclBaseline {
  double us = 0;
  std::string algo;  // e.g. "Ring/LL128"
};

// NCCL's fastest predicted (algorithm, protocol) for `collective` of `nbytes` (NCCL's nBytes:
// the allreduce buffer; the whole gathered / scattered buffer for allgather and
// reduce-scatter); nullopt where the model has nothing to say (all-to-all).
std::optional<NcclBaseline> nccl_best(const topo::Topology& topology,
                                      const sched::Placement& placement,
                                      sched::Collective collective, double nbytes);

}  // namespace topocoll::plugin::interposer
