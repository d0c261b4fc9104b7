// `topocoll accept`: checks a cluster against its topology file, cable by cable, and names
// what is wrong (accept/, docs/acceptance.md). One process per endpoint, started the way
// `bench` is: mpirun / srun / torchrun variables, --rank/--ranks/--bootstrap, or --fabric.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <thread>

#include "accept/acceptance_run.h"
#include "accept/report_files.h"
#include "config/env.h"
#include "config/value_grammar.h"
#include "exec/bootstrap.h"
#include "exec/local_launcher.h"
#include "exec/rank_environment.h"
#include "fabric/live_fabric.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/cost_flags.h"
#include "tools/fabric_launch.h"
#include "tools/flag_value.h"
#include "tools/split_list.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll accept --topo FILE [--budget 10m] [--report DIR] [--threshold 0.8]\n"
    "                       [--phases inventory,cables,wiring,collectives] [--streams N]\n"
    "                       [--gpu G] [--bind IP] [--endpoints E0,E1,...]\n"
    "                       [--rank R --ranks N --bootstrap HOST:PORT] | [--fabric NAME]\n"
    "Checks a cluster against its topology file: one process per endpoint (GPU + NIC).\n"
    "  1 inventory    every rank's host, GPU and NIC against the file: missing, extra,\n"
    "                 duplicated or misplaced endpoints\n"
    "  2 cables       contention-free rounds of flows over every cable in both directions;\n"
    "                 cables below the threshold of their rate, and dead ones, localised\n"
    "  3 wiring       path probes against the file's routes; slow flows re-run alone\n"
    "  4 collectives  every planner algorithm on every endpoint, results checked\n"
    "The exit code is 0 only when the cluster passes: 1 when something failed, 2 when the\n"
    "budget ended a phase before it checked everything. Ranks come from mpirun/srun/torchrun\n"
    "variables (as for `bench`), from --rank/--ranks/--bootstrap, or from --fabric NAME (one\n"
    "rank per endpoint of an emulated fabric, started here; with --topo too, they are checked\n"
    "against that file).\n"
    "  --budget T      bound on the whole run: 600, 90s, 10m (default 10m)\n"
    "  --report DIR    write report.json, report.txt and topology.png there\n"
    "  --threshold Q   a cable below Q of its expected rate fails (default 0.8)\n"
    "  --gpu G         the GPU this rank stands for (default LOCAL_RANK or 0)\n"
    "  --bind IP       this rank's NIC address (default: the NIC the file names, resolved)\n"
    "  --lane-marks L  where flows stripe over local switches (NAP): the socket mark that\n"
    "                  sends a flow by switch j, for each j (policy routing; CAP_NET_ADMIN)\n"
    "  --endpoints L   the endpoints this job should cover (default: all of the file)\n"
    "  --ranks N       with --fabric: start ranks on the first N of them only\n"
    "  --streams N     TCP connections per measured flow (1..64, default 4)\n"
    "  --max-flows N   at most N flows per cable round (default: the cables decide; on a\n"
    "                  fabric, what this machine's cores forward at its rates)\n"
    "  --coverage N    flows across each cable direction where the flows allow (default 3)\n"
    "  --alpha-us X, --alpha-msg-us X   the cost model's overheads per step and per message\n"
    "                  in the collectives' predictions (as for `bench`)\n";

struct AcceptArgs {
  accept::AcceptanceOptions options;
  std::string topo, fabric, bootstrap;
  std::vector<std::string> endpoints;
  int rank = -1, ranks = 0;
  bool gpu_given = false;
};

