#include "sched/plan.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "sched/algorithm_registry.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/ring_order.h"
#include "sched/schedule_builder.h"
#if __has_include("sched/verifier.h")
#include "sched/verifier.h"
#define TOPOCOLL_HAVE_VERIFIER 1
#endif

namespace topocoll::sched {

using topo::Topology;

bool parse_collective(std::string_view name, Collective& out) {
  std::string n;
  for (char c : name)
    if (c != '_' && c != '-') n += char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "allreduce") out = Collective::AllReduce;
  else if (n == "reducescatter") out = Collective::ReduceScatter;
  else if (n == "allgather") out = Collective::AllGather;
  else if (n == "alltoall") out = Collective::AllToAll;
  else return false;
  return true;
}

int64_t plan_count(const PlanRequest& r, int nranks) {
  if (r.elem_size == 0) throw std::invalid_argument("elem_size: must be > 0");
  if (r.bytes < 0) throw std::invalid_argument("bytes: must be >= 0");
  return count_of_size(r.collective, r.bytes, r.elem_size, nranks);
}

namespace {

struct NotApplicable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Generated {
  Schedule schedule;
  std::vector<int> order;
  RankOrder quality;
};

// One registered algorithm on this placement: its order, then its schedule in that order.
Generated generate(const Topology& t, const Placement& p, Collective c, const Algorithm& algorithm,
                   int64_t count, double bytes, RouteCache& routes) {
  BuildInput input;
  input.shape = {.collective = c, .nranks = p.nranks(), .topology = &t, .placement = &p};
  input.count = count;
  if (const std::string why = refusal(algorithm, input.shape); !why.empty())
    throw NotApplicable(std::string(algorithm.name) + ": " + why);
  Generated g;
  if (algorithm.order)
    g.quality = algorithm.order({.topology = t, .placement = p, .collective = c, .count = count,
                                 .bytes = bytes, .routes = routes});
  else
    g.quality.rank_of_virtual = rank_order_ring(p.nranks());
  g.order = g.quality.rank_of_virtual;
  input.order = g.order;
  g.schedule = build_schedule(algorithm, input);
  return g;
}

const Algorithm& requested_algorithm(const std::string& name) {
  if (const Algorithm* a = find_algorithm(name)) return *a;
  throw std::invalid_argument("unknown algorithm \"" + name + "\" (known: " + algorithm_list() + ", auto)");
}

Placement placement_for(const Topology& t, const PlanRequest& r) {
  if (!r.endpoints.empty()) return explicit_endpoints(t, r.endpoints);
  return first_endpoints(t, r.nranks > 0 ? r.nranks : int(t.endpoints().size()));
}

void finish(const Topology& t, const PlanRequest& r, Plan& plan, RouteCache& routes) {
  LinkLoadOptions options;
  options.keep_links = r.keep_link_detail;
  ScheduleAnalysis a =
      analyze_schedule(plan.schedule, plan.placement, r.elem_size, routes, r.cost, options);
  plan.link_load = std::move(a.load);
  plan.cost = std::move(a.cost);
  plan.predicted_us = plan.cost.total_us;
  plan.busbw_gbs = busbw_gbs(r.collective, plan.placement.nranks(), double(r.bytes),
                             plan.predicted_us);
  (void)t;
}

void run_verifier(const PlanRequest& r, Plan& plan) {
#ifdef TOPOCOLL_HAVE_VERIFIER
  if (!r.verify) {
    plan.verification = "not run (verify off)";
    return;
  }
  VerifyOptions options;
  options.element_bytes = int(r.elem_size);
  // In place too, as the interposer serves it: a schedule that reads what it already
  // overwrote there fails here, not on a user's data.
  const VerifyResult v = sched::verify_as_served(plan.schedule, options);
  plan.verified = v.ok;
  if (!v.ok) plan.verification = v.error;
  else if (v.bitwise_identical) plan.verification = "ok (bitwise identical on every rank)";
  else plan.verification = "ok, but the ranks do not end bitwise identical (" + v.identity_note + ")";
#else
  (void)r;
  plan.verification = "not run (no verifier in this build)";
#endif
}

}  // namespace

