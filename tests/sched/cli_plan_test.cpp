// Runs the `topocoll` binary and checks `plan --json` against docs/plan-format.md.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sched/algorithm_registry.h"
#include "tests/common/scratch_dir.h"
#include "tools/flag_value.h"

namespace {

using nlohmann::json;

const std::string kCli = TOPOCOLL_BINARY_DIR "/tools/topocoll";

std::string run(const std::string& args, int* rc) {
  std::string cmd = kCli + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(CliPlan, JsonHasTheDocumentedFields) {
  ASSERT_TRUE(std::filesystem::exists(kCli)) << kCli;
  int rc = -1;
  std::string out = run("plan --topo " TOPOCOLL_SOURCE_DIR
                        "/examples/bigraph-32.json --coll allreduce --algo hd --bytes 1M --json",
                        &rc);
  ASSERT_EQ(rc, 0) << out;
  json doc = json::parse(out);  // throws (fails the test) when not valid JSON
  EXPECT_EQ(doc["algo"], "hd");
  EXPECT_EQ(doc["ranks"], 32);
  EXPECT_DOUBLE_EQ(doc["max_link_load"].get<double>(), 1.0);
  EXPECT_GT(doc["predicted_us"].get<double>(), 0);

  std::set<std::string> nodes;
  std::set<int> link_ids;
  for (const auto& l : doc["links"]) {
    link_ids.insert(l["id"].get<int>());
    nodes.insert(l["from"].get<std::string>());
    nodes.insert(l["to"].get<std::string>());
    EXPECT_GT(l["gbps"].get<double>(), 0);
  }
  ASSERT_EQ(doc["placement"].size(), 32u);
  for (const auto& p : doc["placement"]) {
    EXPECT_TRUE(p.contains("rank"));
    EXPECT_TRUE(nodes.count(p["endpoint"].get<std::string>())) << p;
    EXPECT_TRUE(nodes.count(p["switch"].get<std::string>())) << p;
    EXPECT_TRUE(p.contains("host"));
  }
  ASSERT_EQ(doc["steps"].size(), 10u);
  for (const auto& step : doc["steps"]) {
    EXPECT_EQ(step["flows"].size(), 32u);
    for (const auto& f : step["flows"]) {
      EXPECT_GT(f["bytes"].get<int64_t>(), 0);
      int src = f["src"], dst = f["dst"];
      EXPECT_NE(src, dst);
      // The path runs from the source's endpoint to the destination's, link after link.
      const auto& links = f["links"];
      ASSERT_FALSE(links.empty());
      std::string at = doc["placement"][src]["endpoint"];
      for (const auto& id : links) {
        ASSERT_TRUE(link_ids.count(id.get<int>()));
        const auto& l = doc["links"][id.get<int>()];
        EXPECT_EQ(l["from"], at);
        at = l["to"];
      }
      EXPECT_EQ(at, doc["placement"][dst]["endpoint"].get<std::string>());
    }
  }
}

TEST(CliPlan, TextAndErrors) {
  int rc = -1;
  std::string out = run("plan --topo " TOPOCOLL_SOURCE_DIR
                        "/examples/nap-4x8.json --coll allreduce --algo auto --bytes 4M --ranks 16",
                        &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("picked"), std::string::npos) << out;
  out = run("plan --topo " TOPOCOLL_SOURCE_DIR
            "/examples/bigraph-32.json --coll allreduce --algo nope --bytes 1M", &rc);
  EXPECT_EQ(rc, 2) << "an unknown algorithm is bad usage";
  EXPECT_NE(out.find("nope"), std::string::npos) << out;
  out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce", &rc);
  EXPECT_EQ(rc, 2) << out;
  out = run("plan --topo /nonexistent.json --coll allreduce --bytes 1M", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("topocoll plan: cannot read \"/nonexistent.json\""), std::string::npos) << out;
  {
    const std::string empty = std::string(TOPOCOLL_BINARY_DIR) + "/cli_plan_empty_topology.json";
    std::ofstream{empty};
    out = run("plan --topo " + empty + " --coll allreduce --bytes 1M", &rc);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("topocoll plan: \"" + empty + "\": the file is empty"), std::string::npos)
        << "a problem with an input file names it: " << out;
    std::remove(empty.c_str());
  }
  // A size that is not whole elements was planned rounded down and reported as given.
  out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --bytes 130", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--bytes 130 is not a whole number of 4-byte elements"), std::string::npos) << out;
  // Cost settings that made every prediction NaN or infinite are refused, naming the range.
  for (const char* bad : {"--gamma-gbs 1e-320", "--gamma-gbs 1e308", "--alpha-us 1e308", "--alpha-msg-us -1"}) {
    out = run(std::string("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --bytes 1M ") + bad, &rc);
    EXPECT_NE(rc, 0) << bad << "\n" << out;
    EXPECT_NE(out.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << out;
    EXPECT_EQ(out.find("nan"), std::string::npos) << out;
  }
}