AcceptArgs parse_args(std::span<const std::string> args) {
  AcceptArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (f == "--topo") a.topo = value();
    else if (f == "--fabric") a.fabric = value();
    else if (f == "--budget") a.options.budget_s = config::duration_argument(f, value(), 1, 1e6);
    else if (f == "--report") a.options.report_dir = value();
    else if (f == "--threshold") a.options.threshold = config::number_argument(f, value(), 0.01, 1);
    else if (f == "--streams") a.options.streams = int(config::count_argument(f, value(), 1, 64));
    else if (f == "--coverage") a.options.coverage = int(config::count_argument(f, value(), 1, 16));
    else if (f == "--max-flows") a.options.max_flows_per_round = int(config::count_argument(f, value(), 1, 1000000));
    else if (f == "--phases") a.options.phases = split_list(value(), ',');
    else if (f == "--gpu") a.options.gpu = int(config::count_argument(f, value(), 0, 4095)), a.gpu_given = true;
    else if (f == "--bind") a.options.bind = value();
    else if (f == "--lane-marks") {  // TOPOCOLL_NET_LANE_MARKS's grammar (hex too, at most 16)
      const auto marks = config::parse_marks(value());
      if (!marks) throw std::invalid_argument(f + " " + config::quoted_value(args[i]) + ": " + marks.expected);
      a.options.lane_marks = *marks.value;
    } else if (f == "--endpoints") a.endpoints = split_list(value(), ',');
    else if (f == "--rank") a.rank = int(config::count_argument(f, value(), 0, 1000000));
    else if (f == "--ranks" || f == "-n") a.ranks = int(config::count_argument(f, value(), 1, 1000000));
    else if (f == "--bootstrap") a.bootstrap = value();
    else if (f == "--alpha-us" || f == "--alpha-msg-us") parse_cost_flag(f, value(), a.options.cost);
    else throw std::invalid_argument("unknown argument '" + f + "'\n" + kUsage);
  }
  for (const auto& p : a.options.phases)
    if (p != "inventory" && p != "cables" && p != "wiring" && p != "collectives")
      throw std::invalid_argument("--phases: unknown phase '" + p + "' (inventory, cables, wiring, collectives)");
  if (a.topo.empty() && a.fabric.empty())
    throw std::invalid_argument(std::string("give --topo FILE, --fabric NAME, or both\n") + kUsage);
  return a;
}

std::vector<int> endpoint_list(const topo::Topology& t, const std::vector<std::string>& names) {
  std::vector<int> out;
  for (const auto& n : names) {
    const auto e = t.find_endpoint_by_id(n);
    if (!e) throw std::invalid_argument("--endpoints: '" + n + "' is not an endpoint of " + t.name());
    if (std::find(out.begin(), out.end(), *e) != out.end())  // a typo, not a cluster's duplicate
      throw std::invalid_argument("--endpoints: '" + n + "' is named twice");
    out.push_back(*e);
  }
  return out;
}

// The file as the cluster should run it, and what a fabric knows besides. With --fabric and
// --topo both, the ranks run on the fabric and are checked against the file (an operator's
// file that may not describe the cluster), at the fabric's rates.
void load_topology(AcceptArgs& a) {
  if (a.fabric.empty()) {
    a.options.topology = load_topology_argument(a.topo);
    a.options.topology_file = a.topo;
    return;
  }
  const auto f = fabric::LiveFabric::open(a.fabric);
  if (a.topo.empty()) {
    // The fabric's file at its rates, without its faults: those are what acceptance finds.
    a.options.topology = fabric::emulated_topology(f.topology(), f.plan());
    a.options.topology_file = f.record().topology_file + " (fabric " + f.name() + ")";
  } else {
    a.options.topology = load_topology_argument(a.topo);
    a.options.topology.scale_rates(f.plan().rate_scale);
    a.options.topology_file = a.topo + " (on fabric " + f.name() + ")";
  }
  a.options.lane_marks = f.plan().lane_marks;
  // Every host of the fabric shares this machine's cores: a round's flows together stay
  // below what they forward without becoming the bottleneck (about 600 Mbit/s on two cores).
  if (a.options.max_flows_per_round == 0) {
    double fastest = 0;
    for (const auto& c : f.plan().cables) fastest = std::max({fastest, c.mbit_ab, c.mbit_ba});
    const double machine_mbit = 300.0 * std::max(1u, std::thread::hardware_concurrency());
    a.options.max_flows_per_round = std::max(2, int(machine_mbit / std::max(fastest, 1.0)));
  }
  // Where the fabric's routers and hosts answer from, as nodes of the file checked (by id).
  const auto& t = a.options.topology;
  for (const auto& e : f.plan().endpoints)
    if (const auto mine = t.find_endpoint_by_id(e.id))
      a.options.known_addresses[e.address] = t.graph_node({topo::NodeRef::Type::Endpoint, *mine});
  for (const auto& ns : f.plan().namespaces)
    if (ns.role == fabric::NamespaceRole::Switch)
      if (const auto mine = t.find_switch(ns.node))
        for (const auto& [dev, address] : ns.addresses)
          a.options.known_addresses[address.substr(0, address.find('/'))] =
              t.graph_node({topo::NodeRef::Type::Switch, *mine});
}

// Ranks of an acceptance run diverge between rounds by up to the budget (one rank probes
// the paths of many flows while another has none), so a round may wait that long.
std::chrono::milliseconds round_limit(const AcceptArgs& a) {
  return std::max(exec::kDefaultRoundLimit, std::chrono::milliseconds(int64_t(a.options.budget_s * 1000)));
}

