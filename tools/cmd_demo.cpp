// `topocoll demo`: the README's main job in one command. Validates, describes and draws a
// topology; plans HD against the rings on the whole topology and shows each one's link
// contention (worst flows on one directed link, per step); then runs the allreduces for real
// and prints the measured times next to the planner's predictions: on the topology emulated
// as a network with rate-limited cables where this machine can build one (root, network
// namespaces, iproute2; tools/demo_fabric_run.h), else across local processes over loopback.
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/user_files.h"
#include "config/value_grammar.h"
#include "fabric/system_command.h"
#include "sched/plan.h"
#include "tools/topology_argument.h"
#include "tools/child_command.h"
#include "tools/command.h"
#include "tools/demo_fabric_access.h"
#include "tools/demo_fabric_run.h"
#include "tools/demo_results.h"
#include "tools/file_stem.h"
#include "tools/flag_value.h"
#include "tools/size_sweep.h"
#include "tools/size_chart.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll demo [--topo FILE] [--out DIR] [--loopback] [--ranks N] [--sizes LIST]\n"
    "                     [--iters N]\n"
    "Validates, describes and draws the topology (default examples/bigraph-32.json), plans\n"
    "halving-doubling against the rank-order and topology-aware rings with their link\n"
    "contention, then runs the allreduces for real and prints measured times next to the\n"
    "predicted ones:\n"
    "  - on the topology emulated as a network on this machine (root, network namespaces,\n"
    "    iproute2): fabric `demo`, fastest cable 20 Mbit/s, ring, ring-topo, hd-naive and hd\n"
    "    on 16 ranks at 64K,256K,1M, 3 timed iterations; the fabric is taken down at the end,\n"
    "    also on failure, Ctrl-C, SIGTERM or SIGHUP;\n"
    "  - else (or with --loopback), saying why in one line: ring, ring-topo and hd across 8\n"
    "    local processes over loopback at 64K,1M,16M, 5 timed iterations.\n"
    "--ranks, --sizes and --iters replace those numbers. Files land in DIR (default out/):\n"
    "the drawing, demo-plan.json, the bench JSON, demo-results.md and\n"
    "demo-measured-vs-predicted.svg.\n";

// The command line; the run step's numbers default per place (fabric or loopback).
struct DemoArgs {
  std::string topo = "examples/bigraph-32.json";
  std::string out = "out";
  bool loopback = false;  // skip the fabric even where one can be built
  int ranks = 0;          // 0: the place's default
  std::string sizes;      // "": the place's default
  int iters = 0;
};

// The fabric run: the rate and shape perf/results/fabric-calibration.md measured the model at.
constexpr const char* kFabricName = "demo";
constexpr double kFabricRateMbit = 20;
constexpr int kFabricRanks = 16;
constexpr const char* kFabricSizes = "64K,256K,1M";
constexpr int kFabricIters = 3;
constexpr double kTolerance = 0.20;  // the figure the demo reports against, never a pass/fail

std::chrono::steady_clock::time_point g_started = std::chrono::steady_clock::now();

double elapsed_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_started).count();
}

// Runs another subcommand in this process; false when it is missing or fails.
bool run_command(const std::string& name, const std::vector<std::string>& args) {
  for (const auto& c : commands())
    if (c.name == name) {
      std::fflush(stdout);
      int rc = 1;
      try {
        rc = c.run(args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "topocoll %s: %s\n", name.c_str(), e.what());
      }
      std::fflush(stdout);
      return rc == 0;
    }
  std::printf("  (`topocoll %s` is not part of this build; skipped)\n", name.c_str());
  return false;
}

// The default topology ships with the sources; run from elsewhere, look beside the build
// (build/tools/topocoll -> ../../examples).
std::string find_topology(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 || path.empty() || path[0] == '/') return path;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return path;
  std::string dir(exe, std::size_t(n));
  for (int up = 0; up < 4; ++up) {
    dir = dir.substr(0, dir.rfind('/'));
    const std::string candidate = dir + "/" + path;
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
  }
  return path;
}

// A stage's heading, with the time since the demo started.
void section(const char* title) {
  std::printf("\n=== %s  [%.0f s] ===\n", title, elapsed_seconds());
  std::fflush(stdout);
}

void progress(const std::string& what) {
  std::printf("  [%.0f s] %s\n", elapsed_seconds(), what.c_str());
  std::fflush(stdout);
}

