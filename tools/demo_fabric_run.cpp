#include "tools/demo_fabric_run.h"

#include <cstdio>
#include <sstream>

#include "fabric/fabric_record.h"
#include "fabric/live_fabric.h"
#include "fabric/system_command.h"
#include "sched/plan.h"
#include "tools/child_command.h"
#include "tools/size_sweep.h"

namespace topocoll::cli {
namespace {

std::string joined(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

std::string number(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

// How long the bench will take: the model's time for every case, times the warm-up and the
// timed iterations, plus starting the ranks. Nothing when the fabric cannot be read back.
double estimated_seconds(const DemoFabricSettings& s) {
  try {
    const topo::Topology t = fabric::LiveFabric::open(s.name).modelled_topology();
    double us = 0;
    for (const int64_t bytes : parse_size_sweep(s.sizes, 2))  // bench's default --factor
      for (const auto& algo : s.algos) {
        sched::PlanRequest req;
        req.algo = algo;
        req.bytes = bytes;
        req.nranks = s.ranks;
        req.verify = false;
        req.keep_link_detail = false;
        us += sched::make_plan(t, req).predicted_us * (s.iters + 1);
      }
    return us / 1e6 + 2;
  } catch (const std::exception&) {
    return 0;
  }
}

// Everything of fabric `name` still on this machine: its record and its namespaces.
std::vector<std::string> remains_of(const std::string& name) {
  std::vector<std::string> left;
  try {
    if (fabric::load_record(name)) left.push_back("record " + fabric::fabric_record_path(name));
  } catch (const std::exception&) {
    left.push_back("record " + fabric::fabric_record_path(name) + " (unreadable)");
  }
  for (const auto& ns : fabric::netns_with_prefix("tf-" + name + "-")) left.push_back("namespace " + ns);
  return left;
}

}  // namespace

DemoFabricOutcome run_demo_on_fabric(const DemoFabricSettings& s, const DemoProgress& say) {
  DemoFabricOutcome out;
  const InterruptCatcher catcher;
  std::remove(s.bench_json.c_str());
  try {
    say("bringing up fabric " + s.name + ": " + s.topology_file + ", fastest cable " + number(s.rate_mbit) +
        " Mbit/s");
    int rc = run_child_command({"fabric", "up", s.topology_file, "--name", s.name, "--rate-mbit",
                                number(s.rate_mbit)},
                               ChildSignals::Shared);
    if (rc == 0 && !InterruptCatcher::caught()) {
      const double seconds = estimated_seconds(s);
      char eta[64] = "";
      if (seconds > 0) std::snprintf(eta, sizeof eta, " (about %.0f s)", seconds);
      say("measuring " + joined(s.algos, ", ") + " at " + s.sizes + " on " + std::to_string(s.ranks) +
          " ranks, " + std::to_string(s.iters) + " timed iterations each after one warm-up" + eta);
      run_child_command({"bench", "--fabric", s.name, "--ranks", std::to_string(s.ranks), "--algos",
                         joined(s.algos, ","), "--sizes", s.sizes, "--iters", std::to_string(s.iters),
                         "--warmup", "1", "--seconds", "1000", "--json", s.bench_json},
                        ChildSignals::Shared);
      std::FILE* written = std::fopen(s.bench_json.c_str(), "r");
      out.measured = written != nullptr && !InterruptCatcher::caught();
      if (written) std::fclose(written);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topocoll demo: %s\n", e.what());  // and on to the teardown
  }
  // Whatever happened above. While the demo holds its claim on the name, every namespace
  // carrying the fabric's prefix is one its own steps made (an `up` cut short included), so
  // --force is safe and reaches those no record lists yet.
  if (!remains_of(s.name).empty()) {
    say("taking fabric " + s.name + " down");
    try {
      run_child_command({"fabric", "down", "--name", s.name, "--force"}, ChildSignals::Shielded);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "topocoll demo: %s\n", e.what());
    }
  }
  out.left_behind = remains_of(s.name);
  out.interrupted_by = InterruptCatcher::caught();
  return out;
}

}  // namespace topocoll::cli
