#include "sched/cost_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace topocoll::sched {

using topo::NodeRef;

CostEstimate estimate_cost(const Schedule& schedule, const Placement& placement,
                           size_t elem_size, RouteCache& routes, const CostParams& params) {
  if (placement.nranks() != schedule.nranks)
    throw std::invalid_argument("cost model: placement has " + std::to_string(placement.nranks()) +
                                " ranks, schedule " + std::to_string(schedule.nranks));
  const auto& topology = routes.topology();
  const auto& links = topology.links();
  const auto& switches = topology.switches();
  // Per link: bytes per microsecond and the latency a flow pays crossing it (plus the
  // forwarding latency of the switch it enters).
  std::vector<double> rate(links.size()), latency(links.size());
  for (const auto& l : links) {
    rate[l.id] = l.gbps * 125.0;  // Gb/s -> bytes/us
    latency[l.id] = l.latency_us;
    if (l.to.type == NodeRef::Type::Switch) latency[l.id] += switches[l.to.index].latency_us;
  }
  StepLinkLoads loads(int(links.size()));
  std::vector<Flow> flows;
  std::vector<PathView> paths;
  CostEstimate est;
  int nsteps = schedule.num_steps();
  est.steps.resize(nsteps);
  for (int s = 0; s < nsteps; ++s) {
    StepCost& sc = est.steps[s];
    step_flows(schedule, s, elem_size, flows);
    loads.clear();
    for (const Flow& f : flows)
      loads.add(routes, placement.endpoint_of_rank[f.src], placement.endpoint_of_rank[f.dst],
                double(f.bytes));
    for (const Flow& f : flows) {
      routes.paths(placement.endpoint_of_rank[f.src], placement.endpoint_of_rank[f.dst], paths);
      double flow_time = 0;
      for (const PathView& p : paths) {
        double b = double(f.bytes) * p.fraction;
        double lat = 0, transfer = 0;
        p.for_each_link([&](int l) {
          lat += latency[l];
          double shared = std::min(loads.bytes(l), double(loads.portions(l)) * b);
          transfer = std::max(transfer, shared / rate[l]);
        });
        flow_time = std::max(flow_time, (params.include_latency ? lat : 0.0) + transfer);
      }
      if (flow_time > sc.transfer_us) {
        sc.transfer_us = flow_time;
        sc.slowest_flow_src = f.src;
        sc.slowest_flow_dst = f.dst;
      }
    }
    // Local ops: a Reduce of n inputs reads n buffers; a Copy reads one. The slowest rank
    // ends the step.
    bool any_local = false;
    double worst_bytes = 0;
    for (const auto& prog : schedule.programs) {
      if (s >= prog.num_steps()) continue;
      double bytes = 0;
      for (const Op& op : prog.step(s)) {
        if (op.kind == OpKind::Reduce) bytes += double(op.count) * double(elem_size) * op.nsrc;
        if (op.kind == OpKind::Copy || op.kind == OpKind::Finalize)
          bytes += double(op.count) * double(elem_size);
        if (op.kind != OpKind::Send && op.kind != OpKind::Recv) any_local = true;
      }
      worst_bytes = std::max(worst_bytes, bytes);
    }
    sc.reduce_us = worst_bytes * params.gamma_us_per_byte;
    if (!flows.empty() || any_local) sc.time_us = params.alpha_us + sc.transfer_us + sc.reduce_us;
    est.total_us += sc.time_us;
  }
  return est;
}

double bus_bandwidth_factor(Collective collective, int nranks) {
  if (nranks <= 1) return 0;
  double n = nranks;
  return collective == Collective::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

double algbw_gbs(double bytes, double time_us) {
  return time_us > 0 ? bytes / (time_us * 1e3) : 0;  // bytes/us / 1e3 = GB/s
}

double busbw_gbs(Collective collective, int nranks, double bytes, double time_us) {
  return algbw_gbs(bytes, time_us) * bus_bandwidth_factor(collective, nranks);
}

}  // namespace topocoll::sched