TEST(CliSimulate, CsvAndJson) {
  int rc = -1;
  std::string out = run("simulate --topo " TOPOCOLL_SOURCE_DIR
                        "/examples/bigraph-32.json --coll allgather --sizes 4K:64K "
                        "--algos ring,hd --json",
                        &rc);
  ASSERT_EQ(rc, 0) << out;
  json doc = json::parse(out);
  ASSERT_EQ(doc["sizes"].size(), 5u);  // 4K, 8K, 16K, 32K, 64K
  for (const auto& s : doc["sizes"]) {
    EXPECT_TRUE(s.contains("auto"));
    ASSERT_EQ(s["results"].size(), 2u);
    EXPECT_GT(s["results"][1]["busbw_gbs"].get<double>(), 0);
  }
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR
            "/examples/bigraph-32.json --coll allreduce --sizes 1M:2M --csv", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind("bytes,algo,time_us,algbw_gbs,busbw_gbs,max_link_load,auto_pick", 0), 0u);
  const topocoll::testing_support::ScratchDir scratch("cli_plan_plot");
  const std::filesystem::path svg = scratch.file("sizes.svg");
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce "
            "--sizes 4K:16K --plot " + svg.string(), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_GT(std::filesystem::file_size(svg), 1000u);
}

// Sizes the gathers cannot split into whole elements per rank: `plan` refuses them naming
// the multiple; `simulate` reports the size that is moved, and its bandwidth is of that.
// A typo in --algos and a --plot name that is no picture fail before the sweep.
TEST(CliSimulate, SizesAreWhatMovesAndBadNamesFailUpFront) {
  int rc = -1;
  std::string out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allgather --bytes 4100", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--bytes 4100 of allgather over 32 ranks is not a whole number of 4-byte elements per rank "
                     "(a multiple of 128 bytes); 4096 would be planned"),
            std::string::npos)
      << out;
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allgather --ranks 3 "
            "--sizes 1K:2K --algos ring --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  const json doc = json::parse(out);
  ASSERT_EQ(doc["sizes"].size(), 2u);
  EXPECT_EQ(doc["sizes"][0]["bytes"].get<int64_t>(), 1020);  // 85 floats x 3 ranks
  EXPECT_EQ(doc["sizes"][1]["bytes"].get<int64_t>(), 2040);
  const auto& r = doc["sizes"][0]["results"][0];
  EXPECT_NEAR(r["busbw_gbs"].get<double>(), 1020.0 / (r["time_us"].get<double>() * 1e3) * 2.0 / 3.0, 1e-9);
  // Sizes below one element per rank (32 ranks x 4 B = 128 B) run as nothing: left out and
  // said so, not rows of zeros; fc, which auto passes over, is priced as `plan --algo fc`.
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allgather --sizes 1:256 "
            "--algo hd,auto --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  const json small = json::parse(out);
  ASSERT_EQ(small["sizes"].size(), 2u) << out;
  EXPECT_EQ(small["sizes"][0]["bytes"].get<int64_t>(), 128);
  EXPECT_EQ(small["left_out_bytes"], json({1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(small["algos"], json({"hd"}));
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --sizes 1M,4M "
            "--algos fc --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  const json fc = json::parse(out);
  ASSERT_EQ(fc["sizes"].size(), 2u) << out;
  EXPECT_GT(fc["sizes"][1]["results"][0].value("time_us", 0.0), 0.0) << out;
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --algos ring,hdd", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--algos: 'hdd' is not an algorithm"), std::string::npos) << out;
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --plot --json", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--plot needs a value, not the flag '--json'"), std::string::npos) << out;
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --plot "
            TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("the name must end in .svg or .png"), std::string::npos) << out;
  out = run("simulate --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --json --csv", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--json and --csv: give one"), std::string::npos) << out;
}

