#include "sched/plan.h"

#include "sched/schedule_builder.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include "sched/all_to_all.h"
#include "sched/fc_direct.h"
#include "sched/halving_doubling.h"
#include "sched/hd_order.h"
#include "sched/recursive_doubling.h"
#include "sched/hierarchical.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/nap_log_step.h"
#include "sched/order_search.h"
#include "sched/pattern_load.h"
#include "sched/ring.h"
#include "sched/ring_order.h"
#include "sched/site_major_order.h"
#include "sched/schedule_builder.h"
#if __has_include("sched/verifier.h")
#include "sched/verifier.h"
#define TOPOCOLL_HAVE_VERIFIER 1
#endif

namespace topocoll::sched {

using topo::Topology;

const std::vector<std::string>& plan_algorithms() {
  static const std::vector<std::string> all = {"ring", "ring-topo", "hd", "hd-naive", "rd", "fc",
                                               "fc-direct", "hier", "hier-hd", "direct"};
  return all;
}

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

// Whole-buffer algorithms move P^2 transfers per step; beyond this their schedules would
// not fit in memory, and the network would not favour them anyway.
constexpr int kMaxDirectRanks = 1024;
// Rings have 2(P-1) steps: their IR grows as P^2 (about 1 GB at 1024 ranks). `auto` stops
// considering them earlier, where HD and the hierarchical schedules win anyway.
constexpr int kMaxRingRanks = 1024;
constexpr int kMaxAutoRingRanks = 512;

struct NotApplicable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Generated {
  Schedule schedule;
  std::vector<int> order;
  RankOrder quality;
};

// The sends of every step of a schedule as an order-search pattern (weights: largest send).
Pattern schedule_pattern(const Schedule& s) {
  Pattern pattern(s.num_steps());
  std::vector<Flow> flows;
  for (int st = 0; st < s.num_steps(); ++st) {
    step_flows(s, st, 1, flows);
    double bytes = 0;
    for (const Flow& f : flows) {
      pattern[st].pairs.emplace_back(f.src, f.dst);
      bytes = std::max(bytes, double(f.bytes));
    }
    pattern[st].bytes = bytes;
  }
  return pattern;
}

// Ranks grouped for the hierarchical schedule: NAP packages, or the hosts of a multi-GPU
// BiGraph. Throws NotApplicable unless every group holds the same number of ranks.
int group_size_for(const Topology& t, const Placement& p) {
  std::map<int, int> per_group;
  for (int e : p.endpoint_of_rank) {
    const auto& ep = t.endpoints()[e];
    ++per_group[t.kind() == topo::TopologyKind::Nap ? ep.package : ep.host_index];
  }
  int size = per_group.begin()->second;
  for (auto [g, n] : per_group)
    if (n != size)
      throw NotApplicable("hier: groups (" +
                          std::string(t.kind() == topo::TopologyKind::Nap ? "packages" : "hosts") +
                          ") hold different numbers of ranks");
  if (per_group.size() < 2) throw NotApplicable("hier: all ranks are in one group");
  if (size < 2) throw NotApplicable("hier: one rank per group (nothing to do inside a group)");
  return size;
}

Generated generate(const Topology& t, const Placement& p, Collective c, const std::string& algo,
                   int64_t count, double bytes, RouteCache& routes) {
  int n = p.nranks();
  Generated g;
  auto need = [&](bool ok, const std::string& why) {
    if (!ok) throw NotApplicable(algo + ": " + why);
  };
  bool ar = c == Collective::AllReduce, rs = c == Collective::ReduceScatter,
       ag = c == Collective::AllGather, a2a = c == Collective::AllToAll;
  if (algo == "ring" || algo == "ring-topo") {
    need(n <= kMaxRingRanks, "more than " + std::to_string(kMaxRingRanks) +
                                 " ranks (2(P-1) steps: the schedule would need ~" +
                                 std::to_string(int64_t(n) * 2 * n * 3 * int64_t(sizeof(Op)) >> 30) +
                                 " GiB)");
    g.order = algo == "ring" ? rank_order_ring(n) : topology_aware_ring(t, p);
    g.schedule = ar   ? ring_allreduce(n, count, g.order)
                 : rs ? ring_reduce_scatter(n, count, g.order)
                 : ag ? ring_allgather(n, count, g.order)
                      : ring_all_to_all(n, count, g.order);  // store and forward
  } else if (algo == "hd" || algo == "hd-naive" || algo == "rd") {
    need(!a2a, "no halving-doubling all-to-all (use direct)");
    need(algo != "rd" || ar, "recursive doubling is the allreduce schedule (use hd)");
    // rd pairs ranks exactly as hd does (v XOR 2^s), so hd's placement serves it.
    auto build = [&](std::span<const int> order) {
      return algo == "rd" ? rd_allreduce(n, count, order)
             : ar ? hd_allreduce(n, count, order)
             : rs ? hd_reduce_scatter(n, count, order)
                  : hd_allgather(n, count, order);
    };
    if (algo == "hd-naive" || n < 2) {
      g.order = rank_order_ring(n);
    } else if (std::has_single_bit(unsigned(n))) {
      g.quality = hd_order(t, p, bytes, &routes, c);
      g.order = g.quality.rank_of_virtual;
    } else {
      // Non-power-of-two: the MPICH pre/post steps belong to the pattern too.
      Schedule identity = build({});
      g.quality = search_order(t, p, schedule_pattern(identity));
      g.order = g.quality.rank_of_virtual;
    }
    g.schedule = build(g.order);
  } else if (algo == "fc") {
    need(!rs, "the whole-vector log-step schedule exists for allreduce and allgather");
    need(n <= kMaxDirectRanks, "more than " + std::to_string(kMaxDirectRanks) + " ranks");
    g.order = package_major_order(t, p);
    g.schedule = ar   ? log_step_allreduce(n, count, g.order)
                 : ag ? log_step_allgather(n, count, g.order)
                      : direct_all_to_all(n, count, g.order);  // NAP Fig. 5
  } else if (algo == "fc-direct" || algo == "direct") {
    need(n <= kMaxDirectRanks, "more than " + std::to_string(kMaxDirectRanks) +
                                   " ranks (P^2 transfers per step)");
    need(algo == "fc-direct" || a2a, "direct is the all-to-all schedule");
    g.order = package_major_order(t, p);
    g.schedule = a2a  ? direct_all_to_all(n, count, g.order)
                 : ar ? fc_direct_allreduce(n, count, g.order)
                 : rs ? fc_direct_reduce_scatter(n, count, g.order)
                      : fc_direct_allgather(n, count, g.order);
  } else if (algo == "hier" || algo == "hier-hd") {
    need(ar, "hierarchical schedules exist for allreduce");
    HierParams hp;
    hp.group_size = group_size_for(t, p);
    bool nap = t.kind() == topo::TopologyKind::Nap;
    hp.inter = (algo == "hier-hd" || !nap) ? InterGroupAlgo::HalvingDoubling : InterGroupAlgo::Ring;
    need(algo == "hier" || nap, "hier-hd is the NAP variant (BiGraph hier already uses HD)");
    if (nap && hp.group_size == t.nodes_per_package() &&
        n / hp.group_size == t.package_count())
      hp.torus_dims = t.torus_dims();
    g.order = package_major_order(t, p);
    g.schedule = hierarchical_allreduce(n, count, hp, g.order);
  } else {
    std::string known;
    for (const auto& a : plan_algorithms()) known += (known.empty() ? "" : ", ") + a;
    throw std::invalid_argument("algo: unknown algorithm \"" + algo + "\" (known: " + known +
                                ", auto)");
  }
  if (g.quality.rank_of_virtual.empty()) g.quality.rank_of_virtual = g.order;
  return g;
}

Placement placement_for(const Topology& t, const PlanRequest& r) {
  if (!r.endpoints.empty()) return explicit_endpoints(t, r.endpoints);
  return first_endpoints(t, r.nranks > 0 ? r.nranks : int(t.endpoints().size()));
}

const std::vector<std::string>& auto_candidates(Collective c) {
  static const std::vector<std::string> ar = {"ring", "ring-topo", "hd", "rd", "fc", "fc-direct",
                                              "hier", "hier-hd"};
  static const std::vector<std::string> rs = {"ring", "ring-topo", "hd", "fc-direct"};
  static const std::vector<std::string> ag = {"ring", "ring-topo", "hd", "fc", "fc-direct"};
  static const std::vector<std::string> a2a = {"ring", "ring-topo", "direct"};
  switch (c) {
    case Collective::AllReduce: return ar;
    case Collective::ReduceScatter: return rs;
    case Collective::AllGather: return ag;
    case Collective::AllToAll: return a2a;
  }
  return ar;
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
  VerifyResult v = sched::verify(plan.schedule, options);
  plan.verified = v.ok;
  if (!v.ok) plan.verification = v.error;
  else if (v.bitwise_identical) plan.verification = "ok (bitwise identical on every rank)";
  else plan.verification = "ok (not bitwise identical: " + v.identity_note + ")";
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
                                "paths); plan part of it with --ranks");
  int64_t count = plan_count(r, n);
  RouteCache routes(t);

