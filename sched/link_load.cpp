#include "sched/link_load.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace topocoll::sched {

using topo::LinkKind;
using topo::NodeRef;
using topo::SwitchRole;

RouteCache::RouteCache(const topo::Topology& topology) : topology_(topology) {
  const auto& eps = topology.endpoints();
  const size_t n = eps.size();
  access_up_.assign(n, -1);
  access_down_.assign(n, -1);
  attach_.assign(n, -1);
  host_.assign(n, -1);
  group_.assign(n, -1);
  for (const auto& l : topology.links()) {
    if (l.kind != LinkKind::Access) continue;
    if (l.from.type == NodeRef::Type::Endpoint) access_up_[l.from.index] = l.id;
    if (l.to.type == NodeRef::Type::Endpoint) access_down_[l.to.index] = l.id;
  }
  num_switches_ = int(topology.switches().size());
  for (size_t e = 0; e < n; ++e) {
    attach_[e] = eps[e].attach_switch;
    host_[e] = eps[e].host_index;
    if (attach_[e] >= 0) {
      SwitchRole role = topology.switches()[attach_[e]].role;
      group_[e] = role == SwitchRole::Upper ? 0 : role == SwitchRole::Lower ? 1 : -1;
    }
  }
  if (topology.kind() == topo::TopologyKind::BiGraph) {
    switch_pair_.resize(size_t(num_switches_) * num_switches_);
    // Between the groups the route is NIC, the one cable between the two switches, NIC
    // (Topology::route_bigraph); the cable is looked up here once for all pairs.
    for (const auto& l : topology.links())
      if (l.kind == LinkKind::InterGroup && l.from.type == NodeRef::Type::Switch &&
          l.to.type == NodeRef::Type::Switch) {
        SwitchPair& sp = switch_pair_[size_t(l.from.index) * num_switches_ + l.to.index];
        sp.state = 1;
        sp.link = l.id;
      }
  }
}

RouteCache::Stored RouteCache::store(const std::vector<topo::Path>& route, int strip_head,
                                     int strip_tail) {
  Stored s;
  s.first_path = uint32_t(stored_paths_.size());
  for (const auto& p : route) {
    StoredPath sp;
    sp.offset = uint32_t(stored_links_.size());
    size_t b = strip_head, e = p.links.size() - strip_tail;
    stored_links_.insert(stored_links_.end(), p.links.begin() + b, p.links.begin() + e);
    sp.size = uint32_t(e - b);
    sp.fraction = p.fraction;
    stored_paths_.push_back(sp);
  }
  s.num_paths = uint32_t(route.size());
  return s;
}

void RouteCache::append(const Stored& stored, int head, int tail,
                        std::vector<PathView>& out) const {
  for (uint32_t i = 0; i < stored.num_paths; ++i) {
    const StoredPath& sp = stored_paths_[stored.first_path + i];
    out.push_back(PathView{head, std::span<const int>(stored_links_.data() + sp.offset, sp.size),
                           tail, sp.fraction});
  }
}

void RouteCache::paths(int src, int dst, std::vector<PathView>& out) {
  out.clear();
  if (src == dst) return;
  // BiGraph cross-group routes are unique (NIC up, one inter-group link, NIC down); their
  // middle depends only on the two switches, so it is kept per switch pair.
  if (!switch_pair_.empty() && host_[src] != host_[dst] && group_[src] >= 0 &&
      group_[dst] >= 0 && group_[src] != group_[dst] && access_up_[src] >= 0 &&
      access_down_[dst] >= 0) {
    SwitchPair& sp = switch_pair_[size_t(attach_[src]) * num_switches_ + attach_[dst]];
    if (sp.state == -1) {
      auto route = topology_.route(src, dst);
      bool shaped = !route.empty();
      for (const auto& p : route)
        shaped = shaped && p.links.size() >= 2 && p.links.front() == access_up_[src] &&
                 p.links.back() == access_down_[dst];
      if (shaped) {
        sp.stored = store(route, 1, 1);
        sp.state = 0;
      } else {
        sp.state = -2;  // not the expected shape: per-pair routes for this switch pair
      }
    }
    if (sp.state == 1) {
      out.push_back(PathView{access_up_[src], std::span<const int>(&sp.link, 1),
                             access_down_[dst], 1.0});
      return;
    }
    if (sp.state == 0) {
      append(sp.stored, access_up_[src], access_down_[dst], out);
      return;
    }
  }
  uint64_t key = (uint64_t(uint32_t(src)) << 32) | uint32_t(dst);
  auto it = pairs_.find(key);
  if (it == pairs_.end()) it = pairs_.emplace(key, store(topology_.route(src, dst), 0, 0)).first;
  append(it->second, -1, -1, out);
}

