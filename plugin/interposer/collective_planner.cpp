#include "plugin/interposer/collective_planner.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "exec/engine.h"
#include "sched/all_to_all.h"
#include "sched/cost_model.h"
#include "sched/fc_direct.h"
#include "sched/halving_doubling.h"
#include "sched/link_load.h"
#include "sched/nap_log_step.h"
#include "sched/ring.h"

namespace topocoll::plugin::interposer {
namespace {

using sched::Collective;
using sched::Schedule;

// The rank order each generator wants on this placement (sched/placement.h).
std::vector<int> order_for(const std::string& algo, const topo::Topology& t,
                           const sched::Placement& p, double bytes) {
  if (algo == "ring") return sched::topology_aware_ring(t, p);
  if (algo == "hd") return sched::hd_order(t, p, bytes).rank_of_virtual;
  return sched::package_major_order(t, p);  // fc, fc-direct, all-to-all
}

// The schedule for (algo, collective), or nullopt when that generator has no such form.
std::optional<Schedule> generate(const std::string& algo, Collective c, int n, int64_t count,
                                 std::span<const int> order) {
  switch (c) {
    case Collective::AllReduce:
      if (algo == "ring") return sched::ring_allreduce(n, count, order);
      if (algo == "hd") return sched::hd_allreduce(n, count, order);
      if (algo == "fc") return sched::log_step_allreduce(n, count, order);
      if (algo == "fc-direct") return sched::fc_direct_allreduce(n, count, order);
      break;
    case Collective::ReduceScatter:
      if (algo == "ring") return sched::ring_reduce_scatter(n, count, order);
      if (algo == "hd") return sched::hd_reduce_scatter(n, count, order);
      if (algo == "fc-direct" || algo == "fc") return sched::fc_direct_reduce_scatter(n, count, order);
      break;
    case Collective::AllGather:
      if (algo == "ring") return sched::ring_allgather(n, count, order);
      if (algo == "hd") return sched::hd_allgather(n, count, order);
      if (algo == "fc") return sched::log_step_allgather(n, count, order);
      if (algo == "fc-direct") return sched::fc_direct_allgather(n, count, order);
      break;
    case Collective::AllToAll:
      if (algo == "fc-direct" || algo == "fc" || algo == "ring" || algo == "hd")
        return sched::direct_all_to_all(n, count, order);
      break;
  }
  return std::nullopt;
}

double predict(const Schedule& s, const PlanInput& in, sched::RouteCache& routes,
               const sched::CostParams& params = {}) {
  return sched::estimate_cost(s, *in.placement, in.elem_bytes, routes, params).total_us;
}

// NCCL runs all steps of its ring inside one kernel: a step costs an in-kernel
// synchronisation with the neighbour (about a microsecond with its low-latency protocol),
// not a host round trip.
sched::CostParams nccl_cost_params() {
  sched::CostParams p;
  p.alpha_us = 1.0;
  return p;
}

std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

std::shared_ptr<Plan> nccl_plan(std::string reason) {
  auto p = std::make_shared<Plan>();
  p->route = Route::Nccl;
  p->algo = "nccl";
  p->reason = std::move(reason);
  return p;
}

std::shared_ptr<Plan> schedule_plan(const std::string& algo, Schedule s, const PlanInput& in,
                                    double predicted, double nccl_us, std::string reason) {
  auto p = std::make_shared<Plan>();
  p->route = Route::Schedule;
  p->algo = algo;
  p->predicted_us = predicted;
  p->nccl_us = nccl_us;
  p->reason = std::move(reason);
  p->scratch_bytes =
      exec::scratch_bytes(s.programs[std::size_t(in.rank)], kernels::DataType(in.key.dtype));
  p->schedule = std::make_shared<const Schedule>(std::move(s));
  return p;
}

}  // namespace

std::size_t call_bytes(Collective collective, std::size_t count, std::size_t elem_bytes,
                       int nranks) {
  return collective == Collective::AllReduce ? count * elem_bytes
                                             : count * elem_bytes * std::size_t(nranks);
}

std::shared_ptr<const Plan> make_plan(const PlanInput& in, const InterposerConfig& config) {
  const int n = in.placement->nranks();
  const Collective c = in.key.collective;
  const int64_t count = in.key.count;
  const double bytes = double(call_bytes(c, std::size_t(count), in.elem_bytes, n));
  try {
    if (config.algo == AlgoChoice::Nccl) return nccl_plan("TOPOCOLL_ALGO=nccl");
    if (bytes < double(config.min_bytes)) return nccl_plan("below TOPOCOLL_MIN_BYTES");
    if (bytes > double(config.max_bytes)) return nccl_plan("above TOPOCOLL_MAX_BYTES");
    if (n < 2) return nccl_plan("single-rank communicator");

    sched::RouteCache routes(*in.topology);
    const std::vector<int> identity = sched::rank_order_ring(n);
    const std::vector<int> topo_ring = sched::topology_aware_ring(*in.topology, *in.placement);
    // NCCL's own algorithm modelled as a ring in the given order (all-to-all: direct pairs).
    auto nccl_model = [&](std::span<const int> order) {
      Schedule s = c == Collective::AllToAll ? sched::direct_all_to_all(n, count, order)
                   : c == Collective::AllReduce ? sched::ring_allreduce(n, count, order)
                   : c == Collective::ReduceScatter ? sched::ring_reduce_scatter(n, count, order)
                                                    : sched::ring_allgather(n, count, order);
      return predict(s, in, routes, nccl_cost_params());
    };
    const double nccl_us = nccl_model(identity);

    if (config.algo == AlgoChoice::NcclTopoRing) {
      if (c == Collective::AllToAll) return nccl_plan("nccl-topo-ring has no all-to-all form");
      auto p = std::make_shared<Plan>();
      p->route = Route::NcclTopoRing;
      p->algo = "nccl-topo-ring";
      p->nccl_us = nccl_us;
      p->predicted_us = nccl_model(topo_ring);
      p->reason = "TOPOCOLL_ALGO=nccl-topo-ring";
      return p;
    }

    const double overhead = config.step_overhead_us;
    if (config.algo != AlgoChoice::Auto) {
      const std::string algo(schedule_algo_name(config.algo));
      std::vector<int> order = order_for(algo, *in.topology, *in.placement, bytes);
      std::optional<Schedule> s = generate(algo, c, n, count, order);
      if (!s)
        return nccl_plan("TOPOCOLL_ALGO=" + algo + " has no " + std::string(sched::to_string(c)) +
                         " form; using NCCL");
      const double us = predict(*s, in, routes) + overhead * s->num_steps();
      return schedule_plan(algo, std::move(*s), in, us, nccl_us, "TOPOCOLL_ALGO=" + algo);
    }

    // Auto: NCCL, NCCL on the topology ring, or the fastest topocoll schedule. Anything else
    // must beat NCCL by kMargin: the model is coarse, and leaving NCCL costs a second
    // communicator or scratch memory.
    constexpr double kMargin = 0.95;
    std::string best = "nccl";
    double best_us = nccl_us * kMargin;
    std::optional<Schedule> best_schedule;
    if (c != Collective::AllToAll) {
      const double topo_ring_us = nccl_model(topo_ring);
      if (topo_ring_us < best_us) {
        best = "nccl-topo-ring";
        best_us = topo_ring_us;
      }
      std::vector<std::string> algos = {"ring", "hd"};
      if (in.topology->kind() == topo::TopologyKind::Nap) {
        algos.push_back("fc-direct");
        algos.push_back("fc");
      }
      for (const std::string& algo : algos) {
        std::vector<int> order = order_for(algo, *in.topology, *in.placement, bytes);
        std::optional<Schedule> s = generate(algo, c, n, count, order);
        if (!s || !s->claims_bitwise_identical) continue;
        const double us = predict(*s, in, routes) + overhead * s->num_steps();
        if (us < best_us) {
          best = algo;
          best_us = us;
          best_schedule = std::move(s);
        }
      }
    }
    const std::string why = "auto: " + best + " " + format_us(best_us) + " vs nccl " + format_us(nccl_us);
    if (best == "nccl") {
      auto p = nccl_plan("auto: nccl " + format_us(nccl_us) + ", nothing predicted 5% faster");
      p->predicted_us = p->nccl_us = nccl_us;
      return p;
    }
    if (best == "nccl-topo-ring") {
      auto p = std::make_shared<Plan>();
      p->route = Route::NcclTopoRing;
      p->algo = best;
      p->predicted_us = best_us;
      p->nccl_us = nccl_us;
      p->reason = why;
      return p;
    }
    return schedule_plan(best, std::move(*best_schedule), in, best_us, nccl_us, why);
  } catch (const std::exception& e) {
    return nccl_plan(std::string("planning failed: ") + e.what());
  }
}

}  // namespace topocoll::plugin::interposer
