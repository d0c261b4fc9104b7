// One warning path: the sink can be replaced (the plugin installs NCCL's logger), warn()
// says every message, warn_once() each distinct text once, and the default is stderr with
// topocoll's prefix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/warnings.h"

namespace topocoll::config {
namespace {

std::vector<std::string> g_said;
void capture(const std::string& message) { g_said.push_back(message); }

TEST(Warnings, OnceIsOncePerDistinctTextAndWarnIsEveryTime) {
  g_said.clear();
  set_warning_sink(&capture);
  warn_once("TOPOCOLL_X=\"1\": a test warning");
  warn_once("TOPOCOLL_X=\"1\": a test warning");
  warn_once("TOPOCOLL_X=\"2\": a test warning");
  warn("closed a stray connection");
  warn("closed a stray connection");
  set_warning_sink(nullptr);
  EXPECT_EQ(g_said, (std::vector<std::string>{"TOPOCOLL_X=\"1\": a test warning", "TOPOCOLL_X=\"2\": a test warning",
                                              "closed a stray connection", "closed a stray connection"}));
}

TEST(Warnings, TheDefaultSinkIsStderrWithTopocollsPrefix) {
  ::testing::internal::CaptureStderr();
  warn("a plain warning");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "topocoll: WARN a plain warning\n");
}

}  // namespace
}  // namespace topocoll::config
