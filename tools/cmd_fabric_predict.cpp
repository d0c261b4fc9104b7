// `topocoll fabric predict`: what the cost model predicts for a job's collectives on a fabric,
// per nccl-tests size, for every path a job on it can take — NCCL's own algorithms and
// protocols over the ranks as placed and over the topology-ordered split (nccl-topo-ring),
// sched/nccl_algorithm_model.h; topocoll's schedules from the planner (sched/plan.h) — so a
// measured nccl-tests line can be set beside the prediction for the path its log says ran
// (perf/gpu/fabric_nccl_tests.sh). The fabric's rates: a live fabric's, or a topology at the
// rate `fabric up` would give it.
#include <cstdio>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "config/value_grammar.h"
#include "fabric/fabric_plan.h"
#include "fabric/live_fabric.h"
#include "sched/algorithm_registry.h"
#include "sched/job_placement.h"
#include "sched/nccl_algorithm_model.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/ring_order.h"
#include "tools/topology_argument.h"
#include "tools/fabric_verbs.h"
#include "tools/flag_value.h"
#include "tools/split_list.h"
#include "topo/topology_json.h"

namespace topocoll::cli {

const char* const kFabricPredictUsage =
    "usage: topocoll fabric predict (--name N | --topo FILE [--rate-mbit R | --scale F])\n"
    "                               (--ranks R | --placement endpoints=E1,E2,...)\n"
    "                               [--placement P] [--colls allreduce,reduce_scatter,allgather]\n"
    "                               [--sizes 256K:64M] [--factor 4] [--json]\n"
    "Predicted microseconds per nccl-tests size for a job of R ranks placed as P (see `fabric run`)\n"
    "on the fabric's emulated rates: NCCL's Ring, Tree and PAT with each protocol over the ranks as\n"
    "placed (`nccl`) and over the topology-ordered split of the interposer's nccl-topo-ring\n"
    "(`nccl_topology_order`), and topocoll's schedules (`topocoll`; `auto` is the planner's pick;\n"
    "with --json each schedule's time step by step too, `topocoll_steps`).\n"
    "Sizes run from the first bound to the second, times --factor (as nccl-tests -b -e -f).\n";

namespace {

struct PredictArgs {
  std::string name, topo;
  fabric::FabricOptions options;
  int ranks = 0;
  std::string placement = "scheduler";
  std::vector<std::string> colls = {"allreduce", "reduce_scatter", "allgather"};
  int64_t min_bytes = 256 << 10, max_bytes = 64 << 20;
  int64_t factor = 4;
  bool json = false;
};

PredictArgs parse(std::span<const std::string> args) {
  PredictArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (f == "--name") a.name = flag_value(args, i);
    else if (f == "--topo") a.topo = flag_value(args, i);
    else if (f == "--rate-mbit") a.options.rate_mbit = positive_argument(f, flag_value(args, i));
    else if (f == "--scale") a.options.scale = positive_argument(f, flag_value(args, i));
    else if (f == "--ranks") a.ranks = int(config::count_argument(f, flag_value(args, i), 1, 1024));
    else if (f == "--placement") a.placement = flag_value(args, i);
    else if (f == "--colls") a.colls = split_list(flag_value(args, i), ',');
    else if (f == "--sizes") {
      const auto bounds = split_list(flag_value(args, i), ':');
      if (bounds.size() != 2) throw std::invalid_argument("--sizes: expected MIN:MAX, like 256K:64M");
      a.min_bytes = config::size_argument(f, bounds[0], 1, kMaxArgumentBytes);
      a.max_bytes = config::size_argument(f, bounds[1], a.min_bytes, kMaxArgumentBytes);
    } else if (f == "--factor") a.factor = config::count_argument(f, flag_value(args, i), 2, 1024);
    else if (f == "--json") a.json = true;
    else throw std::invalid_argument("fabric predict: unknown argument '" + f + "'\n" + kFabricPredictUsage);
  }
  if (a.name.empty() == a.topo.empty()) throw std::invalid_argument(std::string("fabric predict: --name or --topo\n") + kFabricPredictUsage);
  if (!a.name.empty() && (a.options.rate_mbit != 0 || a.options.scale != 0))
    throw std::invalid_argument("fabric predict: a live fabric has its rates; --rate-mbit and --scale go with --topo");
  // The same rule as `fabric run` and `place`: a job has a size; none given is not "every endpoint".
  if (a.ranks == 0 && sched::parse_job_placement(a.placement).kind != sched::JobPlacement::Kind::Endpoints)
    throw std::invalid_argument("fabric predict needs --ranks R (or --placement endpoints=...)");
  return a;
}

sched::NcclCollective nccl_collective(sched::Collective c) {
  switch (c) {
    case sched::Collective::ReduceScatter: return sched::NcclCollective::ReduceScatter;
    case sched::Collective::AllGather: return sched::NcclCollective::AllGather;
    default: return sched::NcclCollective::AllReduce;
  }
}

int hosts_of(const topo::Topology& t, const std::vector<int>& endpoints) {
  std::set<int> hosts;
  for (int e : endpoints) hosts.insert(t.endpoints()[e].host_index);
  return int(hosts.size());
}

// NCCL's algorithms with every protocol NCCL could run them with, keyed "Ring/Simple".
nlohmann::json nccl_predictions(const topo::Topology& t, const std::vector<int>& endpoints, sched::Collective c,
                                int64_t bytes) {
  const sched::NcclAlgorithmModel model(t, sched::explicit_endpoints(t, endpoints), hosts_of(t, endpoints),
                                        sched::default_nccl_latencies());
  nlohmann::json out = nlohmann::json::object();
  for (int algo : {sched::kNcclRing, sched::kNcclTree, sched::kNcclPat})
    for (int proto = 0; proto < sched::kNumNcclProtocols; ++proto)
      if (const auto us = model.predict_us(nccl_collective(c), algo, proto, double(bytes)))
        out[std::string(sched::nccl_algorithm_name(algo)) + "/" + sched::nccl_protocol_name(proto)] = *us;
  return out;
}

// Each schedule's total, and into `steps` its time step by step (the cost model's StepCost,
// what TOPOCOLL_STEP_TIMES measures per step).
nlohmann::json topocoll_predictions(const topo::Topology& t, const std::vector<int>& endpoints, sched::Collective c,
                                    int64_t bytes, nlohmann::json& steps) {
  nlohmann::json out = nlohmann::json::object();
  steps = nlohmann::json::object();
  sched::PlanRequest req;
  req.collective = c;
  req.bytes = bytes;
  req.endpoints = endpoints;
  req.verify = false;
  req.keep_link_detail = false;
  for (const sched::Algorithm& algorithm : sched::algorithms()) {
    req.algo = std::string(algorithm.name);
    try {
      const sched::Plan plan = sched::make_plan(t, req);
      out[req.algo] = plan.predicted_us;
      nlohmann::json& per_step = steps[req.algo] = nlohmann::json::array();
      for (const sched::StepCost& s : plan.cost.steps) per_step.push_back(s.time_us);
    } catch (const std::invalid_argument&) {
      // Not applicable to this collective, topology or rank count.
    }
  }
  req.algo = "auto";
  try {
    const sched::Plan plan = sched::make_plan(t, req);
    out["auto"] = {{"algo", plan.algo}, {"us", plan.predicted_us}};
  } catch (const std::invalid_argument&) {
  }
  return out;
}

}  // namespace