// One endpoint per switch before a second one on any switch: spreads a small group over the
// whole fabric, as a scheduler placing a job on an idle cluster would.
std::vector<int> spread_endpoints(const topo::Topology& t, int n) {
  std::map<int, std::vector<int>> by_attach;  // switch (BiGraph) or package (NAP)
  for (int e = 0; e < int(t.endpoints().size()); ++e) {
    const auto& ep = t.endpoints()[e];
    by_attach[ep.attach_switch >= 0 ? ep.attach_switch : ep.package].push_back(e);
  }
  std::vector<int> out;
  for (std::size_t round = 0; int(out.size()) < n; ++round) {
    bool any = false;
    for (auto& [key, eps] : by_attach)
      if (round < eps.size() && int(out.size()) < n) {
        out.push_back(eps[round]);
        any = true;
      }
    if (!any) break;
  }
  return out;
}

// Contention of one algorithm on the whole topology.
void show_contention(const topo::Topology& t, const std::string& algo, int64_t bytes,
                     nlohmann::json& summary) {
  sched::PlanRequest req;
  req.collective = sched::Collective::AllReduce;
  req.algo = algo;
  req.bytes = bytes;
  req.elem_size = 4;
  try {
    const sched::Plan plan = sched::make_plan(t, req);
    std::string per_step;
    for (const auto& s : plan.link_load.steps) {
      if (s.flows == 0) continue;
      char buf[16];
      std::snprintf(buf, sizeof buf, "%g ", s.max_load);
      per_step += buf;
    }
    std::printf("  %-10s worst load %-4g predicted %10.1f us  busbw %7.2f GB/s  %s\n",
                plan.algo.c_str(), plan.link_load.max_load, plan.predicted_us, plan.busbw_gbs,
                plan.verified ? "verified" : plan.verification.c_str());
    std::printf("  %-10s worst load per step: %s\n", "", per_step.c_str());
    summary.push_back({{"algo", plan.algo},
                       {"bytes", bytes},
                       {"ranks", plan.placement.nranks()},
                       {"max_link_load", plan.link_load.max_load},
                       {"predicted_us", plan.predicted_us},
                       {"busbw", plan.busbw_gbs},
                       {"verified", plan.verified}});
  } catch (const std::exception& e) {
    std::printf("  %-10s not planned: %s\n", algo.c_str(), e.what());
  }
}

DemoArgs parse_args(std::span<const std::string> args) {
  DemoArgs a;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> const std::string& { return cli::flag_value(args, i); };
    if (f == "--topo") a.topo = value();
    else if (f == "--out") a.out = value();
    else if (f == "--loopback") a.loopback = true;
    else if (f == "--ranks") a.ranks = int(config::count_argument(f, value(), 1, 4096));
    else if (f == "--sizes") a.sizes = value();
    else if (f == "--iters") a.iters = int(config::count_argument(f, value(), 1, 1000000));
    else throw std::invalid_argument("unknown argument '" + f + "'\n" + kUsage);
  }
  if (!a.sizes.empty()) parse_size_sweep(a.sizes, 2);  // bench's grammar, refused before any step runs
  return a;
}

// The algorithms of `wanted` the planner can lay on the first `ranks` endpoints of `t`.
std::vector<std::string> plannable(const topo::Topology& t, const std::vector<std::string>& wanted,
                                   int ranks) {
  std::vector<std::string> out;
  for (const auto& algo : wanted) {
    sched::PlanRequest req;
    req.algo = algo;
    req.bytes = 1 << 20;
    req.nranks = ranks;
    req.verify = false;
    req.keep_link_detail = false;
    try {
      sched::make_plan(t, req);
      out.push_back(algo);
    } catch (const std::exception&) {
    }
  }
  return out;
}

// The table, the summary lines and the chart of one run, printed and written to `out`.
void report(const std::vector<DemoMeasurement>& rows, const std::string& out, const std::string& setting,
            const std::vector<std::string>& lines, const std::string& bench_json) {
  std::printf("%s\n", measurement_table(rows, false).c_str());
  for (const auto& l : lines) std::printf("  %s\n", l.c_str());
  const std::string chart = out + "/demo-measured-vs-predicted.svg", table = out + "/demo-results.md";
  config::replace_file(chart, measurement_chart(rows, "allreduce " + setting, kTolerance));
  std::string md = "# topocoll demo: measured next to predicted\n\nallreduce " + setting + "; results: " +
                   bench_json + "\n\n" + measurement_table(rows, true) + "\n";
  for (const auto& l : lines) md += "- " + l + "\n";
  config::replace_file(table, md);
  std::printf("\n  chart: %s   table: %s\n  results: %s   wrong elements: %lld\n", chart.c_str(),
              table.c_str(), bench_json.c_str(), (long long)wrong_elements(rows));
}

