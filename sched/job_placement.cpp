#include "sched/job_placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "sched/placement.h"
#include "sched/ring_order.h"

namespace topocoll::sched {
namespace {

constexpr std::string_view kChoices = "scheduler, spread, topology-order or endpoints=A,B,...";

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(',', start);
    std::string item(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (!item.empty()) out.push_back(std::move(item));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

int endpoint_named(const topo::Topology& t, const std::string& name) {
  if (auto e = t.find_endpoint_by_id(name)) return *e;
  if (!name.empty() && name.size() < 9 && name.find_first_not_of("0123456789") == std::string::npos) {
    const int index = std::stoi(name);
    if (index < int(t.endpoints().size())) return index;
  }
  throw std::invalid_argument("endpoints=: '" + name + "' is no endpoint id or index of " + t.name());
}

// One endpoint per switch (BiGraph) or package (NAP) before a second one on any.
std::vector<int> spread(const topo::Topology& t, int n) {
  std::map<int, std::vector<int>> by_site;
  for (int e = 0; e < int(t.endpoints().size()); ++e) {
    const auto& ep = t.endpoints()[e];
    by_site[ep.attach_switch >= 0 ? ep.attach_switch : ep.package].push_back(e);
  }
  std::vector<int> out;
  for (size_t round = 0; int(out.size()) < n; ++round) {
    bool any = false;
    for (auto& [site, endpoints] : by_site)
      if (round < endpoints.size() && int(out.size()) < n) {
        out.push_back(endpoints[round]);
        any = true;
      }
    if (!any) break;
  }
  return out;
}

}  // namespace

JobPlacement parse_job_placement(std::string_view text) {
  JobPlacement p;
  if (text == "scheduler") p.kind = JobPlacement::Kind::Scheduler;
  else if (text == "spread") p.kind = JobPlacement::Kind::Spread;
  else if (text == "topology-order") p.kind = JobPlacement::Kind::TopologyOrder;
  else if (text.rfind("endpoints=", 0) == 0) {
    p.kind = JobPlacement::Kind::Endpoints;
    p.endpoints = split_commas(text.substr(10));
    if (p.endpoints.empty()) throw std::invalid_argument("--placement endpoints=: name at least one endpoint");
  } else {
    throw std::invalid_argument("--placement '" + std::string(text) + "': expected " + std::string(kChoices));
  }
  return p;
}

std::string to_string(const JobPlacement& p) {
  switch (p.kind) {
    case JobPlacement::Kind::Scheduler: return "scheduler";
    case JobPlacement::Kind::Spread: return "spread";
    case JobPlacement::Kind::TopologyOrder: return "topology-order";
    case JobPlacement::Kind::Endpoints: {
      std::string out = "endpoints=";
      for (size_t i = 0; i < p.endpoints.size(); ++i) out += (i ? "," : "") + p.endpoints[i];
      return out;
    }
  }
  return "?";
}

std::vector<int> place_job(const topo::Topology& t, int nranks, const JobPlacement& p) {
  const int available = int(t.endpoints().size());
  if (p.kind == JobPlacement::Kind::Endpoints) {
    if (nranks > 0 && nranks != int(p.endpoints.size()))
      throw std::invalid_argument("--placement endpoints= names " + std::to_string(p.endpoints.size()) +
                                  " endpoints for " + std::to_string(nranks) + " ranks");
    std::vector<int> out;
    std::set<int> seen;
    for (const auto& name : p.endpoints) {
      const int e = endpoint_named(t, name);
      if (!seen.insert(e).second)
        throw std::invalid_argument("--placement endpoints=: " + t.endpoints()[e].id + " is named twice");
      out.push_back(e);
    }
    return out;
  }
  const int n = nranks > 0 ? nranks : available;
  if (n > available)
    throw std::invalid_argument(std::to_string(n) + " ranks, but " + t.name() + " has " + std::to_string(available) +
                                " endpoints");
  std::vector<int> first(n);
  for (int r = 0; r < n; ++r) first[r] = r;
  switch (p.kind) {
    case JobPlacement::Kind::Spread: return spread(t, n);
    case JobPlacement::Kind::TopologyOrder: return n < 2 ? first : launcher_ring_order(t, first);
    default: return first;
  }
}

std::vector<int> launcher_ring_order(const topo::Topology& t, const std::vector<int>& endpoints) {
  const std::vector<int> ring = topology_aware_ring(t, explicit_endpoints(t, endpoints));
  std::vector<int> hosts;
  for (int rank : ring) {
    const int h = t.endpoints()[endpoints[rank]].host_index;
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  // Launchers number ranks host by host: each host's endpoints of the job together.
  const std::set<int> in_job(endpoints.begin(), endpoints.end());
  std::vector<int> out;
  for (int h : hosts)
    for (int e : t.hosts()[h].endpoints)
      if (in_job.count(e)) out.push_back(e);
  return out;
}

std::string hostfile(const topo::Topology& t, const std::vector<int>& endpoints, std::string_view format) {
  std::vector<int> hosts;  // in order of first rank
  std::map<int, int> ranks_on;
  for (int e : endpoints) {
    const int h = t.endpoints()[e].host_index;
    if (ranks_on[h]++ == 0) hosts.push_back(h);
  }
  std::string out;
  if (format == "list") {
    for (int h : hosts) out += t.hosts()[h].name + "\n";
  } else if (format == "mpirun") {
    for (int h : hosts) out += t.hosts()[h].name + " slots=" + std::to_string(ranks_on[h]) + "\n";
  } else if (format == "torchrun") {
    for (size_t i = 0; i < hosts.size(); ++i) out += t.hosts()[hosts[i]].name + " " + std::to_string(i) + "\n";
  } else if (format == "slurm") {
    for (int e : endpoints) out += t.hosts()[t.endpoints()[e].host_index].name + "\n";
  } else if (format == "endpoints") {
    for (size_t i = 0; i < endpoints.size(); ++i) out += (i ? "," : "") + t.endpoints()[endpoints[i]].id;
    out += "\n";
  } else {
    throw std::invalid_argument("--format '" + std::string(format) + "': one of " + std::string(kHostfileFormats));
  }
  return out;
}

}  // namespace topocoll::sched
