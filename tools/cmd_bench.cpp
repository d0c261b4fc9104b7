// `topocoll bench`: verified collectives across processes over the socket transport, with
// nccl-tests' columns. Without rank variables it starts --ranks copies of itself on this
// machine; under mpirun/srun/torchrun-style launchers (exec/rank_environment.h) it is one
// rank of a group that may span machines.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/env.h"
#include "config/user_files.h"
#include "config/value_grammar.h"
#include "exec/benchmark.h"
#include "fabric/live_fabric.h"
#include "exec/bootstrap.h"
#include "exec/host_backend.h"
#include "exec/local_launcher.h"
#include "exec/pipeline.h"
#include "exec/rank_environment.h"
#include "exec/socket_host_transport.h"
#include "kernels/datatype.h"
#include "net/transport_options.h"
#include "sched/algorithm_registry.h"
#include "sched/generator.h"
#include "sched/plan.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/cost_flags.h"
#include "tools/fabric_launch.h"
#include "tools/flag_value.h"
#include "tools/size_sweep.h"
#include "tools/split_list.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

std::string usage() {
  return
    "usage: topocoll bench [--topo FILE] [--ranks N] [--algos ring,hd,...] [--sizes 1K:64M]\n"
    "                      [--coll allreduce|reduce_scatter|allgather|alltoall]\n"
    "                      [--dtype float32] [--op sum] [--iters N] [--warmup N] [-c 0|1]\n"
    "                      [--factor F] [--seconds S] [--bind IP] [--json FILE]\n"
    "                      [--endpoints E0,E1,...] [--rank R --bootstrap HOST:PORT]\n"
    "                      [--fabric NAME] [--alpha-us X] [--alpha-msg-us X] [--gamma-gbs G]\n"
    "Runs verified collectives across processes over the socket transport and prints\n"
    "nccl-tests' columns (time = median iteration time of the slowest rank).\n"
    "  --ranks N     start N processes on this machine (default 8); when rank and size come\n"
    "                from the environment (TOPOCOLL_RANK/TOPOCOLL_NRANKS/TOPOCOLL_BOOTSTRAP,\n"
    "                OMPI_COMM_WORLD_*, PMI_*, SLURM_*, RANK/WORLD_SIZE+MASTER_ADDR) this\n"
    "                process is one rank of that group instead\n"
    "  --rank R      be rank R of --ranks N, meeting at --bootstrap HOST:PORT (rank 0\n"
    "                serves it there); overrides the environment\n"
    "  --topo FILE   placement and rank orders from the planner for the first N endpoints,\n"
    "                and the predicted time next to the measured one\n"
    "  --endpoints L rank r runs as topology endpoint L[r] (indices or ids) instead\n"
    "  --algos LIST  algorithms (`topocoll algorithms`; default ring,hd): " + sched::algorithm_list() + "\n"
    "                (and auto with --topo). With --topo in the planner's placement and\n"
    "                order; without one there is no order to choose: each in rank order\n"
    "  --sizes A:B   nccl-tests size from A to B, times --factor (default 2); or a list A,B,C\n"
    "  -c 0|1        check the results: every warm-up iteration's and one after the timed\n"
    "                ones, which run unchecked as nccl-tests' (default 1)\n"
    "  --iters N     timed iterations (default 20; at least 2 run); --warmup N (default 2;\n"
    "                at least 1 runs: its time sizes the timed iterations)\n"
    "  --seconds S   large sizes run fewer iterations (>= 2) to take about S s (default 1)\n"
    "  --bind IP     address of this rank's data listener (default: the one that reaches the\n"
    "                bootstrap root)\n"
    "  --fabric N    run on the emulated fabric N (`topocoll fabric up`): each rank in its\n"
    "                endpoint's namespace, bound to its NIC address; predictions from the\n"
    "                fabric's rates (docs/fabric.md)\n"
    "  --alpha-us X, --alpha-msg-us X, --gamma-gbs G   the cost model's overhead per step and\n"
    "                per message, and reduce rate, for the predicted column (defaults: a\n"
    "                GPU's, docs/plan-format.md)\n"
    "  --ranks 1..4096, --iters and --warmup at most 1000000. nccl-tests' short names work too:\n"
    "  -n (--ranks), -d (--dtype), -o (--op), -i (--iters), -w (--warmup), -f (--factor),\n"
    "  --check (-c), --algo (--algos)\n";
}