  if (r.algo != "auto") {
    Generated g;
    try {
      g = generate(t, plan.placement, r.collective, r.algo, count, double(r.bytes), routes);
    } catch (const NotApplicable& e) {
      throw std::invalid_argument(std::string("algo: ") + e.what());
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
  int best = -1;
  std::vector<Generated> kept;
  for (const auto& algo : auto_candidates(r.collective)) {
    PlanCandidate c;
    c.algo = algo;
    if (algo.rfind("ring", 0) == 0 && n > kMaxAutoRingRanks) {
      c.why_not = algo + ": auto considers rings up to " + std::to_string(kMaxAutoRingRanks) +
                  " ranks (2(P-1) steps)";
      plan.candidates.push_back(std::move(c));
      continue;
    }
    try {
      Generated g = generate(t, plan.placement, r.collective, algo, count, double(r.bytes), routes);
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
  if (best < 0) throw std::invalid_argument("algo: no algorithm applies to this request");
  plan.algo = plan.candidates[best].algo;
  plan.schedule = std::move(kept[0].schedule);
  plan.order = std::move(kept[0].order);
  plan.order_quality = std::move(kept[0].quality);
  finish(t, r, plan, routes);
  run_verifier(r, plan);
  return plan;
}

}  // namespace topocoll::sched
