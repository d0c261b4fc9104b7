// `topocoll plan`: placement, schedule steps, worst link load per step and predicted time of
// one collective on one topology; --json follows docs/plan-format.md.
#include <climits>
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "config/value_grammar.h"
#include "exec/pipeline.h"
#include "sched/algorithm_registry.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/plan.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/cost_flags.h"
#include "tools/flag_value.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using nlohmann::json;
using sched::Plan;
using sched::PlanRequest;
using topo::NodeRef;
using topo::Topology;

std::string usage() {
  return
    "usage: topocoll plan --topo FILE --coll allreduce|reduce_scatter|allgather|alltoall\n"
    "                     [--algo NAME|auto]\n"
    "                     --bytes N[K|M|G] [--ranks N] [--elem-size B] [--alpha-us X]\n"
    "                     [--alpha-msg-us X]\n"
    "                     [--gamma-gbs G] [--no-verify] [--json]\n"
    "Plans one collective: placement, steps, worst link load per step, predicted time.\n"
    "--bytes is nccl-tests' size (allreduce: the vector; others: the whole P-rank buffer).\n"
    "--ranks N plans for the first N endpoints (a partially filled cluster).\n"
    "--algo is an algorithm of `topocoll algorithms` (" + sched::algorithm_list() + "),\n"
    "or auto (the default): the fastest predicted of those auto weighs for the collective.\n";
}

// Whether the plan's order came from the HD order search (hd, rd: sched/hd_order.h), whose
// load and lower bound are then worth showing; the other orders leave them unset.
bool searched_order(const Plan& plan) {
  const sched::RankOrder& q = plan.order_quality;
  return !q.rank_of_virtual.empty() && (q.closed_form || q.max_load > 0 || q.total_hops > 0);
}

std::string attach_of(const Topology& t, int endpoint) {
  const auto& e = t.endpoints()[endpoint];
  if (e.attach_switch >= 0) return t.switches()[e.attach_switch].id;
  if (e.package >= 0) return "package " + std::to_string(e.package);
  return "";
}

json placement_json(const Topology& t, const Plan& plan) {
  json out = json::array();
  for (int r = 0; r < plan.placement.nranks(); ++r) {
    int e = plan.placement.endpoint_of_rank[r];
    const auto& ep = t.endpoints()[e];
    json row = {{"rank", r}, {"endpoint", ep.id}, {"host", ep.host}, {"gpu", ep.gpu}};
    if (ep.attach_switch >= 0) row["switch"] = t.switches()[ep.attach_switch].id;
    if (ep.package >= 0) {
      row["package"] = ep.package;
      row["node"] = ep.node;
    }
    out.push_back(std::move(row));
  }
  return out;
}