// Steps 5 and 6 on an emulated fabric. Returns the demo's exit code, or -1 when nothing was
// measured and the loopback run should stand in (the fabric is down again either way).
int measure_on_fabric(const DemoArgs& a, const topo::Topology& t) {
  DemoFabricSettings s;
  s.topology_file = a.topo;
  s.name = kFabricName;
  s.rate_mbit = kFabricRateMbit;
  s.ranks = std::min<int>(a.ranks > 0 ? a.ranks : kFabricRanks, int(t.endpoints().size()));
  s.algos = plannable(t, {"ring", "ring-topo", "hd-naive", "hd"}, s.ranks);
  s.sizes = a.sizes.empty() ? kFabricSizes : a.sizes;
  s.iters = a.iters > 0 ? a.iters : kFabricIters;
  s.bench_json = a.out + "/demo-fabric-bench.json";
  std::printf(
      "  %s built on this machine as a network: a namespace per host, a router namespace per\n"
      "  switch, every cable a veth pair shaped to its rate (fastest %g Mbit/s, the rate of\n"
      "  perf/results/fabric-calibration.md), so flows that share a cable share its rate.\n"
      "  %d ranks on the first %d endpoints (as `bench --fabric` places them), every result\n"
      "  checked. The fabric is `%s`; it is taken down at the end, also on failure or Ctrl-C.\n",
      t.name().c_str(), s.rate_mbit, s.ranks, s.ranks, s.name.c_str());
  const DemoFabricOutcome run = run_demo_on_fabric(s, progress);
  if (run.left_behind.empty())
    progress("nothing left behind: no namespace named tf-" + s.name + "-*, no record of fabric " + s.name);
  else {
    std::string list;
    for (const auto& x : run.left_behind) list += (list.empty() ? "" : ", ") + x;
    progress("left behind: " + list + " (`topocoll fabric down --name " + s.name + " --force` removes them)");
  }
  if (run.interrupted_by) {
    std::printf("\n  interrupted by %s: the run stopped and fabric %s was taken down\n",
                signal_name(run.interrupted_by).c_str(), s.name.c_str());
    return 128 + run.interrupted_by;
  }
  if (!run.measured) return -1;

  section("6. measured next to predicted");
  const auto rows = read_bench_rows(s.bench_json);
  char setting[256];
  std::snprintf(setting, sizeof setting, "on %s emulated at %g Mbit/s, %d ranks", t.name().c_str(),
                s.rate_mbit, s.ranks);
  std::vector<std::string> lines = {deviation_line(rows, kTolerance)};
  for (const auto& [slower, faster] : {std::pair<const char*, const char*>{"ring", "ring-topo"}, {"hd-naive", "hd"}})
    if (const std::string line = contention_line(rows, slower, faster); !line.empty())
      lines.push_back("contention: " + line);
  lines.push_back("Same ranks, bytes and steps within each pair: only how the steps load the cables differs.");
  report(rows, a.out, setting, lines, s.bench_json);
  return run.left_behind.empty() && wrong_elements(rows) == 0 ? 0 : 1;
}

// Steps 5 and 6 across local processes over loopback: the schedules move and reduce real
// data, but no cable is shared, so the model's link contention does not show.
int measure_on_loopback(const DemoArgs& a, const topo::Topology& t) {
  const int ranks = std::min<int>(a.ranks > 0 ? a.ranks : 8, int(t.endpoints().size()));
  const auto endpoints = spread_endpoints(t, ranks);
  std::string endpoint_list;
  for (int e : endpoints) endpoint_list += (endpoint_list.empty() ? "" : ",") + t.endpoints()[e].id;
  std::printf("  %d processes over the socket transport on this machine, placed as endpoints\n"
              "  %s (spread over the switches or packages first), every result checked.\n",
              ranks, endpoint_list.c_str());
  const std::string bench_json = a.out + "/demo-bench.json";
  std::remove(bench_json.c_str());
  const bool ran = run_command(
      "bench", {"--topo", a.topo, "--ranks", std::to_string(ranks), "--endpoints", endpoint_list,
                "--algos", "ring,ring-topo,hd", "--sizes", a.sizes.empty() ? "64K,1M,16M" : a.sizes,
                "--iters", std::to_string(a.iters > 0 ? a.iters : 5), "--seconds", "0.5", "--json", bench_json});

  section("6. measured next to predicted");
  std::ifstream in(bench_json);
  if (!in) {
    std::printf("  no measurements (%s missing)\n", bench_json.c_str());
    return 1;
  }
  const auto rows = read_bench_rows(bench_json);
  std::map<int64_t, std::map<std::string, const DemoMeasurement*>> by_size;
  for (const auto& r : rows) by_size[r.bytes][r.algo] = &r;
  std::vector<std::string> lines = {"ring / hd time ratio (> 1: HD faster):"};
  for (const auto& [bytes, algos] : by_size) {
    if (!algos.count("ring") || !algos.count("hd")) continue;
    const auto& ring = *algos.at("ring");
    const auto& hd = *algos.at("hd");
    char line[160];
    std::snprintf(line, sizeof line, "  %8s: measured %.2f, predicted %.2f", human_bytes(bytes).c_str(),
                  ring.measured_us / hd.measured_us, hd.predicted_us > 0 ? ring.predicted_us / hd.predicted_us : 0.0);
    lines.push_back(line);
  }
  lines.push_back("These runs share this machine's cores and loopback, not the modelled fabric: they prove");
  lines.push_back("the schedules move and reduce real data correctly and show the step-count effect (HD:");
  lines.push_back("2 log2 P steps, ring: 2(P-1)); the link contention only the planner sees here. As root,");
  lines.push_back("the demo measures on an emulated fabric instead, where it shows (docs/fabric.md).");
  char setting[256];
  std::snprintf(setting, sizeof setting, "over loopback, %d local processes (predicted for %s's links)", ranks,
                t.name().c_str());
  report(rows, a.out, setting, lines, bench_json);
  return ran && wrong_elements(rows) == 0 ? 0 : 1;
}

