// exec/private_conversion.h: a converter runs in a directory of our own, alternatives are
// tried in turn, the failure says why, and nothing is left in the temporary directory.
#include "exec/private_conversion.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "exec/external_program.h"
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

// What a converter writes besides its output (ImageMagick's out-0.png for a picture of
// several frames) goes with the directory; the old cleanup removed only in.* and out.*.
TEST_F(PrivateConversion, WhateverTheConverterLeftIsRemoved) {
  const Conversion c = convert_privately(
      "picture", "svg", "png",
      {{"sh", "-c", "cp \"$1\" \"$2\" && touch \"$2-0.png\" && mkdir \"${2%/*}/frames\"", "sh", "{in}", "{out}"}},
      "the converters");
  EXPECT_TRUE(c.succeeded()) << c.failure;
  EXPECT_EQ(c.output, "picture");
  EXPECT_TRUE(scratch_is_empty());
}

TEST_F(PrivateConversion, AConverterKilledByASignalIsSaidSo) {
  const Conversion c = convert_privately("x", "dot", "png", {{"sh", "-c", "kill -9 $$"}}, "Graphviz's dot");
  EXPECT_EQ(c.failure.rfind("Graphviz's dot failed (sh: killed by signal 9 (", 0), 0u) << c.failure;
  EXPECT_TRUE(scratch_is_empty());
}

// As root, a TMPDIR another user controls is not where the private directory goes (they
// could swap it for a link between its making and the converter's write): /tmp is.
TEST_F(PrivateConversion, AsRootATemporaryDirectoryOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "handing a directory to another user needs root";
  const std::string theirs = scratch_.path() + "/theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  ::setenv("TMPDIR", theirs.c_str(), 1);
  // The converter says where it ran.
  const Conversion c = convert_privately("x", "dot", "txt", {{"sh", "-c", "dirname \"$1\" > \"$1\"", "sh", "{out}"}},
                                         "the converter");
  ASSERT_TRUE(c.succeeded()) << c.failure;
  EXPECT_EQ(c.output.rfind("/tmp/topocoll-convert.", 0), 0u) << c.output;
  EXPECT_TRUE(fs::is_empty(theirs));
}

// A Ctrl-C while the converter runs reaches the whole foreground group: the converter takes
// it, we remove our directory and then end by the same signal (we used to die at once and
// leave the directory behind). The converter plays the terminal: it interrupts its parent,
// which must outlive it, then itself.
TEST_F(PrivateConversion, ACtrlCDuringTheConverterEndsUsOnlyOnceTheDirectoryIsGone) {
  EXPECT_EXIT(convert_privately("x", "dot", "png",
                                {{"sh", "-c", "kill -INT $PPID; sleep 0.2; kill -INT $$"}, {"cp", "{in}", "{out}"}},
                                "Graphviz's dot"),
              ::testing::KilledBySignal(SIGINT), "");
  EXPECT_TRUE(scratch_is_empty());
}

// Our own disposition of SIGINT is back after the run; the run says how it ended.
TEST_F(PrivateConversion, TheInterruptIsOursAgainAfterTheConverter) {
  struct sigaction before {}, after {};
  ASSERT_EQ(::sigaction(SIGINT, nullptr, &before), 0);
  const ProgramRun run = run_program({"sh", "-c", "kill -QUIT $$"});
  ASSERT_EQ(::sigaction(SIGINT, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_TRUE(run.interrupted());
  EXPECT_EQ(describe_end(run).rfind("killed by signal 3 (", 0), 0u) << describe_end(run);
  EXPECT_FALSE(run_program({"false"}).interrupted());
}

// Started ignoring SIGINT (nohup, a launcher): the converter inherits that, as under
// system(3), and a Ctrl-C is no interrupt of its.
TEST_F(PrivateConversion, AProgramStartedIgnoringTheInterruptKeepsIgnoringIt) {
  struct sigaction ignore {}, before {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGINT, &ignore, &before), 0);
  const ProgramRun run = run_program({"sh", "-c", "kill -INT $$; exit 7"});
  struct sigaction after {};
  ::sigaction(SIGINT, &before, &after);
  EXPECT_FALSE(run.interrupted());
  EXPECT_EQ(run.exit_code, 7) << describe_end(run);
  EXPECT_EQ(after.sa_handler, SIG_IGN) << "still ignored after the run";
}

// Two programs run at once from two threads: the last to end restores our disposition, so
// neither leaves SIGINT ignored for good.
TEST_F(PrivateConversion, ProgramsRunAtOnceLeaveTheInterruptAsItWas) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGINT, nullptr, &before), 0);
  for (int round = 0; round < 5; ++round) {
    std::thread a([] { run_program({"sleep", "0.05"}); });
    std::thread b([] { run_program({"sleep", "0.02"}); });
    a.join();
    b.join();
    struct sigaction now {};
    ASSERT_EQ(::sigaction(SIGINT, nullptr, &now), 0);
    ASSERT_EQ(now.sa_handler, before.sa_handler) << "round " << round;
  }
}

}  // namespace
}  // namespace topocoll::exec