struct BenchArgs {
  std::string topo;
  int ranks = 0;
  std::vector<std::string> algos = {"ring", "hd"};
  std::vector<int64_t> sizes;
  sched::Collective collective = sched::Collective::AllReduce;
  exec::BenchmarkSettings settings;
  double factor = 2;
  std::string bind;
  std::string json;
  std::vector<std::string> endpoints;  // explicit placement (indices or endpoint ids)
  int rank = -1;                       // from --rank: this process is one rank of --ranks
  std::string bootstrap;               // --bootstrap HOST:PORT
  std::string fabric;                  // --fabric NAME: ranks inside an emulated fabric
  // Predictions of what the engine runs: its pipelining included (exec/pipeline.h).
  sched::CostParams cost{.pipeline = exec::PipelineOptions::host_default().shape};
};

constexpr double kMinFactor = 1.01, kMaxFactor = 1024;

// A group larger than this is not one machine's processes nor a cluster's acceptance run
// (the planner's rings stop at 1,024 ranks); iterations past a million are a typo.
constexpr std::int64_t kMaxRanks = 4096;
constexpr std::int64_t kMaxIterations = 1000000;

BenchArgs parse_args(std::span<const std::string> args) {
  BenchArgs a;
  std::string sizes = "1K:64M";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> const std::string& { return cli::flag_value(args, i); };
    if (f == "--topo") a.topo = value();
    else if (f == "--ranks" || f == "-n") a.ranks = int(config::count_argument(f, value(), 1, kMaxRanks));
    else if (f == "--algos" || f == "--algo") a.algos = split_list(value(), ',');
    else if (f == "--sizes") sizes = value();
    else if (f == "--factor" || f == "-f") a.factor = config::number_argument(f, value(), kMinFactor, kMaxFactor);
    else if (f == "--coll") {
      if (!sched::parse_collective(value(), a.collective))
        throw std::invalid_argument("--coll '" + args[i] + "': not a collective");
    } else if (f == "--dtype" || f == "-d") {
      const auto t = kernels::parse_datatype(value());
      if (!t) throw std::invalid_argument("--dtype '" + args[i] + "': unknown datatype");
      a.settings.dtype = *t;
    } else if (f == "--op" || f == "-o") {
      const auto op = kernels::parse_reduce_op(value());
      if (!op) throw std::invalid_argument("--op '" + args[i] + "': unknown reduction");
      a.settings.op = *op;
    } else if (f == "--iters" || f == "-i") a.settings.iters = int(config::count_argument(f, value(), 1, kMaxIterations));
    else if (f == "--warmup" || f == "-w") a.settings.warmup = int(config::count_argument(f, value(), 0, kMaxIterations));
    else if (f == "-c" || f == "--check") a.settings.check = config::count_argument(f, value(), 0, 1) != 0;
    else if (f == "--seconds") a.settings.target_seconds = config::number_argument(f, value(), 0.001, 3600);
    else if (f == "--bind") a.bind = value();
    else if (f == "--json") a.json = value();
    else if (f == "--endpoints") a.endpoints = split_list(value(), ',');
    else if (f == "--rank") a.rank = int(config::count_argument(f, value(), 0, INT_MAX));
    else if (f == "--bootstrap") a.bootstrap = value();
    else if (f == "--fabric") a.fabric = value();
    else if (f == "--alpha-us" || f == "--alpha-msg-us" || f == "--gamma-gbs") parse_cost_flag(f, value(), a.cost);
    else throw std::invalid_argument("unknown argument '" + f + "'\n" + usage());
  }
  if (a.algos.empty()) throw std::invalid_argument("--algos names no algorithm");
  if (!a.endpoints.empty() && a.fabric.empty() && a.topo.empty())
    throw std::invalid_argument("--endpoints places ranks on a topology's endpoints: it needs --topo or --fabric");
  if (!a.fabric.empty() && !a.topo.empty())
    throw std::invalid_argument("--fabric runs on the fabric's own topology: drop --topo");
  a.sizes = parse_size_sweep(sizes, a.factor);
  if (!a.json.empty()) {  // before the run, not after it
    if (a.json == a.topo) throw std::invalid_argument("--json " + a.json + " is the --topo file; name another");
    try {
      config::check_replaceable(a.json);
    } catch (const config::UserFileError& e) {
      throw std::invalid_argument(std::string("--json: ") + e.what());
    }
  }
  return a;
}

