#include "plugin/tuner/communicator_fit.h"

#include "config/value_grammar.h"

#include <algorithm>
#include <set>

namespace topocoll::plugin::tuner {
namespace {

// The endpoints of `hosts` (topology host indices), rank by rank: host by host, each host's
// in ascending GPU index; or the reason some host does not have `ppn` of them.
std::optional<std::vector<int>> ranks_on_hosts(const topo::Topology& topology, const std::vector<size_t>& hosts,
                                               size_t ppn, std::string& reason) {
  std::vector<int> endpoint_of_rank;
  endpoint_of_rank.reserve(hosts.size() * ppn);
  for (size_t h : hosts) {
    const auto& host = topology.hosts()[h];
    if (host.endpoints.size() != ppn) {
      reason = "host \"" + host.name + "\" has " + std::to_string(host.endpoints.size()) +
               " endpoints, the communicator " + std::to_string(ppn) + " ranks per node";
      return std::nullopt;
    }
    std::vector<int> eps = host.endpoints;
    std::sort(eps.begin(), eps.end(), [&](int a, int b) {
      return topology.endpoints()[size_t(a)].gpu < topology.endpoints()[size_t(b)].gpu;
    });
    endpoint_of_rank.insert(endpoint_of_rank.end(), eps.begin(), eps.end());
  }
  return endpoint_of_rank;
}

}  // namespace

std::vector<std::string> parse_job_hosts(const std::string& value) {
  std::vector<std::string> hosts;
  size_t begin = 0;
  while (begin <= value.size()) {
    size_t end = value.find(',', begin);
    if (end == std::string::npos) end = value.size();
    std::string name = value.substr(begin, end - begin);
    const size_t first = name.find_first_not_of(" \t\r\n\v\f");
    const size_t last = name.find_last_not_of(" \t\r\n\v\f");
    if (first != std::string::npos) hosts.push_back(name.substr(first, last - first + 1));
    begin = end + 1;
  }
  return hosts;
}

std::string uneven_nodes(const RanksPerNode& per_node) {
  if (per_node.min == per_node.max) return {};
  return "its nodes hold " + std::to_string(per_node.min) + " to " + std::to_string(per_node.max) +
         " ranks (NCCL's NVLink-domain sizes), not one count on every host, so which rank runs where is unknown";
}

CommunicatorFit fit_communicator(const topo::Topology& topology, size_t nranks, size_t nnodes,
                                 const std::vector<std::string>& job_hosts) {
  CommunicatorFit fit;
  const auto& hosts = topology.hosts();
  const size_t nendpoints = topology.endpoints().size();
  if (nranks < 2) {
    fit.reason = "a communicator of " + std::to_string(nranks) + " rank has nothing to tune";
    return fit;
  }
  // The job's hosts: each must be the topology's, once, whatever the communicator.
  std::vector<size_t> job;
  std::set<std::string> seen;
  for (const std::string& name : job_hosts) {
    const auto it = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.name == name; });
    if (it == hosts.end()) {
      fit.hosts_error = "TOPOCOLL_TUNER_HOSTS names host " + config::quoted_value(name) + ", which topology \"" +
                        topology.name() + "\" does not have";
      break;
    }
    if (!seen.insert(name).second) {
      fit.hosts_error = "TOPOCOLL_TUNER_HOSTS names host " + config::quoted_value(name) + " twice";
      break;
    }
    job.push_back(size_t(it - hosts.begin()));
  }
  // A list that is wrong says nothing about the numbering: no guess (the whole topology in
  // its file's order, below) stands in for it.
  if (!fit.hosts_error.empty()) {
    fit.reason = fit.hosts_error;
    return fit;
  }

  if (!job.empty() && nnodes == job.size() && nranks % nnodes == 0) {
    if (auto ranks = ranks_on_hosts(topology, job, nranks / nnodes, fit.reason))
      fit.placement = sched::explicit_endpoints(topology, std::move(*ranks));
    return fit;
  }
  if (nnodes != hosts.size() || nranks != nendpoints) {
    fit.reason = "topology \"" + topology.name() + "\" has " + std::to_string(nendpoints) + " endpoints on " +
                 std::to_string(hosts.size()) + " hosts" +
                 (job.empty() ? std::string(", and TOPOCOLL_TUNER_HOSTS names no job hosts")
                              : ", and the " + std::to_string(job.size()) +
                                    " hosts TOPOCOLL_TUNER_HOSTS names do not hold " + std::to_string(nranks) +
                                    " ranks on " + std::to_string(nnodes) + " nodes");
    return fit;
  }
  std::vector<size_t> all(hosts.size());
  for (size_t h = 0; h < all.size(); ++h) all[h] = h;
  if (auto ranks = ranks_on_hosts(topology, all, nranks / nnodes, fit.reason))
    fit.placement = sched::explicit_endpoints(topology, std::move(*ranks));
  return fit;
}

}  // namespace topocoll::plugin::tuner