json plan_json(const Topology& t, const Plan& plan) {
  json doc;
  doc["format"] = "topocoll-plan/1";
  doc["topology"] = t.name();
  doc["collective"] = std::string(sched::to_string(plan.collective));
  doc["algo"] = plan.algo;
  doc["bytes"] = plan.bytes;
  doc["elem_size"] = plan.elem_size;
  doc["count"] = plan.schedule.count;
  doc["ranks"] = plan.placement.nranks();
  doc["placement"] = placement_json(t, plan);
  doc["order"] = plan.order;
  if (searched_order(plan))
    doc["order_quality"] = {{"max_load", plan.order_quality.max_load},
                            {"lower_bound", plan.order_quality.lower_bound},
                            {"total_hops", plan.order_quality.total_hops},
                            {"closed_form", plan.order_quality.closed_form}};
  sched::RouteCache routes(t);
  std::vector<sched::Flow> flows;
  std::vector<sched::PathView> paths;
  json steps = json::array();
  for (int s = 0; s < plan.schedule.num_steps(); ++s) {
    sched::step_flows(plan.schedule, s, plan.elem_size, flows);
    json fl = json::array();
    for (const auto& f : flows) {
      routes.paths(plan.placement.endpoint_of_rank[f.src], plan.placement.endpoint_of_rank[f.dst],
                   paths);
      json row = {{"src", f.src}, {"dst", f.dst}, {"bytes", f.bytes}};
      json all = json::array();
      for (const auto& p : paths) {
        json links = json::array();
        p.for_each_link([&](int l) { links.push_back(l); });
        all.push_back({{"links", links}, {"fraction", p.fraction}});
      }
      row["links"] = all.empty() ? json::array() : all[0]["links"];
      if (all.size() > 1) row["paths"] = all;
      fl.push_back(std::move(row));
    }
    const auto& load = plan.link_load.steps[s];
    const auto& cost = plan.cost.steps[s];
    json step = {{"index", s},
                 {"flows", fl},
                 {"max_link_load", load.max_load},
                 {"bottleneck_link", load.bottleneck_link},
                 {"time_us", cost.time_us},
                 {"transfer_us", cost.transfer_us},
                 {"reduce_us", cost.reduce_us},
                 {"rounds", cost.rounds}};
    json loads = json::array();
    for (const auto& u : load.links) loads.push_back({{"link", u.link}, {"flows", u.flows}, {"bytes", u.bytes}});
    step["link_loads"] = loads;
    steps.push_back(std::move(step));
  }
  doc["steps"] = steps;
  json links = json::array();
  for (const auto& l : t.links())
    links.push_back({{"id", l.id},
                     {"from", t.node_id(l.from)},
                     {"to", t.node_id(l.to)},
                     {"kind", std::string(topo::to_string(l.kind))},
                     {"gbps", l.gbps},
                     {"latency_us", l.latency_us}});
  doc["links"] = links;
  doc["max_link_load"] = plan.link_load.max_load;
  doc["predicted_us"] = plan.predicted_us;
  doc["busbw_gbs"] = plan.busbw_gbs;
  doc["verification"] = {{"ok", plan.verified}, {"message", plan.verification}};
  json cands = json::array();
  for (const auto& c : plan.candidates) {
    json row = {{"algo", c.algo}, {"applicable", c.applicable}};
    if (c.applicable) {
      row["predicted_us"] = c.predicted_us;
      row["max_link_load"] = c.max_link_load;
    } else {
      row["why_not"] = c.why_not;
    }
    cands.push_back(std::move(row));
  }
  doc["candidates"] = cands;
  return doc;
}

void print_text(const Topology& t, const Plan& plan) {
  int n = plan.placement.nranks();
  std::printf("topology %s: %d ranks, %s of %lld bytes, algorithm %s\n", t.name().c_str(), n,
              std::string(sched::to_string(plan.collective)).c_str(), (long long)plan.bytes,
              plan.algo.c_str());
  for (const auto& c : plan.candidates) {
    if (c.applicable)
      std::printf("  candidate %-10s %12.2f us   max link load %g%s\n", c.algo.c_str(),
                  c.predicted_us, c.max_link_load, c.algo == plan.algo ? "   <- picked" : "");
    else
      std::printf("  candidate %-10s not applicable: %s\n", c.algo.c_str(), c.why_not.c_str());
  }
  std::printf("\nplacement (rank: endpoint host %s)\n", t.kind() == topo::TopologyKind::Nap ? "package" : "switch");
  const int shown = n <= 96 ? n : 64;  // large clusters: the head, the rest in --json
  for (int r = 0; r < shown; ++r) {
    int e = plan.placement.endpoint_of_rank[r];
    std::printf("  %5d: %-12s %-10s %s\n", r, t.endpoints()[e].id.c_str(),
                t.endpoints()[e].host.c_str(), attach_of(t, e).c_str());
  }
  if (shown < n) std::printf("  ... %d more ranks (--json lists them all)\n", n - shown);
  if (searched_order(plan))
    std::printf("\nHD order: worst link load %g, lower bound %g, %s\n",
                plan.order_quality.max_load, plan.order_quality.lower_bound,
                plan.order_quality.closed_form ? "closed form (EFLOPS)" : "search");
  std::printf("\n%5s %7s %14s %10s  %-30s %12s\n", "step", "flows", "bytes/flow max", "max load",
              "bottleneck link", "time us");
  for (int s = 0; s < plan.schedule.num_steps(); ++s) {
    const auto& l = plan.link_load.steps[s];
    std::string link = "-";
    if (l.bottleneck_link >= 0) {
      const auto& lk = t.links()[l.bottleneck_link];
      link = t.node_id(lk.from) + "->" + t.node_id(lk.to) + " (#" + std::to_string(lk.id) + ")";
    }
    std::printf("%5d %7d %14lld %10g  %-30s %12.3f\n", s, l.flows, (long long)l.max_flow_bytes,
                l.max_load, link.c_str(), plan.cost.steps[s].time_us);
  }
  std::printf("\nworst link load %g; predicted %.3f us; busbw %.2f GB/s\nverification: %s\n",
              plan.link_load.max_load, plan.predicted_us, plan.busbw_gbs,
              plan.verification.c_str());
}