Plan make_plan(const Topology& t, const PlanRequest& r) {
  if (r.bytes < 0) throw std::invalid_argument("bytes: must be >= 0");
  if (r.elem_size == 0) throw std::invalid_argument("elem_size: must be > 0");
  // Block splits on 16-byte boundaries where the element size divides 16, so the reduce
  // kernels stay vectorised on every block (sched/schedule_builder.h, BlockSplit).
  const ScopedSplitAlignment alignment(16 % r.elem_size == 0 ? int64_t(16 / r.elem_size) : 1);
  Plan plan;
  plan.collective = r.collective;
  plan.bytes = r.bytes;
  plan.elem_size = r.elem_size;
  plan.placement = placement_for(t, r);
  int n = plan.placement.nranks();
  // Planning budget. NAP routes are multipath (k local switches, torus dimension orders),
  // so the order search and the per-link accounting grow with ranks x paths: 1,024 ranks
  // plan in seconds, 4,096 took minutes and a 65,536-endpoint torus gigabytes. Refused up
  // front, naming the size and the limit, rather than running unbounded.
  if (t.kind() == topo::TopologyKind::Nap && n > kMaxNapPlanRanks)
    throw std::invalid_argument("planning " + std::to_string(n) + " ranks of NAP topology \"" +
                                t.name() + "\" exceeds the planner's budget of " +
                                std::to_string(kMaxNapPlanRanks) +
                                " ranks on NAP (multipath routes make planning grow with ranks x "
                                "paths); plan part of it (a subset of its endpoints: --ranks or --endpoints where the "
                                "command has them)");
  int64_t count = plan_count(r, n);
  RouteCache routes(t);

  if (r.algo != "auto") {
    const Algorithm& algorithm = requested_algorithm(r.algo);
    Generated g;
    try {
      g = generate(t, plan.placement, r.collective, algorithm, count, double(r.bytes), routes);
    } catch (const NotApplicable& e) {
      throw std::invalid_argument(e.what());  // "<algo>: <why>"
    }
    plan.algo = r.algo;
    plan.schedule = std::move(g.schedule);
    plan.order = std::move(g.order);
    plan.order_quality = std::move(g.quality);
    finish(t, r, plan, routes);
    run_verifier(r, plan);
    return plan;
  }

  // auto: cost every applicable algorithm, keep the fastest (ties: the earlier in the list).
  // An allreduce must end bitwise identical on every rank (below).
  int best = -1;
  std::vector<Generated> kept;
  const AlgorithmShape shape{.collective = r.collective, .nranks = n, .topology = &t,
                             .placement = &plan.placement};
  for (const Algorithm& algorithm : algorithms()) {
    if (!algorithm.auto_collectives.contains(r.collective)) continue;
    PlanCandidate c;
    c.algo = std::string(algorithm.name);
    if (const std::string why = auto_refusal(algorithm, shape); !why.empty()) {
      c.why_not = c.algo + ": " + why;
      plan.candidates.push_back(std::move(c));
      continue;
    }
    try {
      Generated g = generate(t, plan.placement, r.collective, algorithm, count, double(r.bytes), routes);
      // An allreduce whose ranks end with different bits (each reducing in its own order)
      // can drift replicas apart (data-parallel weights): never chosen for the user.
      if (r.collective == Collective::AllReduce && !g.schedule.claims_bitwise_identical) {
        c.why_not = c.algo + ": " + std::string(kNotBitwiseIdentical);
        plan.candidates.push_back(std::move(c));
        continue;
      }
      ScheduleAnalysis a = analyze_schedule(g.schedule, plan.placement, r.elem_size, routes,
                                            r.cost, {.keep_links = false});
      c.applicable = true;
      c.predicted_us = a.cost.total_us;
      c.max_link_load = a.load.max_load;
      if (best < 0 || c.predicted_us < plan.candidates[best].predicted_us - 1e-9) {
        best = int(plan.candidates.size());
        kept.clear();
        kept.push_back(std::move(g));
      }
    } catch (const std::invalid_argument& e) {
      c.why_not = e.what();
    }
    plan.candidates.push_back(std::move(c));
  }
  if (best < 0) throw std::invalid_argument("auto: no algorithm applies to this request");
  plan.algo = plan.candidates[best].algo;
  plan.schedule = std::move(kept[0].schedule);
  plan.order = std::move(kept[0].order);
  plan.order_quality = std::move(kept[0].quality);
  finish(t, r, plan, routes);
  run_verifier(r, plan);
  return plan;
}

}  // namespace topocoll::sched
