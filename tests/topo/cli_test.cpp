// The `topocoll` CLI accepts every example and rejects every malformed file, naming it.
#include <gtest/gtest.h>

#include <fstream>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/common/scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using topocoll::testing_support::ScratchDir;

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& args) {
  Result r;
  std::string command = std::string(TOPOCOLL_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kSource = TOPOCOLL_SOURCE_DIR;

TEST(TopoCli, ValidateAcceptsEveryExample) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/examples")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    Result r = run("validate " + entry.path().string());
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(entry.path().string() + ": ok: "), std::string::npos) << r.output;
  }
  EXPECT_EQ(count, 4);
}

TEST(TopoCli, ValidateRejectsEveryMalformedFileWithItsPath) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/tests/data/topo")) {
    const std::string path = entry.path().string();
    Result r = run("validate " + path);
    if (entry.path().filename().string().rfind("valid_", 0) == 0) {
      EXPECT_EQ(r.status, 0) << r.output;
      continue;
    }
    ++count;
    EXPECT_EQ(r.status, 1) << path << "\n" << r.output;
    EXPECT_EQ(r.output.rfind(path + ": error: ", 0), 0u) << r.output;
  }
  EXPECT_GE(count, 30);
}

TEST(TopoCli, ValidateShowsPointerAndReason) {
  Result r = run("validate " + kSource + "/tests/data/topo/bigraph_unknown_switch.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("error: /servers/3/nics/1/switch: unknown switch \"U9\""),
            std::string::npos)
      << r.output;
}

TEST(TopoCli, DescribeBiGraph32) {
  Result r = run("describe " + kSource + "/examples/bigraph-32.json");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"hosts: 32 (1 GPU each)", "endpoints: 32", "switches: 4 upper + 4 lower = 8",
                           "8 used of 8 = 4 endpoints + 4 inter-group", "inter-group       16 cables",
                           "diameter: 3 hops (4 links", "bisection bandwidth: 800 Gb/s per direction (8 cables cut)"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
}

TEST(TopoCli, DescribeListsCablesByName) {
  Result r = run("describe " + kSource + "/examples/bigraph-32.json --cables");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"cables (name, kind", "  s0.g0-U0 ", "  U3-L3 ", "inter-group"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  int cables = 0;
  for (size_t at = r.output.find("\n  ", r.output.find("cables (name")); at != std::string::npos;
       at = r.output.find("\n  ", at + 1))
    ++cables;
  EXPECT_EQ(cables, 48);
}

TEST(TopoCli, GenerateWritesWhatValidateAccepts) {
  const ScratchDir scratch("topo_cli_generate");
  const std::string out = scratch.file("generated-nap.json");
  Result g = run("generate nap --torus 3x2 --nodes-per-package 4 --local-switches 2 -o " + out);
  ASSERT_EQ(g.status, 0) << g.output;
  Result v = run("validate " + out);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("24 endpoints"), std::string::npos) << v.output;
  // A shape that cannot be is a bad command line naming the flag, not a field of JSON the
  // user never wrote.
  // "-" is standard input: a generated topology piped into validate and plan.
  Result piped = run("generate nap --torus 2x1 < /dev/null | " + std::string(TOPOCOLL_CLI) + " validate -");
  EXPECT_EQ(piped.status, 0) << piped.output;
  EXPECT_NE(piped.output.find("-: ok: nap \"nap-2x8\""), std::string::npos) << piped.output;
  piped = run("validate - < /dev/null");
  EXPECT_EQ(piped.status, 1) << piped.output;
  EXPECT_NE(piped.output.find("the file is empty"), std::string::npos) << piped.output;
  // The file as every other command names it: --topo FILE.
  Result named = run("validate --topo " + out);
  EXPECT_EQ(named.status, 0) << named.output;
  named = run("describe --topo " + out);
  EXPECT_EQ(named.status, 0) << named.output;
  Result bad = run("generate nap --torus 3x2 --packages 4");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("topocoll generate: --torus: torus 3x2 holds 6 packages, not 4"), std::string::npos)
      << bad.output;
  bad = run("generate bigraph --gbps 0");  // the shape's link_gbps, set by --gbps
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("topocoll generate: --gbps: rate must be"), std::string::npos) << bad.output;
  bad = run("generate nap --torus 2x0");  // packages counted from the torus
  EXPECT_NE(bad.output.find("topocoll generate: --torus: "), std::string::npos) << bad.output;
  bad = run("generate bigraph --switches-per-group 0");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--switches-per-group: switches per group must be in [1, 1024], got 0"),
            std::string::npos)
      << bad.output;
  Result usage = run("generate bigraph --no-such-option 3");
  EXPECT_EQ(usage.status, 2);
}

TEST(TopoCli, DrawWritesDot) {
  const ScratchDir scratch("topo_cli_draw");
  const std::string out = scratch.file("bigraph-32.dot");
  Result r = run("draw " + kSource + "/examples/bigraph-32.json -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(fs::exists(out));
  EXPECT_GT(fs::file_size(out), 1000u);
}

TEST(TopoCli, EverySubcommandHasHelp) {
  for (const char* command : {"validate", "describe", "generate", "draw"}) {
    Result r = run(std::string(command) + " --help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.output.find("usage: topocoll "), std::string::npos) << command;
  }
}

// Drawing a topology past the budget is refused up front, naming the
// size and the limit, instead of minutes in Graphviz.
TEST(TopoCli, DrawRefusesTopologiesOverItsNodeLimit) {
  const ScratchDir scratch("topo_cli_draw_limit");
  const std::string path = scratch.file("too_large.json");
  {
    std::ofstream out(path);
    out << R"({"kind": "bigraph", "shape": {"switches_per_group": 64, "endpoints_per_switch": 64}})";
  }
  Result r = run("draw " + path + " -o " + scratch.file("too_large.dot"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("has 8320 nodes (8192 endpoints, 128 switches), more than the 4096 a drawing may have"),
            std::string::npos)
      << r.output;
}

}  // namespace
