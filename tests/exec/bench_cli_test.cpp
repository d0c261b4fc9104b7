// `topocoll bench` end to end: it launches its own ranks, checks every result and writes
// the JSON rows documented in docs/engine.md; bad arguments fail with a clear message.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "tests/common/scratch_dir.h"

namespace {

using topocoll::testing_support::ScratchDir;

const std::string kTopocoll = std::string(TOPOCOLL_BINARY_DIR) + "/tools/topocoll";

bool have_cli() {
  struct stat st {};
  return ::stat(kTopocoll.c_str(), &st) == 0;
}

// Runs a shell command; returns its exit status and its output (stdout + stderr).
int run(const std::string& command, std::string* output) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(BenchCli, RunsVerifiedCollectivesAcrossProcessesAndWritesJsonRows) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  const ScratchDir scratch("bench_cli");
  const std::string json = scratch.file("rows.json");
  std::string out;
  const int rc = run(kTopocoll + " bench --topo " + TOPOCOLL_SOURCE_DIR +
                         "/examples/bigraph-32.json --ranks 4 --algos ring,hd --sizes 1K,100000"
                         " --dtype bf16 --op avg --iters 2 --warmup 1 --json " + json,
                     &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Out of bounds values : 0 OK"), std::string::npos) << out;
  std::ifstream in(json);
  ASSERT_TRUE(in) << "no JSON written";
  const auto rows = nlohmann::json::parse(in);
  ASSERT_EQ(rows.size(), 4u);  // 2 sizes x 2 algorithms
  for (const auto& r : rows) {
    for (const char* key : {"algo", "bytes", "time_us", "algbw", "busbw", "wrong", "count",
                            "predicted_us", "max_link_load"})
      EXPECT_TRUE(r.contains(key)) << key << " missing in " << r.dump();
    EXPECT_EQ(r["wrong"], 0);
    EXPECT_GT(r["time_us"].get<double>(), 0);
    EXPECT_EQ(r["dtype"], "bfloat16");
  }
  EXPECT_EQ(rows[2]["bytes"], 100000);
  EXPECT_EQ(rows[2]["count"], 50000);
}

TEST(BenchCli, RanksGivenOnTheCommandLineMeetAtTheBootstrapAddress) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  // As under a launcher that passes rank flags: rank 0 serves the rendezvous at the address.
  const std::string address = "127.0.0.1:" + std::to_string(20000 + ::getpid() % 20000);
  const std::string common = " bench --ranks 2 --sizes 1K --iters 2 --bootstrap " + address;
  std::string out;
  const int rc = run("(" + kTopocoll + common + " --rank 1 > /dev/null &) ; " + kTopocoll +
                         common + " --rank 0",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("# topocoll bench: 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("Out of bounds values : 0 OK"), std::string::npos) << out;
}

TEST(BenchCli, BadArgumentsAreNamed) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  std::string out;
  EXPECT_NE(run(kTopocoll + " bench --ranks 2 --dtype float7", &out), 0);
  EXPECT_NE(out.find("--dtype 'float7'"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run(kTopocoll + " bench --ranks 2 --algos nosuch --sizes 1K", &out), 0);
  EXPECT_NE(out.find("nosuch"), std::string::npos) << out;
  out.clear();
  // Launched as a rank of a group without a bootstrap address.
  EXPECT_NE(run("TOPOCOLL_RANK=0 TOPOCOLL_NRANKS=2 " + kTopocoll + " bench --sizes 1K", &out), 0);
  EXPECT_NE(out.find("TOPOCOLL_BOOTSTRAP"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run(kTopocoll + " bench --rank 2 --ranks 2 --sizes 1K", &out), 0);
  EXPECT_NE(out.find("--rank 2 needs --ranks N > 2"), std::string::npos) << out;
}

// Every bad value names its flag and the allowed range, before any
// rank starts; a device under --json is refused.
TEST(BenchCli, OutOfRangeNumbersAndUnwritableJsonAreErrors) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  const std::pair<std::string, std::string> cases[] = {
      {"--factor abc", "--factor \"abc\": expected a number from 1.01 to 1024"},
      {"--factor nan", "--factor \"nan\": expected a number from 1.01 to 1024"},
      {"--factor -2", "--factor \"-2\": expected a number from 1.01 to 1024"},
      {"--factor 1.0000001", "--factor \"1.0000001\": expected a number from 1.01 to 1024"},
      {"--seconds abc", "--seconds \"abc\": expected a number from 0.001 to 3600"},
      {"--seconds -1", "--seconds \"-1\": expected a number from 0.001 to 3600"},
      {"--ranks 2abc", "--ranks \"2abc\": expected an integer from 1 to 4096"},
      {"--sizes 2XiB", "--sizes \"2XiB\": expected a size from 0 to 1048576G (like 4096, 64K or 2GiB)"},
      {"--sizes 1:1G --factor 1.01", "makes 2090 sizes; at most 1000"},
      {"--sizes 1024G", "more than its"},
      {"--ranks 5000", "--ranks \"5000\": expected an integer from 1 to 4096"},  // ranks to fork
      {"--warmup 2000000000", "--warmup \"2000000000\": expected an integer from 0 to 1000000"},
      {"--iters 2147483647", "--iters \"2147483647\": expected an integer from 1 to 1000000"},
      {"--endpoints 0,5", "--endpoints places ranks on a topology's endpoints: it needs --topo or --fabric"},
      {"--json /nonexistent-dir/x.json", "--json: cannot write \"/nonexistent-dir/x.json\": \"/nonexistent-dir\": No such"},
      {"--json " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json",
       "is the --topo file; name another"},
  };
  for (const auto& [flags, message] : cases) {
    std::string out;
    const std::string ranks = flags.rfind("--ranks", 0) == 0 ? "" : "--ranks 2 ";  // each flag once
    EXPECT_NE(run(kTopocoll + " bench " + ranks + flags, &out), 0) << flags;
    EXPECT_NE(out.find(message), std::string::npos) << flags << ": " << out;
  }
  std::string out;
  EXPECT_NE(run(kTopocoll + " bench --ranks 2 --sizes 1K --iters 2 --warmup 0 --json /dev/full", &out), 0) << out;
  // A device is refused, never replaced (as root a rename would put a file in its place);
  // a full disk is config::replace_file's own test (tests/config/user_files_test.cpp).
  EXPECT_NE(out.find("--json: cannot write \"/dev/full\": it is a character device"), std::string::npos)
      << out;
  struct stat st {};
  EXPECT_TRUE(::stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) << "/dev/full was replaced";
}

// The fault matrix at the CLI: one rank of `topocoll bench` killed or stopped
// mid-run. Every other rank's message names it, the launcher exits non-zero, and no rank
// process is left behind (the launcher kills a stopped one after its grace period).
void expect_fault_named(const std::string& signal_name, int deadline_s) {
  const ScratchDir scratch("bench_fault");
  const std::string out_file = scratch.file(signal_name + ".txt");
  const std::string script =
      kTopocoll + " bench --ranks 4 --sizes 4M --algos ring --iters 100000 --seconds 3600 -c 0 > " + out_file +
      " 2>&1 & L=$!; sleep 2; R=$(pgrep -P $L | sed -n 3p); kill -" + signal_name +
      " $R; wait $L; echo \"launcher exit $?\" >> " + out_file + "; pgrep -P $L >/dev/null && echo LEFT_BEHIND >> " +
      out_file + "; true";
  const auto started = std::chrono::steady_clock::now();
  std::string ignored;
  run("timeout " + std::to_string(deadline_s) + " sh -c '" + script + "'", &ignored);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(deadline_s));
  std::ifstream in(out_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string how = signal_name == "KILL" ? "died" : "stopped answering";
  int named = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find("rank 2 (") != std::string::npos && line.find(how) != std::string::npos) ++named;
  EXPECT_GE(named, 3) << "every other rank names rank 2:\n" << text;
  EXPECT_EQ(text.find("launcher exit 0"), std::string::npos) << text;
  EXPECT_NE(text.find("launcher exit"), std::string::npos) << text;
  EXPECT_EQ(text.find("LEFT_BEHIND"), std::string::npos) << text;
}

TEST(BenchCli, ARankKilledMidRunIsNamedByEveryOtherRank) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  expect_fault_named("KILL", 60);
}

TEST(BenchCli, ARankStoppedMidRunIsNamedByEveryOtherRank) {
  if (!have_cli()) GTEST_SKIP() << "the topocoll CLI is not built in this tree";
  expect_fault_named("STOP", 90);  // 10 s silence limit, then the launcher's 15 s grace
}

}  // namespace