int run_rank(AcceptArgs& a, const exec::RankEnvironment& env) {
  load_topology(a);
  a.options.expected_endpoints = endpoint_list(a.options.topology, a.endpoints);
  if (!a.gpu_given) a.options.gpu = accept::launcher_local_gpu(config::env());
  a.options.transport = net::TransportOptions::from_env(config::env());
  const auto root_address = exec::BootstrapAddress::parse(env.bootstrap);
  // Rank 0 writes the report: an unwritable --report fails now, not after the budget.
  if (env.rank == 0 && !a.options.report_dir.empty()) accept::prepare_report_dir(a.options.report_dir);
  std::unique_ptr<exec::BootstrapRoot> root;
  if (env.rank == 0 && !env.root_served_externally)
    root = std::make_unique<exec::BootstrapRoot>(root_address, env.nranks, std::chrono::seconds(60),
                                                 exec::kDefaultSilenceLimit, round_limit(a));
  exec::BootstrapClient group(root_address, env.rank, env.nranks, std::chrono::seconds(60),
                              exec::kDefaultSilenceLimit, round_limit(a));
  if (env.rank == 0) {
    std::printf("accept: %s (%s), %d ranks, budget %.0f s, threshold %.0f %%\n",
                a.options.topology.name().c_str(), a.options.topology_file.c_str(), env.nranks,
                a.options.budget_s, a.options.threshold * 100);
    std::fflush(stdout);
  }
  return accept::run_acceptance(a.options, group, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
}

int run_accept(std::span<const std::string> args) {
  for (const auto& x : args)
    if (x == "--help" || x == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
  AcceptArgs a = parse_args(args);
  if (a.rank >= 0) {
    if (a.ranks < 1 || a.rank >= a.ranks)
      throw std::invalid_argument("--rank " + std::to_string(a.rank) + " needs --ranks N > " + std::to_string(a.rank));
    exec::RankEnvironment env;
    env.rank = a.rank;
    env.nranks = a.ranks;
    env.bootstrap = a.bootstrap;
    if (env.bootstrap.empty())
      if (const auto from_env = exec::rank_environment_from_env(config::env())) env.bootstrap = from_env->bootstrap;
    if (env.bootstrap.empty()) throw std::invalid_argument("--rank needs --bootstrap HOST:PORT (rank 0's address)");
    return run_rank(a, env);
  }
  if (const auto env = exec::rank_environment_from_env(config::env())) {
    auto e = *env;
    if (!a.bootstrap.empty()) e.bootstrap = a.bootstrap;
    return run_rank(a, e);
  }
  if (a.fabric.empty())
    throw std::invalid_argument(
        "no ranks: start one process per endpoint under mpirun/srun/torchrun (or with --rank, "
        "--ranks and --bootstrap), or use --fabric NAME on an emulated fabric");
  if (!a.options.report_dir.empty()) accept::prepare_report_dir(a.options.report_dir);
  // One rank per endpoint of the fabric (or the ones --endpoints names).
  const FabricForLaunch opened = open_fabric_for_launch(a.fabric);
  const fabric::LiveFabric& f = opened.fabric;
  std::vector<int> endpoints = a.topo.empty() ? endpoint_list(f.topology(), a.endpoints) : std::vector<int>{};
  if (endpoints.empty())
    for (int e = 0; e < int(f.topology().endpoints().size()); ++e) endpoints.push_back(e);
  // --ranks N starts only the first N: a job short of processes, which acceptance names.
  if (a.ranks > 0 && a.ranks < int(endpoints.size())) endpoints.resize(a.ranks);
  const int ranks = int(endpoints.size());
  std::vector<std::string> child_args = {"accept"};
  child_args.insert(child_args.end(), args.begin(), args.end());
  const auto launch = fabric_launch(opened, endpoints, [&](const fabric::FabricEndpoint& e) {
    return std::vector<std::string>{"--bind", e.address, "--gpu",
                                    std::to_string(f.topology().endpoints()[e.endpoint].gpu)};
  });
  exec::LaunchOptions options = launch;
  // Ranks get the budget plus the rendezvous and the report to finish before they are ended.
  options.grace = std::chrono::seconds(30);
  options.round_limit = round_limit(a);
  return exec::launch_local_group(exec::current_executable(), child_args, ranks, options);
}

}  // namespace

TOPOCOLL_COMMAND("accept", "check a cluster against its topology file, cable by cable", run_accept, "", "-n --ranks");

}  // namespace topocoll::cli