void step_flows(const Schedule& schedule, int step, size_t elem_size, std::vector<Flow>& out,
                double* local_bytes, bool* any_local) {
  out.clear();
  if (local_bytes) *local_bytes = 0;
  if (any_local) *any_local = false;
  for (int r = 0; r < int(schedule.programs.size()); ++r) {
    const auto& prog = schedule.programs[r];
    if (step >= prog.num_steps()) continue;
    // Several sends to one peer in one step (ranges split into runs) are one flow.
    size_t first = out.size();
    bool sorted = true;
    double local = 0;
    for (const Op& op : prog.step(step)) {
      if (op.kind != OpKind::Send) {
        if (op.kind != OpKind::Recv) {
          local += double(op.count) * double(elem_size) * (op.kind == OpKind::Reduce ? op.nsrc : 1);
          if (any_local) *any_local = true;
        }
        continue;
      }
      const int64_t bytes = op.count * int64_t(elem_size);
      if (out.size() > first && out.back().dst == op.peer) {
        out.back().bytes += bytes;
        out.back().largest_send = std::max(out.back().largest_send, bytes);
        continue;
      }
      if (out.size() > first && out.back().dst > op.peer) sorted = false;
      out.push_back(Flow{r, op.peer, bytes, bytes});
    }
    if (local_bytes) *local_bytes = std::max(*local_bytes, local);
    if (sorted) continue;
    std::sort(out.begin() + first, out.end(),
              [](const Flow& a, const Flow& b) { return a.dst < b.dst; });
    size_t w = first;
    for (size_t i = first; i < out.size(); ++i) {
      if (w > first && out[w - 1].dst == out[i].dst) {
        out[w - 1].bytes += out[i].bytes;
        out[w - 1].largest_send = std::max(out[w - 1].largest_send, out[i].largest_send);
      } else
        out[w++] = out[i];
    }
    out.resize(w);
  }
}

StepLinkLoads::StepLinkLoads(int num_links) : links_(num_links) {}

void StepLinkLoads::clear() {
  for (int l : touched_) links_[l] = Totals{};
  touched_.clear();
}

void StepLinkLoads::add(RouteCache& routes, int src, int dst, double bytes) {
  routes.paths(src, dst, paths_);
  for (const PathView& p : paths_) {
    p.for_each_link([&](int l) {
      Totals& t = links_[l];
      if (t.portions == 0) touched_.push_back(l);
      t.flows += p.fraction;
      t.bytes += bytes * p.fraction;
      t.portions += 1;
    });
  }
}

StepLoadPass::StepLoadPass(const Schedule& schedule, const Placement& placement,
                           size_t elem_size, RouteCache& routes, LinkLoadOptions options)
    : schedule_(schedule), placement_(placement), elem_size_(elem_size), routes_(routes),
      options_(options), loads_(int(routes.topology().links().size())) {
  result_.steps.resize(schedule.num_steps());
}

void StepLoadPass::run_step(int s, double* local_bytes, bool* any_local) {
  StepLoad& out = result_.steps[s];
  step_flows(schedule_, s, elem_size_, flows_, local_bytes, any_local);
  loads_.clear();
  // The flows' paths are kept for the caller unless new routes move their storage.
  routes_version_ = routes_.version();
  flow_paths_.clear();
  flow_first_.clear();
  for (const Flow& f : flows_) {
    loads_.add(routes_, placement_.endpoint_of_rank[f.src], placement_.endpoint_of_rank[f.dst],
               double(f.bytes));
    flow_first_.push_back(uint32_t(flow_paths_.size()));
    for (const PathView& p : loads_.scratch_paths()) {
      out.hops += p.hops();
      flow_paths_.push_back(p);
    }
    out.bytes += f.bytes;
    out.max_flow_bytes = std::max(out.max_flow_bytes, f.bytes);
    out.max_send_bytes = std::max(out.max_send_bytes, f.largest_send);
  }
  flow_first_.push_back(uint32_t(flow_paths_.size()));
  out.flows = int(flows_.size());
  for (int l : loads_.touched()) {
    // Ties go to the lowest link id so the report is deterministic.
    double f = loads_.flows(l);
    if (f > out.max_load + 1e-9 ||
        (f > out.max_load - 1e-9 && out.bottleneck_link >= 0 && l < out.bottleneck_link)) {
      out.max_load = std::max(out.max_load, f);
      out.bottleneck_link = l;
    }
    if (options_.keep_links) out.links.push_back(LinkUse{l, f, loads_.bytes(l)});
  }
  if (options_.keep_links)
    std::sort(out.links.begin(), out.links.end(),
              [](const LinkUse& x, const LinkUse& y) { return x.link < y.link; });
  result_.total_hops += out.hops;
  if (out.max_load > result_.max_load + 1e-9) {
    result_.max_load = out.max_load;
    result_.worst_step = s;
  }
}

std::span<const PathView> StepLoadPass::paths_of(size_t i) {
  if (routes_.version() == routes_version_)
    return std::span<const PathView>(flow_paths_.data() + flow_first_[i],
                                     flow_first_[i + 1] - flow_first_[i]);
  const Flow& f = flows_[i];
  routes_.paths(placement_.endpoint_of_rank[f.src], placement_.endpoint_of_rank[f.dst], rerouted_);
  return rerouted_;
}

LinkLoad analyze_link_load(const Schedule& schedule, const Placement& placement,
                           size_t elem_size, RouteCache& routes, LinkLoadOptions options) {
  if (placement.nranks() != schedule.nranks)
    throw std::invalid_argument("link load: placement has " + std::to_string(placement.nranks()) +
                                " ranks, schedule " + std::to_string(schedule.nranks));
  StepLoadPass pass(schedule, placement, elem_size, routes, options);
  for (int s = 0; s < schedule.num_steps(); ++s) pass.run_step(s);
  return pass.take_result();
}

}  // namespace topocoll::sched
