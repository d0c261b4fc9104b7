// exec/private_conversion.h: a converter runs in a directory of our own, alternatives are
// tried in turn, the failure says why, and nothing is left in the temporary directory.
#include "exec/private_conversion.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/common/scratch_dir.h"

namespace topocoll::exec {
namespace {

namespace fs = std::filesystem;

// TMPDIR pointed at a scratch directory for the test's length, so what is left is visible.
class PrivateConversion : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("TMPDIR");
    had_tmpdir_ = old != nullptr;
    if (old) old_tmpdir_ = old;
    ::setenv("TMPDIR", scratch_.path().c_str(), 1);
  }
  void TearDown() override {
    if (had_tmpdir_) ::setenv("TMPDIR", old_tmpdir_.c_str(), 1);
    else ::unsetenv("TMPDIR");
  }
  bool scratch_is_empty() const { return fs::is_empty(scratch_.path()); }

  testing_support::ScratchDir scratch_{"private_conversion"};
  bool had_tmpdir_ = false;
  std::string old_tmpdir_;
};

TEST_F(PrivateConversion, TheFirstConverterThatWorksGivesItsOutput) {
  const Conversion c = convert_privately("picture", "svg", "png",
                                         {{"false"}, {"topocoll-no-such-converter", "{in}"}, {"cp", "{in}", "{out}"}},
                                         "the converters");
  EXPECT_TRUE(c.succeeded()) << c.failure;
  EXPECT_EQ(c.output, "picture");
  EXPECT_TRUE(scratch_is_empty());
}

TEST_F(PrivateConversion, WhenNoneWorksTheFailureNamesTheLastAndWhy) {
  Conversion c = convert_privately("x", "dot", "png", {{"topocoll-no-such-converter"}, {"false"}}, "Graphviz's dot");
  EXPECT_EQ(c.failure, "Graphviz's dot failed (false: exit 1)");
  EXPECT_EQ(c.output, "");
  c = convert_privately("x", "dot", "png", {{"true"}}, "Graphviz's dot");
  EXPECT_EQ(c.failure, "Graphviz's dot failed (true wrote nothing)");
  c = convert_privately("x", "dot", "png", {{"topocoll-no-such-converter"}}, "Graphviz's dot");
  EXPECT_EQ(c.failure.rfind("Graphviz's dot failed (topocoll-no-such-converter: ", 0), 0u) << c.failure;
  EXPECT_TRUE(scratch_is_empty());
}

TEST_F(PrivateConversion, AnUnusableTemporaryDirectoryIsAFailureNotACrash) {
  ::setenv("TMPDIR", (scratch_.path() + "/missing").c_str(), 1);
  const Conversion c = convert_privately("x", "dot", "png", {{"cp", "{in}", "{out}"}}, "Graphviz's dot");
  EXPECT_EQ(c.failure.rfind("no directory to convert in (" + scratch_.path() + "/missing/", 0), 0u) << c.failure;
}

}  // namespace
}  // namespace topocoll::exec