// Replaced whole (config/user_files.h): a full disk is an error, a link at the name is
// replaced rather than followed.
void write_json_file(const std::string& path, const std::string& text) {
  try {
    config::replace_file(path, text);
  } catch (const config::UserFileError& e) {
    throw std::runtime_error(std::string("cannot write --json: ") + e.what());
  }
}

// The buffers of one size (input, output, scratch and the check's reference, about 4x the
// size per rank) must fit this machine's memory with every local rank holding them: a
// clear refusal instead of std::bad_alloc in every rank.
void check_memory(const std::vector<int64_t>& sizes, int local_ranks) {
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  const double need = 4.0 * double(largest) * local_ranks;
  const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  if (have > 0 && need > have)
    throw std::invalid_argument("--sizes up to " + std::to_string(largest) + " bytes needs about " +
                                std::to_string(int64_t(need / double(1 << 20))) + " MiB for " +
                                std::to_string(local_ranks) + " rank(s) on this machine (4x the size each), more than its " +
                                std::to_string(int64_t(have / double(1 << 20))) + " MiB of memory");
}

// One measurement to make: the schedule and what the planner predicts for it.
struct PlannedCase {
  std::string algo;
  int64_t bytes = 0;
  sched::Schedule schedule;
  double predicted_us = -1;
  double max_link_load = -1;
};

// The topology predictions and placement come from: --topo, or the emulated fabric's (its
// rates, degraded cables included), or none.
std::unique_ptr<topo::Topology> bench_topology(const BenchArgs& a) {
  if (!a.fabric.empty())
    return std::make_unique<topo::Topology>(fabric::LiveFabric::open(a.fabric).modelled_topology());
  if (!a.topo.empty()) return std::make_unique<topo::Topology>(load_topology_argument(a.topo));
  return nullptr;
}

std::vector<int> resolve_endpoints(const topo::Topology& t, const std::vector<std::string>& names,
                                   int nranks) {
  if (names.empty()) return {};
  if (int(names.size()) != nranks)
    throw std::invalid_argument("--endpoints names " + std::to_string(names.size()) +
                                " endpoints for " + std::to_string(nranks) + " ranks");
  std::vector<int> out;
  for (const auto& n : names) {
    if (auto id = t.find_endpoint_by_id(n)) {
      out.push_back(*id);
      continue;
    }
    const int index = int(config::count_argument("--endpoints", n, 0, INT_MAX));
    if (index >= int(t.endpoints().size()))
      throw std::invalid_argument("--endpoints: " + n + " is not an endpoint of " + t.name());
    out.push_back(index);
  }
  return out;
}

PlannedCase plan_case(const BenchArgs& a, const topo::Topology* topology, const std::string& algo,
                      int64_t bytes, int nranks) {
  PlannedCase pc;
  pc.algo = algo;
  pc.bytes = bytes;
  sched::PlanRequest req;
  req.collective = a.collective;
  req.algo = algo;
  req.bytes = bytes;
  req.elem_size = kernels::datatype_size(a.settings.dtype);
  req.nranks = nranks;
  if (topology) {
    req.endpoints = resolve_endpoints(*topology, a.endpoints, nranks);
    req.cost = a.cost;
    req.verify = false;  // the plan is checked for real, with data, right after
    req.keep_link_detail = false;
    sched::Plan plan = sched::make_plan(*topology, req);
    pc.schedule = std::move(plan.schedule);
    pc.predicted_us = plan.predicted_us;
    pc.max_link_load = plan.link_load.max_load;
    pc.algo = plan.algo;
  } else {
    pc.schedule = sched::generate(algo, a.collective, nranks, sched::plan_count(req, nranks));
  }
  return pc;
}

nlohmann::json row_json(const exec::BenchmarkRow& r) {
  nlohmann::json j = {{"algo", r.algo},
                      {"collective", std::string(sched::to_string(r.collective))},
                      {"ranks", r.nranks},
                      {"bytes", r.bytes},
                      {"count", r.count},
                      {"dtype", std::string(kernels::datatype_name(r.dtype))},
                      {"op", std::string(kernels::reduce_op_name(r.op))},
                      {"iters", r.iters},
                      {"time_us", r.time_us},
                      {"algbw", r.algbw_gbs},
                      {"busbw", r.busbw_gbs},
                      {"wrong", r.wrong}};
  if (r.predicted_us >= 0) j["predicted_us"] = r.predicted_us;
  if (r.max_link_load >= 0) j["max_link_load"] = r.max_link_load;
  return j;
}