// A flag given twice is refused (the parsers would keep the last value) in every command,
// generate's --key=value form too; what follows "--" is another program's and not looked at.
TEST(CliFlags, AFlagGivenTwiceIsRefusedNamingIt) {
  int rc = -1;
  std::string out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --bytes 4096 "
                        "--bytes 8192", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("topocoll plan: --bytes is given twice: give each flag once"), std::string::npos) << out;
  out = run("generate nap --packages=2 --packages 4", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--packages is given twice"), std::string::npos) << out;
  out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --bytes 4096", &rc);
  EXPECT_EQ(rc, 0) << out;
  // The flags that add to a list repeat (fabric rank-exec's --relay-port and --rank0-env).
  out = run("fabric rank-exec --relay-port 1 --relay-port 2 --rank0-env A=1 --rank0-env B=2 --relay-port 3 --show -- true",
            &rc);
  EXPECT_EQ(out.find("given twice"), std::string::npos) << out;
  out = run("fabric rank-exec --relay-port 1 --placement a --placement b --show -- true", &rc);
  EXPECT_NE(out.find("--placement is given twice"), std::string::npos) << out;
  // --flag=value is --flag value in every command, and counts as the flag given.
  out = run("plan --topo=" TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll=allreduce --bytes=4096 --algo=hd", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("allreduce of 4096 bytes, algorithm hd"), std::string::npos) << out;
  out = run("plan --topo=" TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --bytes=4096 --bytes 8K", &rc);
  EXPECT_NE(out.find("--bytes is given twice"), std::string::npos) << out;
  // A short name and its long one are one flag (bench -n 4 --ranks 8 ran 8 ranks), as are
  // two long spellings (--algo, --algos); a negative number is a value, not a short flag.
  out = run("bench --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json -n 4 --ranks 8", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("topocoll bench: -n or --ranks is given twice: give each flag once"), std::string::npos) << out;
  out = run("bench --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --algo hd --algos ring", &rc);
  EXPECT_NE(out.find("--algo or --algos is given twice"), std::string::npos) << out;
  out = run("draw " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json -o a.svg -o b.svg", &rc);
  EXPECT_NE(out.find("-o or --output is given twice"), std::string::npos) << out;
  out = run("accept --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json -n 2 -n 3", &rc);
  EXPECT_NE(out.find("-n or --ranks is given twice"), std::string::npos) << out;
  out = run("generate nap --packages 2 -o x.json --output y.json", &rc);
  EXPECT_NE(out.find("-o or --output is given twice"), std::string::npos) << out;
}

// `topocoll help CMD` is that command's help; an unknown one is bad usage. An algorithm that
// does not apply says so once, under its own name.
TEST(CliHelp, HelpNamesACommandAndRefusesAnUnknownOne) {
  int rc = -1;
  std::string out = run("help plan", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.rfind("usage: topocoll plan", 0), 0u) << out;
  out = run("help nope", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("topocoll help: unknown command 'nope'"), std::string::npos) << out;
  out = run("plan --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --coll allreduce --algo hier-hd --bytes 1M",
            &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("topocoll plan: hier-hd: "), std::string::npos) << out;
  EXPECT_EQ(out.find("hier-hd: hier-hd"), std::string::npos) << out;
  EXPECT_EQ(out.find("algo: "), std::string::npos) << out;
}

// `order --hosts` takes the list itself as well as a file of it, and a file may begin with a
// UTF-8 byte order mark (an editor's), as a topology file may.
TEST(CliOrder, HostsAsAListOrAFileWithAByteOrderMark) {
  int rc = -1;
  std::string out = run("order --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --hosts S0,s1,s2,s3", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("s0\ns2\ns1\ns3\n"), std::string::npos) << "hosts found as the plugin finds them: " << out;
  const topocoll::testing_support::ScratchDir scratch("cli_order");
  const std::filesystem::path hosts = scratch.file("hosts.txt");
  std::ofstream(hosts) << "\xEF\xBB\xBFs0\ns1\n";
  out = run("order --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --hosts " + hosts.string(), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ring over 2 endpoints on 2 hosts"), std::string::npos) << out;
}

// --flag=value splits up to "--": what follows is another program's command line.
TEST(CliFlags, FlagValuesSplitUpToTheOtherProgramsArguments) {
  using topocoll::cli::split_flag_values;
  EXPECT_EQ(split_flag_values({"--a=1", "x=2", "--b==c", "--", "--d=4"}),
            (std::vector<std::string>{"--a", "1", "x=2", "--b", "=c", "--", "--d=4"}));
  EXPECT_EQ(split_flag_values({"--=x", "-n=2"}), (std::vector<std::string>{"--=x", "-n=2"}));
}

// `topocoll algorithms` and the help texts are the registry's lists.
TEST(CliPlan, AlgorithmsAndHelpListTheRegistry) {
  int rc = -1;
  const std::string out = run("algorithms", &rc);
  EXPECT_EQ(rc, 0) << out;
  for (const topocoll::sched::Algorithm& a : topocoll::sched::algorithms())
    EXPECT_NE(out.find("\n" + std::string(a.name) + " "), std::string::npos) << a.name << "\n" << out;
  for (const char* command : {"plan", "bench", "simulate"}) {
    const std::string help = run(std::string(command) + " --help", &rc);
    EXPECT_EQ(rc, 0) << help;
    EXPECT_NE(help.find(topocoll::sched::algorithm_list()), std::string::npos) << command << "\n" << help;
  }
}

}  // namespace
