// The demo's run step on an emulated fabric (docs/fabric.md): the topology brought up as
// fabric `name` at the calibration's rate, the allreduces measured inside it by `topocoll
// bench --fabric`, and the fabric taken down again whatever happened: a failed step,
// Ctrl-C, SIGTERM or SIGHUP. Each step runs as a child process (tools/child_command.h), so
// this process is still there to clean up; the teardown runs in a process group of its own,
// out of reach of a second Ctrl-C.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace topocoll::cli {

struct DemoFabricSettings {
  std::string topology_file;
  std::string name;     // a name of its own: a user's fabric (default `tf`) is never touched
  double rate_mbit = 0;  // of the fastest cable
  int ranks = 0;         // on the first endpoints, as `bench --fabric` places them
  std::vector<std::string> algos;
  std::string sizes;
  int iters = 3;
  std::string bench_json;  // where bench writes its rows
};

struct DemoFabricOutcome {
  bool measured = false;                 // bench ran to its end and wrote bench_json
  int interrupted_by = 0;                // the signal that stopped the run (0: none)
  std::vector<std::string> left_behind;  // what the teardown did not remove (empty: nothing)
};

using DemoProgress = std::function<void(const std::string&)>;

DemoFabricOutcome run_demo_on_fabric(const DemoFabricSettings& settings, const DemoProgress& say);

}  // namespace topocoll::cli
