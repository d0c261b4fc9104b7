#include "plugin/interposer/route_decision.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "exec/engine.h"
#include "plugin/interposer/nccl_baseline.h"
#include "plugin/kept_for_process.h"
#include "plugin/log.h"
#include "sched/cost_model.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/ring_order.h"


namespace topocoll::plugin::interposer {
namespace {

using sched::Collective;

// NCCL runs all steps of its ring inside one kernel: a step costs an in-kernel
// synchronisation with the neighbour (about a microsecond with its low-latency protocol),
// not a host round trip.
constexpr double kNcclStepUs = 1.0;

sched::PlanRequest request_for(const RouteRequest& in, const std::string& algo, double alpha_us,
                               bool verify) {
  sched::PlanRequest r;
  r.collective = in.key.collective;
  r.algo = algo;
  r.bytes = sched::size_of_count(in.key.collective, in.key.count, in.elem_bytes,
                                 in.placement->nranks());
  r.elem_size = in.elem_bytes;
  r.endpoints = in.placement->endpoint_of_rank;
  r.cost.alpha_us = alpha_us;
  // topocoll's own schedules run pipelined (exec/pipeline.h); NCCL's modelled ring does not.
  if (verify) r.cost.pipeline = exec::PipelineOptions::process_default().shape;
  r.verify = verify;
  r.keep_link_detail = false;
  return r;
}

std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

std::string format_ratio(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::shared_ptr<Route> nccl_route(std::string reason, double nccl_us = 0) {
  auto p = std::make_shared<Route>();
  p->target = RouteTarget::Nccl;
  p->algo = "nccl";
  p->reason = std::move(reason);
  p->predicted_us = p->nccl_us = nccl_us;
  return p;
}

// The routes the settings decide (route_settled_by_config), made at load and never
// destroyed: a call on a thread still running at exit may take one (kept_for_process.h).
const std::shared_ptr<const Route>& settled_route(const char* reason) {
  return *kept_for_process(new std::shared_ptr<const Route>(nccl_route(reason)));
}
const std::shared_ptr<const Route>& kAlgoIsNccl = settled_route("TOPOCOLL_ALGO=nccl");
const std::shared_ptr<const Route>& kBelowMinBytes = settled_route("below TOPOCOLL_MIN_BYTES");
const std::shared_ptr<const Route>& kAboveMaxBytes = settled_route("above TOPOCOLL_MAX_BYTES");
const std::shared_ptr<const Route>& kSingleRank = settled_route("single-rank communicator");

// A schedule route, or NCCL when the planner's result cannot run here.
std::shared_ptr<Route> schedule_route(sched::Plan planned, const RouteRequest& in, double nccl_us,
                                      std::string reason) {
  const bool verifier_ran = planned.verification.rfind("not run", 0) != 0;
  if (verifier_ran && !planned.verified)
    return nccl_route(planned.algo + " rejected by the verifier: " + planned.verification, nccl_us);
  const sched::Schedule& s = planned.schedule;
  if (s.count != in.key.count || s.nranks != in.placement->nranks() ||
      int(s.programs.size()) != s.nranks)
    return nccl_route(planned.algo + ": planned schedule does not match the call", nccl_us);
  auto p = std::make_shared<Route>();
  p->target = RouteTarget::Schedule;
  p->algo = planned.algo;
  p->predicted_us = planned.predicted_us;
  p->nccl_us = nccl_us;
  p->reason = std::move(reason);
  p->scratch_bytes =
      exec::scratch_bytes(s.programs[std::size_t(in.rank)], kernels::DataType(in.key.dtype));
  p->schedule = std::make_shared<const sched::Schedule>(std::move(planned.schedule));
  return p;
}

}  // namespace

std::shared_ptr<const Route> route_settled_by_config(const RouteRequest& in, const InterposerConfig& config) {
  const int n = in.placement->nranks();
  const double bytes = double(sched::size_of_count(in.key.collective, in.key.count, in.elem_bytes, n));
  if (config.algo == AlgoChoice::Nccl) return kAlgoIsNccl;
  if (bytes < double(config.min_bytes)) return kBelowMinBytes;
  if (bytes > double(config.max_bytes)) return kAboveMaxBytes;
  if (n < 2) return kSingleRank;
  return nullptr;
}

std::shared_ptr<const Route> decide_route(const RouteRequest& in, const InterposerConfig& config) {
  if (std::shared_ptr<const Route> settled = route_settled_by_config(in, config)) return settled;
  const int n = in.placement->nranks();
  const Collective c = in.key.collective;
  const double bytes = double(sched::size_of_count(c, in.key.count, in.elem_bytes, n));
  try {

    // NCCL itself: the fastest of its algorithms and protocols (nccl_baseline.h), or its
    // ring in rank order (all-to-all: direct pairs) with in-kernel steps where that is
    // predicted faster still: the smaller estimate, so topocoll has to beat NCCL's best.
    const std::string nccl_algo = c == Collective::AllToAll ? "direct" : "ring";
    double nccl_us =
        sched::make_plan(*in.topology, request_for(in, nccl_algo, kNcclStepUs, false)).predicted_us;
    std::string nccl_name = "nccl " + nccl_algo;
    if (const std::optional<NcclBaseline> best = nccl_best(*in.topology, *in.placement, c, bytes))
      if (best->us < nccl_us) {
        nccl_us = best->us;
        nccl_name = "nccl " + best->algo;
      }
    // Reduce-scatter and allgather on the topology-ordered split permute their blocks
    // through scratch unless its order is the rank order (interposer.cpp): one local copy
    // of the whole buffer, read and written.
    auto topo_ring_us = [&] {
      double us =
          sched::make_plan(*in.topology, request_for(in, "ring-topo", kNcclStepUs, false)).predicted_us;
      if (c != Collective::AllReduce) {
        const std::vector<int> ring = sched::topology_aware_ring(*in.topology, *in.placement);
        if (!std::is_sorted(ring.begin(), ring.end()))  // not the identity permutation
          us += 2.0 * bytes * sched::CostParams{}.gamma_us_per_byte;
      }
      return us;
    };
    // A topocoll schedule: the host work and launches of each step on the NCCL/CUDA
    // backend come on top of the model's per-step alpha.
    const double schedule_alpha = sched::CostParams{}.alpha_us + config.step_overhead_us;

    if (config.algo == AlgoChoice::NcclTopoRing) {
      if (c == Collective::AllToAll) return nccl_route("nccl-topo-ring has no all-to-all form", nccl_us);
      if (config.ring_comm == RingCommMode::Off)
        return nccl_route("TOPOCOLL_ALGO=nccl-topo-ring with TOPOCOLL_RING_COMM=off", nccl_us);
      auto p = std::make_shared<Route>();
      p->target = RouteTarget::NcclTopoRing;
      p->algo = "nccl-topo-ring";
      p->nccl_us = nccl_us;
      p->predicted_us = topo_ring_us();
      p->reason = "TOPOCOLL_ALGO=nccl-topo-ring";
      return p;
    }
    if (config.algo == AlgoChoice::Schedule) {
      // The registry's algorithm of that name, as `topocoll plan --algo` plans it.
      const std::string forced = "TOPOCOLL_ALGO=" + config.schedule_algo;
      sched::Plan planned;
      try {
        planned = sched::make_plan(*in.topology, request_for(in, config.schedule_algo, schedule_alpha, true));
      } catch (const std::invalid_argument& e) {
        return nccl_route(forced + " does not apply (" + e.what() + "); using NCCL", nccl_us);
      }
      if (c == Collective::AllReduce && !planned.schedule.claims_bitwise_identical) {
        // Served as asked (the paper's algorithm, for comparison), said once: auto never
        // picks it (sched/plan.h kNotBitwiseIdentical).
        TC_ONCE(TC_WARN("%s: allreduce served as forced, but %s; TOPOCOLL_ALGO=auto never picks it",
                        forced.c_str(), std::string(sched::kNotBitwiseIdentical).c_str()));
        return schedule_route(std::move(planned), in, nccl_us,
                              forced + " (" + std::string(sched::kNotBitwiseIdentical) + ")");
      }
      return schedule_route(std::move(planned), in, nccl_us, forced);
    }

    // Auto: NCCL, NCCL on the topology ring, or the planner's fastest schedule. Another
    // route must be predicted TOPOCOLL_AUTO_MARGIN times faster than NCCL's best: a
    // mis-modelled win costs users more than a missed one.
    const double margin = std::max(1.0, config.auto_margin);
    std::string best = "nccl";
    double best_us = nccl_us / margin;
    if (c != Collective::AllToAll && config.ring_comm != RingCommMode::Off) {
      const double us = topo_ring_us();
      if (us < best_us) {
        best = "nccl-topo-ring";
        best_us = us;
      }
    }
    sched::Plan planned;
    bool have_schedule = false;
    if (c != Collective::AllToAll) {  // NCCL's all-to-all is already the direct pattern
      try {
        planned = sched::make_plan(*in.topology, request_for(in, "auto", schedule_alpha, true));
        have_schedule = true;
      } catch (const std::invalid_argument&) {
      }
    }
    if (have_schedule && planned.predicted_us < best_us) {
      const std::string why = "auto: " + planned.algo + " " + format_us(planned.predicted_us) +
                              " vs " + nccl_name + " " + format_us(nccl_us);
      return schedule_route(std::move(planned), in, nccl_us, why);
    }
    if (best == "nccl")
      return nccl_route("auto: " + nccl_name + " " + format_us(nccl_us) + ", nothing predicted " +
                           format_ratio(margin) + "x faster",
                       nccl_us);
    auto p = std::make_shared<Route>();
    p->target = RouteTarget::NcclTopoRing;
    p->algo = best;
    p->predicted_us = best_us;
    p->nccl_us = nccl_us;
    p->reason = "auto: nccl-topo-ring " + format_us(best_us) + " vs " + nccl_name + " " + format_us(nccl_us);
    return p;
  } catch (const std::bad_alloc&) {
    // Not this call's fault, and not its peers': they plan the same call and may serve it,
    // so a route to NCCL here would leave them waiting (route_for marks the rank out of step).
    throw;
  } catch (const std::exception& e) {
    // The same inputs fail the same way on every rank (planning does not depend on the
    // rank): all of them send the call to NCCL.
    return nccl_route(std::string("planning failed: ") + e.what());
  }
}

}  // namespace topocoll::plugin::interposer
