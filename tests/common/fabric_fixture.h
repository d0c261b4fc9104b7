// Live emulated fabrics for the end-to-end tests (ctest label `fabric`): whether this
// machine can make them, and one brought up for a test and always taken down.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fabric/fabric_plan.h"
#include "fabric/live_fabric.h"
#include "tests/common/shell_run.h"
#include "tests/common/time_scale.h"
#include "topo/topology_json.h"

namespace topocoll::testing_support {

inline const std::string kCli = std::string(TOPOCOLL_BINARY_DIR) + "/tools/topocoll";
inline const std::string kExamples = std::string(TOPOCOLL_SOURCE_DIR) + "/examples/";

// Time budgets given to the CLI, scaled for sanitized builds.
inline std::string budget(int seconds) { return " --budget " + std::to_string(seconds * kTimeScale); }

// Why fabrics cannot be made here ("" when they can), probed once.
inline const std::string& fabric_unavailable() {
  static const std::string reason = [] {
    const auto t = topo::load_topology_file(kExamples + "bigraph-32.json");
    return fabric::machine_cannot_run(fabric::estimate_fabric_size(t), "tf-livetest-probe");
  }();
  return reason;
}

#define REQUIRE_FABRIC()                                                                    \
  do {                                                                                      \
    if (!::topocoll::testing_support::fabric_unavailable().empty())                         \
      GTEST_SKIP() << "no fabric on this machine: " << ::topocoll::testing_support::fabric_unavailable(); \
  } while (0)

class FabricUp {
 public:
  FabricUp(const std::string& name, const std::string& topology, const std::string& rate,
           const std::string& more_options = "")
      : name_(name) {
    shell_run(kCli + " fabric down --force --name " + name);  // a crashed run's leftovers: the test's own name
    const auto r = shell_run(kCli + " fabric up " + kExamples + topology + " --name " + name +
                             " --rate-mbit " + rate + (more_options.empty() ? "" : " " + more_options));
    ok_ = r.status == 0;
    output_ = r.output;
  }
  ~FabricUp() { shell_run(kCli + " fabric down --name " + name_); }
  bool ok() const { return ok_; }
  const std::string& output() const { return output_; }

 private:
  std::string name_, output_;
  bool ok_ = false;
};

}  // namespace topocoll::testing_support
