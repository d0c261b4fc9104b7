#include "plugin/interposer/nccl_baseline.h"

#include <set>

#include "sched/nccl_algorithm_model.h"

namespace topocoll::plugin::interposer {

std::optional<NcclBaseline> nccl_best(const topo::Topology& topology,
                                      const sched::Placement& placement,
                                      sched::Collective collective, double nbytes) {
  sched::NcclCollective modelled;
  switch (collective) {
    case sched::Collective::AllReduce: modelled = sched::NcclCollective::AllReduce; break;
    case sched::Collective::ReduceScatter: modelled = sched::NcclCollective::ReduceScatter; break;
    case sched::Collective::AllGather: modelled = sched::NcclCollective::AllGather; break;
    default: return std::nullopt;
  }
  // NCCL's node count: the hosts the communicator's ranks sit on.
  std::set<int> hosts;
  for (int endpoint : placement.endpoint_of_rank)
    hosts.insert(topology.endpoints()[std::size_t(endpoint)].host_index);
  const sched::NcclAlgorithmModel model(topology, placement, int(hosts.size()),
                                        sched::default_nccl_latencies());
  std::optional<NcclBaseline> best;
  for (int a = 0; a < sched::kNumNcclAlgorithms; ++a)
    for (int p = 0; p < sched::kNumNcclProtocols; ++p)
      if (const std::optional<double> us = model.predict_us(modelled, a, p, nbytes))
        if (!best || *us < best->us)
          best = NcclBaseline{*us, std::string(sched::nccl_algorithm_name(a)) + "/" +
                                       sched::nccl_protocol_name(p)};
  return best;
}

}  // namespace topocoll::plugin::interposer
