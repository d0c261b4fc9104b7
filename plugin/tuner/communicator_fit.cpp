#include "plugin/tuner/communicator_fit.h"

#include <algorithm>

namespace topocoll::plugin::tuner {

CommunicatorFit fit_communicator(const topo::Topology& topology, size_t nranks, size_t nnodes) {
  CommunicatorFit fit;
  const auto& hosts = topology.hosts();
  const size_t nendpoints = topology.endpoints().size();
  if (nranks < 2) {
    fit.reason = "a communicator of " + std::to_string(nranks) + " rank has nothing to tune";
    return fit;
  }
  if (nnodes != hosts.size() || nranks != nendpoints) {
    fit.reason = "topology \"" + topology.name() + "\" has " + std::to_string(nendpoints) +
                 " endpoints on " + std::to_string(hosts.size()) + " hosts";
    return fit;
  }
  const size_t ppn = nranks / nnodes;
  for (const auto& host : hosts) {
    if (host.endpoints.size() != ppn) {
      fit.reason = "host \"" + host.name + "\" has " + std::to_string(host.endpoints.size()) +
                   " endpoints, the communicator " + std::to_string(ppn) + " ranks per node";
      return fit;
    }
  }
  std::vector<int> endpoint_of_rank;
  endpoint_of_rank.reserve(nranks);
  for (const auto& host : hosts) {
    std::vector<int> eps = host.endpoints;
    std::sort(eps.begin(), eps.end(), [&](int a, int b) {
      return topology.endpoints()[a].gpu < topology.endpoints()[b].gpu;
    });
    endpoint_of_rank.insert(endpoint_of_rank.end(), eps.begin(), eps.end());
  }
  fit.placement = sched::explicit_endpoints(topology, std::move(endpoint_of_rank));
  return fit;
}

}  // namespace topocoll::plugin::tuner