void print_header(bool predicted) {
  std::printf("#\n# %10s %12s %9s %7s %10s %10s %8s %8s %7s%s\n", "size", "count", "type",
              "redop", "algo", "time", "algbw", "busbw", "#wrong",
              predicted ? "  predicted  load" : "");
  std::printf("# %10s %12s %9s %7s %10s %10s %8s %8s %7s%s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", predicted ? "       (us)" : "");
}

void print_row(const exec::BenchmarkRow& r) {
  const std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  // As nccl-tests prints it: no reduction for the gathers and all-to-all.
  const bool reduces = r.collective == sched::Collective::AllReduce || r.collective == sched::Collective::ReduceScatter;
  std::printf("  %10lld %12lld %9s %7s %10s %10.1f %8.3f %8.3f %7s", (long long)r.bytes,
              (long long)r.count, std::string(kernels::datatype_name(r.dtype)).c_str(),
              reduces ? std::string(kernels::reduce_op_name(r.op)).c_str() : "none", r.algo.c_str(), r.time_us,
              r.algbw_gbs, r.busbw_gbs, wrong.c_str());
  if (r.predicted_us >= 0) std::printf(" %10.1f %5.4g", r.predicted_us, r.max_link_load);  // 0.25 as 0.25, 1000 as 1000
  std::printf("\n");
  std::fflush(stdout);
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

int run_rank(const BenchArgs& a, const exec::RankEnvironment& env) {
  check_memory(a.sizes, 1);
  if (a.ranks > 0 && a.ranks != env.nranks)
    throw std::invalid_argument("--ranks " + std::to_string(a.ranks) + " but " +
                                env.size_variable + " says " + std::to_string(env.nranks));
  if (env.bootstrap.empty())
    throw std::invalid_argument("rank " + std::to_string(env.rank) + " of " +
                                std::to_string(env.nranks) +
                                ": give --bootstrap host:port or set TOPOCOLL_BOOTSTRAP (rank 0's address)");
  const auto root_address = exec::BootstrapAddress::parse(env.bootstrap);
  std::unique_ptr<exec::BootstrapRoot> root;
  if (env.rank == 0 && !env.root_served_externally)
    root = std::make_unique<exec::BootstrapRoot>(root_address, env.nranks);

  std::unique_ptr<topo::Topology> topology = bench_topology(a);
  if (topology) {
    resolve_endpoints(*topology, a.endpoints, env.nranks);  // a bad list fails before the run
    if (int(topology->endpoints().size()) < env.nranks)
      throw std::invalid_argument("--topo " + a.topo + " has " +
                                  std::to_string(topology->endpoints().size()) +
                                  " endpoints, fewer than " + std::to_string(env.nranks) +
                                  " ranks");
  }
  const auto options = net::TransportOptions::from_env(config::env());
  std::vector<exec::BenchmarkRow> rows;
  try {
    exec::BootstrapClient group(root_address, env.rank, env.nranks);
    // Before the transport: a failed step may leave receives posted whose threads write
    // until the transport's connections close, so the buffers go after it.
    exec::BenchmarkBuffers buffers;
    exec::SocketHostTransport transport(group, a.bind, options);
    exec::HostBackend backend(transport);
    const bool lead = env.rank == 0;
    if (lead) {
      std::printf("# topocoll bench: %d ranks, %s, socket transport (%s), first rank on %s\n",
                  env.nranks, std::string(sched::to_string(a.collective)).c_str(),
                  options.describe().c_str(), host_name().c_str());
      if (!a.fabric.empty())
        std::printf("# fabric %s: each rank in its endpoint's namespace; predictions at the "
                    "fabric's rates (alpha %.3g us per step + %.3g us per message, reduce %.3g GB/s)\n",
                    a.fabric.c_str(), a.cost.alpha_us, a.cost.alpha_message_us,
                    1.0 / (a.cost.gamma_us_per_byte * 1e3));
      if (topology)
        std::printf("# topology %s: placement and orders from the planner (%s)\n",
                    topology->name().c_str(),
                    a.endpoints.empty() ? ("first " + std::to_string(env.nranks) + " endpoints").c_str()
                                        : "endpoints given");
      std::printf("# check %s; time = median iteration time of the slowest rank\n",
                  a.settings.check ? "the warm-ups and one after the timed iterations" : "off");
      print_header(topology != nullptr);
    }
    for (int64_t bytes : a.sizes)
      for (const auto& algo : a.algos) {
        PlannedCase pc = plan_case(a, topology.get(), algo, bytes, env.nranks);
        exec::BenchmarkRow row = exec::measure_collective(pc.schedule, pc.algo, a.settings,
                                                          backend, group, buffers);
        row.predicted_us = pc.predicted_us;
        row.max_link_load = pc.max_link_load;
        if (lead) print_row(row);
        rows.push_back(row);
      }
    group.barrier();
  } catch (const std::invalid_argument& e) {
    // Past the command line (checked above and by the launcher), a failure is the run's
    // (exit 1): a schedule the engine refuses, a group that does not match.
    throw std::runtime_error(e.what());
  }
  int64_t wrong = 0;
  for (const auto& r : rows) wrong += std::max<int64_t>(0, r.wrong);
  if (env.rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", (long long)wrong, wrong ? "FAILED" : "OK");
    if (!a.json.empty()) {
      nlohmann::json doc = nlohmann::json::array();
      for (const auto& r : rows) doc.push_back(row_json(r));
      write_json_file(a.json, doc.dump(2) + "\n");
    }
  }
  return wrong ? 1 : 0;
}

// What every rank would check, done once in the launcher so a mistake is one message.
void check_before_launch(const BenchArgs& a, int nranks) {
  std::unique_ptr<topo::Topology> topology = bench_topology(a);
  if (topology) {
    resolve_endpoints(*topology, a.endpoints, nranks);
    if (int(topology->endpoints().size()) < nranks)
      throw std::invalid_argument("--topo " + a.topo + " has " +
                                  std::to_string(topology->endpoints().size()) +
                                  " endpoints, fewer than " + std::to_string(nranks) + " ranks");
  }
  for (const auto& algo : a.algos) plan_case(a, topology.get(), algo, a.sizes.front(), nranks);
}

// On a fabric every rank runs in its endpoint's namespace, bound to its NIC address.
exec::LaunchOptions bench_fabric_launch(const BenchArgs& a, int ranks) {
  const FabricForLaunch opened = open_fabric_for_launch(a.fabric);
  std::vector<int> endpoints = resolve_endpoints(opened.fabric.topology(), a.endpoints, ranks);
  if (endpoints.empty())
    for (int r = 0; r < ranks; ++r) endpoints.push_back(r);
  return fabric_launch(opened, endpoints, [](const fabric::FabricEndpoint& e) {
    return std::vector<std::string>{"--bind", e.address};
  });
}

int run_bench(std::span<const std::string> args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage().c_str());
      return 0;
    }
  const BenchArgs a = parse_args(args);
  if (a.rank >= 0) {  // rank given on the command line
    if (a.ranks < 1 || a.rank >= a.ranks)
      throw std::invalid_argument("--rank " + std::to_string(a.rank) + " needs --ranks N > " +
                                  std::to_string(a.rank));
    exec::RankEnvironment env;
    env.rank = a.rank;
    env.nranks = a.ranks;
    env.rank_variable = "--rank";
    env.size_variable = "--ranks";
    env.bootstrap = a.bootstrap;
    if (env.bootstrap.empty())
      if (const auto from_env = exec::rank_environment_from_env(config::env())) env.bootstrap = from_env->bootstrap;
    return run_rank(a, env);
  }
  if (const auto env = exec::rank_environment_from_env(config::env())) {
    auto e = *env;
    if (!a.bootstrap.empty()) e.bootstrap = a.bootstrap;
    return run_rank(a, e);
  }
  // No launcher around us: become one. Arguments every rank would reject fail here, once.
  const int ranks = a.ranks > 0 ? a.ranks : !a.endpoints.empty() ? int(a.endpoints.size()) : 8;
  check_memory(a.sizes, ranks);
  check_before_launch(a, ranks);
  std::vector<std::string> child_args = {"bench"};
  child_args.insert(child_args.end(), args.begin(), args.end());
  exec::LaunchOptions launch;
  if (!a.fabric.empty()) launch = bench_fabric_launch(a, ranks);
  const int rc = exec::launch_local_group(exec::current_executable(), child_args, ranks, launch);
  if (rc != 0) std::fprintf(stderr, "topocoll bench: a rank exited with status %d\n", rc);
  return rc;
}

}  // namespace

TOPOCOLL_COMMAND("bench", "verified collectives across processes, nccl-tests columns", run_bench, "",
                 "-n --ranks, --algo --algos, -f --factor, -d --dtype, -o --op, -i --iters, -w --warmup, -c --check");

}  // namespace topocoll::cli