int fabric_predict(std::span<const std::string> args) {
  const PredictArgs a = parse(args);
  topo::Topology t;
  std::string source;
  if (!a.name.empty()) {
    const fabric::LiveFabric f = fabric::LiveFabric::open(a.name);
    t = f.modelled_topology();
    source = "fabric " + f.name();
  } else {
    const topo::Topology file = load_topology_argument(a.topo);
    const fabric::FabricPlan plan = fabric::plan_fabric(file, a.options);
    t = fabric::emulated_topology(file, plan);
    source = a.topo + " at x" + std::to_string(plan.rate_scale) + " of its rates";
  }
  const sched::JobPlacement placement = sched::parse_job_placement(a.placement);
  const std::vector<int> endpoints = sched::place_job(t, a.ranks, placement);
  // The interposer's nccl-topo-ring: NCCL on a communicator numbered in ring order.
  std::vector<int> ordered;
  for (int rank : sched::topology_aware_ring(t, sched::explicit_endpoints(t, endpoints)))
    ordered.push_back(endpoints[rank]);

  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : a.colls) {
    sched::Collective c;
    if (!sched::parse_collective(name, c) || c == sched::Collective::AllToAll)
      throw std::invalid_argument("--colls: '" + name + "': allreduce, reduce_scatter or allgather");
    for (int64_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= a.factor) {
      nlohmann::json steps;
      nlohmann::json mine = topocoll_predictions(t, endpoints, c, bytes, steps);
      rows.push_back({{"coll", name},
                      {"bytes", bytes},
                      {"ranks", int(endpoints.size())},
                      {"placement", sched::to_string(placement)},
                      {"nccl", nccl_predictions(t, endpoints, c, bytes)},
                      {"nccl_topology_order", nccl_predictions(t, ordered, c, bytes)},
                      {"topocoll", std::move(mine)},
                      {"topocoll_steps", std::move(steps)}});
    }
  }
  if (a.json) {
    std::cout << rows.dump(1) << "\n";
    return 0;
  }
  std::printf("# predicted us, %zu ranks placed %s on %s\n", endpoints.size(), sched::to_string(placement).c_str(),
              source.c_str());
  std::printf("%-15s %10s %12s %12s %12s %12s %12s %12s %12s\n", "coll", "size", "Ring/Simple", "Tree/Simple",
              "PAT/Simple", "topo-ring", "ring-topo", "hd", "auto");
  auto cell = [](const nlohmann::json& j, const char* key) {
    char buf[32];
    if (!j.contains(key)) return std::string("-");
    const double us = j[key].is_object() ? j[key]["us"].get<double>() : j[key].get<double>();
    std::snprintf(buf, sizeof buf, "%.1f", us);
    return std::string(buf);
  };
  for (const auto& r : rows)
    std::printf("%-15s %10lld %12s %12s %12s %12s %12s %12s %12s %s\n", r["coll"].get<std::string>().c_str(),
                static_cast<long long>(r["bytes"].get<int64_t>()), cell(r["nccl"], "Ring/Simple").c_str(),
                cell(r["nccl"], "Tree/Simple").c_str(), cell(r["nccl"], "PAT/Simple").c_str(),
                cell(r["nccl_topology_order"], "Ring/Simple").c_str(), cell(r["topocoll"], "ring-topo").c_str(),
                cell(r["topocoll"], "hd").c_str(), cell(r["topocoll"], "auto").c_str(),
                r["topocoll"].contains("auto") ? r["topocoll"]["auto"]["algo"].get<std::string>().c_str() : "");
  return 0;
}

}  // namespace topocoll::cli
