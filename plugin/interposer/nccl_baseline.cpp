#include "plugin/interposer/nccl_baseline.h"

#include <set>

#include "plugin/tuner/nccl_algorithm_model.h"

namespace topocoll::plugin::interposer {

std::optional<NcclBaseline> nccl_best(const topo::Topology& topology,
                                      const sched::Placement& placement,
                                      sched::Collective collective, double nbytes) {
  ncclFunc_t func;
  switch (collective) {
    case sched::Collective::AllReduce: func = ncclFuncAllReduce; break;
    case sched::Collective::ReduceScatter: func = ncclFuncReduceScatter; break;
    case sched::Collective::AllGather: func = ncclFuncAllGather; break;
    default: return std::nullopt;
  }
  // NCCL's node count: the hosts the communicator's ranks sit on.
  std::set<int> hosts;
  for (int endpoint : placement.endpoint_of_rank)
    hosts.insert(topology.endpoints()[std::size_t(endpoint)].host_index);
  const tuner::NcclAlgorithmModel model(topology, placement, int(hosts.size()),
                                        tuner::default_nccl_latencies());
  std::optional<NcclBaseline> best;
  for (int a = 0; a < tuner::kNumAlgorithms; ++a)
    for (int p = 0; p < tuner::kNumProtocols; ++p)
      if (const std::optional<double> us = model.predict_us(func, a, p, nbytes))
        if (!best || *us < best->us)
          best = NcclBaseline{*us, std::string(tuner::algorithm_name(a)) + "/" +
                                       tuner::protocol_name(p)};
  return best;
}

}  // namespace topocoll::plugin::interposer