int run_plan(std::span<const std::string> args) {
  PlanRequest req;
  req.cost.pipeline = exec::PipelineOptions::process_default().shape;  // what the engine runs
  std::string topo_file;
  bool as_json = false, have_coll = false, have_bytes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return cli::flag_value(args, i); };
    if (a == "--help" || a == "-h") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    } else if (a == "--topo") {
      topo_file = value();
    } else if (a == "--coll") {
      const std::string& v = value();
      if (!sched::parse_collective(v, req.collective))
        throw std::invalid_argument("--coll: unknown collective \"" + v + "\"");
      have_coll = true;
    } else if (a == "--algo") {
      req.algo = value();
    } else if (a == "--bytes") {
      req.bytes = config::size_argument(a, value(), 0, kMaxArgumentBytes);
      have_bytes = true;
    } else if (a == "--ranks") {
      req.nranks = int(config::count_argument(a, value(), 1, INT_MAX));
    } else if (a == "--elem-size") {
      req.elem_size = size_t(config::count_argument(a, value(), 1, 1024));
    } else if (a == "--alpha-msg-us" || a == "--alpha-us" || a == "--gamma-gbs") {
      parse_cost_flag(a, value(), req.cost);
    } else if (a == "--no-verify") {
      req.verify = false;
    } else if (a == "--json") {
      as_json = true;
    } else {
      std::fprintf(stderr, "topocoll plan: unknown argument \"%s\"\n%s", a.c_str(), usage().c_str());
      return 2;
    }
  }
  if (topo_file.empty() || !have_coll || !have_bytes) {
    std::string missing;
    for (const auto& [given, flag] : {std::pair{!topo_file.empty(), "--topo"}, std::pair{have_coll, "--coll"},
                                      std::pair{have_bytes, "--bytes"}})
      if (!given) missing += (missing.empty() ? "" : ", ") + std::string(flag);
    std::fprintf(stderr, "topocoll plan: missing %s (--topo, --coll and --bytes are required)\n%s", missing.c_str(),
                 usage().c_str());
    return 2;
  }
  if (req.bytes % int64_t(req.elem_size) != 0) {  // 130 bytes of floats planned 128 and said 130
    std::fprintf(stderr, "topocoll plan: --bytes %lld is not a whole number of %zu-byte elements (--elem-size)\n",
                 static_cast<long long>(req.bytes), req.elem_size);
    return 2;
  }
  Topology t = load_topology_argument(topo_file);
  Plan plan = sched::make_plan(t, req);
  // The gathers' size is P ranks' parts: one that does not split into whole elements per
  // rank would be planned rounded down and reported as asked (100 bytes over 32 ranks: 0).
  const int64_t planned =
      sched::size_of_count(plan.schedule.collective, plan.schedule.count, req.elem_size, plan.schedule.nranks);
  if (planned != req.bytes) {
    std::fprintf(stderr,
                 "topocoll plan: --bytes %lld of %s over %d ranks is not a whole number of %zu-byte elements per "
                 "rank (a multiple of %lld bytes); %lld would be planned\n",
                 static_cast<long long>(req.bytes), std::string(sched::to_string(plan.schedule.collective)).c_str(),
                 plan.schedule.nranks, req.elem_size, static_cast<long long>(int64_t(req.elem_size) * plan.schedule.nranks),
                 static_cast<long long>(planned));
    return 2;
  }
  if (as_json)
    std::cout << plan_json(t, plan).dump(1) << "\n";
  else
    print_text(t, plan);
  return plan.verified || !req.verify || plan.verification.rfind("not run", 0) == 0 ? 0 : 1;
}

}  // namespace

TOPOCOLL_COMMAND("plan", "placement, schedule, per-step link loads and predicted time", run_plan);

}  // namespace topocoll::cli