int run_demo(std::span<const std::string> args) {
  for (const auto& f : args)
    if (f == "--help" || f == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
  g_started = std::chrono::steady_clock::now();
  DemoArgs a = parse_args(args);
  a.topo = find_topology(a.topo);
  config::prepare_output_dir(a.out);  // throws naming what is wrong, before any step runs
  bool ok = true;

  section("1. validate");
  ok &= run_command("validate", {a.topo});
  const topo::Topology t = load_topology_argument(a.topo);  // throws naming the problem
  if (a.ranks > int(t.endpoints().size()))
    throw std::invalid_argument("--ranks " + std::to_string(a.ranks) + ": " + t.name() + " has " +
                                std::to_string(t.endpoints().size()) + " endpoints");

  section("2. describe");
  ok &= run_command("describe", {a.topo});

  section("3. draw");
  const bool have_dot = !fabric::find_program("dot").empty();
  const std::string drawing = a.out + "/" + file_stem(t.name()) + (have_dot ? ".png" : ".dot");
  if (run_command("draw", {a.topo, "-o", drawing}))
    std::printf("  drawing: %s%s\n", drawing.c_str(), have_dot ? "" : "  (Graphviz `dot` not found: DOT text only)");
  else
    ok = false;  // the job goes on, and ends failed: every step's outcome counts

  section("4. plan allreduce on every endpoint: link contention of each algorithm");
  const int64_t plan_bytes = 64 << 20;
  std::printf("  %d endpoints, 64 MiB float32 allreduce. Load = most flows sharing one directed\n"
              "  link in a step (1 = contention-free). Predicted by the alpha-beta-gamma model.\n",
              int(t.endpoints().size()));
  nlohmann::json summary = nlohmann::json::array();
  for (const char* algo : {"ring", "ring-topo", "hd-naive", "hd"})
    show_contention(t, algo, plan_bytes, summary);
  config::replace_file(a.out + "/demo-plan.json", summary.dump(2) + "\n");
  std::printf("  summary: %s/demo-plan.json (full plans: topocoll plan --json)\n", a.out.c_str());

  const DemoFabricAccess access = a.loopback ? DemoFabricAccess::refused("--loopback given")
                                             : DemoFabricAccess::check(t, kFabricName);
  int rc = -1;
  if (access.granted()) {
    section("5. run the allreduces on an emulated network: namespaces, routers, shaped cables");
    rc = measure_on_fabric(a, t);
    if (rc < 0)
      std::printf("  the fabric run measured nothing (its output is above); measuring over loopback instead\n");
  }
  if (rc < 0) {
    section("5. run HD and ring allreduce for real across local processes");
    if (!access.granted())
      std::printf("  no emulated fabric: %s; measuring over loopback instead\n", access.reason().c_str());
    rc = measure_on_loopback(a, t);
    if (access.granted()) ok = false;  // the fabric run failed
  }
  std::printf("\n  demo ended after %.0f s\n", elapsed_seconds());
  return rc != 0 ? rc : ok ? 0 : 1;
}

}  // namespace

TOPOCOLL_COMMAND("demo", "the main job: validate, draw, plan HD vs ring, run both for real",
                 run_demo);

}  // namespace topocoll::cli
