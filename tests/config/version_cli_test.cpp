// Which topocoll this is: `topocoll --version` (and `version`) prints the one version string
// config::version() gives every face, project()'s version, and exits 0.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "config/version.h"
#include "tests/common/shell_run.h"

namespace topocoll::config {
namespace {

using testing_support::shell_run;

TEST(VersionCli, PrintsTheProjectVersion) {
  EXPECT_TRUE(std::regex_match(std::string(version()), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+"))) << version();
  for (const char* spelling : {"--version", "version"}) {
    const auto r = shell_run(std::string(TOPOCOLL_CLI) + " " + spelling);
    EXPECT_EQ(r.status, 0) << spelling << ": " << r.output;
    EXPECT_EQ(r.output, "topocoll " + std::string(version()) + "\n") << spelling;
  }
}

TEST(VersionCli, TheUsageNamesIt) {
  const auto r = shell_run(std::string(TOPOCOLL_CLI) + " --help");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("`topocoll --version`"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace topocoll::config
