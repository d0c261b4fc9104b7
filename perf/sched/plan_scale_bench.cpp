// plan_scale_bench: time to plan a BiGraph HD allreduce at scale, phase by phase, on one
// core: placement (HD order), schedule generation, symbolic verification, link-load
// (contention) analysis, and the cost model. Prints a table and writes JSON.
//
//   plan_scale_bench [--max-endpoints 65536] [--bytes 256M] [--repeats 3] [--json FILE]
//
// Times are this thread's CPU time (one core), medians over the repeats.
// BiGraph shapes: P = 2^k endpoints on S = 2^a switches per group with E = 2^b endpoints
// each, b = floor((k-1)/2) <= a, so the EFLOPS closed form applies (load 1 on every step).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/value_grammar.h"
#include "sched/cost_model.h"
#include "sched/halving_doubling.h"
#include "sched/hd_order.h"
#include "sched/link_load.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/verifier.h"
#include "topo/generators.h"

namespace {

using namespace topocoll;

// CPU time of this thread: the machine is shared, so wall time would measure the neighbours.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
  }
};

double ms_since(double t0) { return Clock::now() - t0; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

struct Row {
  int endpoints = 0, S = 0, E = 0, steps = 0;
  double topo_ms = 0, place_ms = 0, gen_ms = 0, verify_ms = 0, load_ms = 0, cost_ms = 0;
  double total_ms = 0;  // placement + generation + verification + link load
  double max_load = 0, predicted_us = 0;
  bool verified = false;
  long rss_mib = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int max_endpoints = 65536, repeats = 3;
  int64_t bytes = int64_t(256) << 20;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: missing value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--max-endpoints") max_endpoints = std::stoi(next());
    else if (a == "--bytes") bytes = config::size_argument(a, next(), 1, int64_t(1) << 50);
    else if (a == "--repeats") repeats = std::max(1, std::stoi(next()));
    else if (a == "--json") json_path = next();
    else {
      std::fprintf(stderr,
                   "usage: plan_scale_bench [--max-endpoints N] [--bytes B] [--repeats R] "
                   "[--json FILE]\n");
      return 2;
    }
  }
  std::vector<Row> rows;
  std::printf("BiGraph HD allreduce of %lld bytes (float): median of %d, CPU milliseconds, one core\n",
              (long long)bytes, repeats);
  std::printf("%9s %5s %5s %6s %9s %9s %9s %9s %9s %9s %10s %5s %8s\n", "endpoints", "S", "E",
              "steps", "topology", "placement", "generate", "verify", "linkload", "load+cost",
              "plan total", "load", "RSS MiB");
  std::printf("(plan total = placement + generate + verify + linkload; load+cost = the fused\n"
              " pass the planner runs instead of linkload alone)\n");
  for (int k = 5; (1 << k) <= max_endpoints; ++k) {
    Row row;
    row.endpoints = 1 << k;
    int b = (k - 1) / 2, a = k - 1 - b;
    row.S = 1 << a;
    row.E = 1 << b;
    std::vector<double> topo_t, place_t, gen_t, ver_t, load_t, cost_t, total_t;
    for (int rep = 0; rep < repeats; ++rep) {
      auto t0 = Clock::now();
      topo::BiGraphShape shape;
      shape.switches_per_group = row.S;
      shape.endpoints_per_switch = row.E;
      topo::Topology t = topo::generate_bigraph(shape);
      topo_t.push_back(ms_since(t0));

      t0 = Clock::now();
      sched::RouteCache routes(t);
      sched::Placement p = sched::first_endpoints(t, row.endpoints);
      sched::RankOrder order = sched::hd_order(t, p, double(bytes), &routes);
      place_t.push_back(ms_since(t0));

      t0 = Clock::now();
      sched::Schedule s = sched::hd_allreduce(row.endpoints, bytes / 4, order.rank_of_virtual);
      gen_t.push_back(ms_since(t0));

      t0 = Clock::now();
      sched::VerifyResult v = sched::verify(s);
      ver_t.push_back(ms_since(t0));

      // Contention analysis alone, then the planner's fused pass (loads + cost model).
      t0 = Clock::now();
      sched::LinkLoad load = sched::analyze_link_load(s, p, 4, routes, {.keep_links = false});
      load_t.push_back(ms_since(t0));

      t0 = Clock::now();
      sched::ScheduleAnalysis a = sched::analyze_schedule(s, p, 4, routes, {}, {.keep_links = false});
      cost_t.push_back(ms_since(t0));
      const sched::CostEstimate& c = a.cost;

      total_t.push_back(place_t.back() + gen_t.back() + ver_t.back() + load_t.back());
      row.steps = s.num_steps();
      row.max_load = load.max_load;
      row.predicted_us = c.total_us;
      row.verified = v.ok;
      if (!v.ok) std::fprintf(stderr, "verification failed: %s\n", v.error.c_str());
    }
    row.topo_ms = median(topo_t);
    row.place_ms = median(place_t);
    row.gen_ms = median(gen_t);
    row.verify_ms = median(ver_t);
    row.load_ms = median(load_t);
    row.cost_ms = median(cost_t);
    row.total_ms = median(total_t);
    row.rss_mib = peak_rss_mib();
    std::printf("%9d %5d %5d %6d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %10.1f %5g %8ld%s\n",
                row.endpoints, row.S, row.E, row.steps, row.topo_ms, row.place_ms, row.gen_ms,
                row.verify_ms, row.load_ms, row.cost_ms, row.total_ms, row.max_load, row.rss_mib,
                row.verified ? "" : "  NOT VERIFIED");
    std::fflush(stdout);
    rows.push_back(row);
  }
  nlohmann::json doc;
  doc["benchmark"] = "plan_scale_bench";
  doc["collective"] = "allreduce";
  doc["algo"] = "hd";
  doc["bytes"] = bytes;
  doc["repeats"] = repeats;
  doc["unit"] = "thread CPU ms, median";
  for (const auto& r : rows)
    doc["rows"].push_back({{"endpoints", r.endpoints}, {"switches_per_group", r.S},
                           {"endpoints_per_switch", r.E}, {"steps", r.steps},
                           {"topology_ms", r.topo_ms}, {"placement_ms", r.place_ms},
                           {"generate_ms", r.gen_ms}, {"verify_ms", r.verify_ms},
                           {"link_load_ms", r.load_ms}, {"load_and_cost_ms", r.cost_ms},
                           {"plan_total_ms", r.total_ms}, {"max_link_load", r.max_load},
                           {"predicted_us", r.predicted_us}, {"verified", r.verified},
                           {"peak_rss_mib", r.rss_mib}});
  std::string out = doc.dump(1);
  if (json_path.empty()) {
    std::printf("%s\n", out.c_str());
  } else {
    std::ofstream(json_path) << out << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
