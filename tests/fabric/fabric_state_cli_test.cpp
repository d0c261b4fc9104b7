// The fabric's records as hostile input (no root, no namespace made): a --name is checked
// before it becomes a path or a namespace prefix on every verb, a records' directory that
// another user may write into is refused, and a link planted where root writes a lock or a
// record is never written through, nor a record filed under another fabric's name trusted.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fabric/fabric_plan.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shell_run.h"
#include "topo/topology_json.h"

namespace {

namespace fs = std::filesystem;
using topocoll::testing_support::ScratchDir;
using topocoll::testing_support::shell_run;

const std::string kCli = TOPOCOLL_CLI;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A record as `up` writes it, of fabric `name`, listing namespaces nobody has.
std::string record_of(const std::string& name) {
  return "{\"name\": \"" + name + "\", \"status\": \"up\", \"topology\": {}, \"options\": {}, "
         "\"namespaces\": [\"tf-" + name + "-nowhere\"]}\n";
}

std::string in_state(const std::string& dir, const std::string& command) {
  return "TOPOCOLL_FABRIC_STATE_DIR=" + dir + " " + kCli + " " + command;
}

TEST(FabricState, ANameThatIsNoFabricNameNeverBecomesAPath) {
  const ScratchDir scratch("fabric_state_names");
  const std::string state = scratch.file("state");
  fs::create_directories(state);
  // What `--name ../victim` would reach from the records' directory.
  write_file(scratch.file("victim.json"), record_of("victim"));
  fs::create_directories(scratch.file("victim.d"));
  write_file(scratch.file("victim.d/topology.json"), "{}\n");
  for (const std::string verb :
       {"down --name ../victim", "down --force --name ../victim", "status --name ../victim",
        "degrade --name ../victim a-b --rate-mbit 1", "cut --name ../victim a-b", "restore --name ../victim",
        "route --name ../victim 0 1", "exec --name ../victim 0 -- true", "down --force --name a-b",
        "place --name ../victim --ranks 2", "run --name ../victim --ranks 2 -- true",
        "predict --name ../victim --ranks 2"}) {
    const auto r = shell_run(in_state(state, "fabric " + verb));
    EXPECT_NE(r.status, 0) << verb << ": " << r.output;
    EXPECT_NE(r.output.find("1 to 12 characters of a-z, 0-9 and '_'"), std::string::npos) << verb << ": " << r.output;
  }
  EXPECT_EQ(read_file(scratch.file("victim.json")), record_of("victim"));
  EXPECT_TRUE(fs::exists(scratch.file("victim.d/topology.json")));
  EXPECT_FALSE(fs::exists(scratch.file("victim.lock")));
}

TEST(FabricState, ARecordsDirectoryAnotherUserMayWriteIsRefused) {
  const ScratchDir scratch("fabric_state_modes");
  const std::string open_dir = scratch.file("open");
  fs::create_directories(open_dir);
  ASSERT_EQ(::chmod(open_dir.c_str(), 01777), 0);  // even sticky: anyone may plant a name in it
  auto r = shell_run(in_state(open_dir, "fabric status"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(open_dir + " is writable by others (mode 1777)"), std::string::npos) << r.output;
  // Below an open directory without the sticky bit: the directory itself could be swapped.
  const std::string parent = scratch.file("parent");
  fs::create_directories(parent + "/state");
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  r = shell_run(in_state(parent + "/state", "fabric down --name tf"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(parent + " is writable by others (mode 0777)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(parent + "/state/tf.lock"));
  r = shell_run(in_state("relative/state", "fabric status"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("'relative/state' is not an absolute path"), std::string::npos) << r.output;
  // A directory still to be made under a sticky one such as /tmp is fine.
  const std::string sticky = scratch.file("sticky");
  fs::create_directories(sticky);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  r = shell_run(in_state(sticky + "/new/state", "fabric status"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no fabric is up"), std::string::npos) << r.output;
}

TEST(FabricState, ALinkPlantedAsALockOrRecordIsNeverWrittenThroughNorTrusted) {
  const ScratchDir scratch("fabric_state_links");
  const std::string state = scratch.file("state");
  fs::create_directories(state);
  const std::string precious = scratch.file("precious");
  write_file(precious, "precious\n");
  fs::create_symlink(precious, state + "/tf.lock");
  auto r = shell_run(in_state(state, "fabric down --name tf"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cannot open " + state + "/tf.lock"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(precious), "precious\n");
  // Another fabric's record under this name would make `down` end that fabric.
  write_file(scratch.file("victim.json"), record_of("victim"));
  fs::create_symlink(scratch.file("victim.json"), state + "/tg.json");
  r = shell_run(in_state(state, "fabric down --name tg"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("is corrupt (it names fabric 'victim')"), std::string::npos) << r.output;
  r = shell_run(in_state(state, "fabric status --name tg"));
  EXPECT_NE(r.output.find("it names fabric 'victim'"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(scratch.file("victim.json")), record_of("victim"));
}

// `down` kills what runs in a record's namespaces and deletes them: a record naming one that
// is not its fabric's (another fabric's, a container runtime's cni-*) is refused whole.
TEST(FabricState, ARecordListingAnotherFabricsNamespaceIsRefused) {
  const ScratchDir scratch("fabric_state_foreign_ns");
  const std::string state = scratch.file("state");
  fs::create_directories(state);
  for (const std::string ns : {"cni-1234", "tf-tgx-a", "tf-tg-", "tf-t-a"}) {
    write_file(state + "/tg.json", "{\"name\": \"tg\", \"status\": \"up\", \"topology\": {}, \"options\": {}, "
                                   "\"namespaces\": [\"tf-tg-a\", \"" + ns + "\"]}\n");
    const auto r = shell_run(in_state(state, "fabric down --name tg"));
    EXPECT_NE(r.status, 0) << ns << ": " << r.output;
    EXPECT_NE(r.output.find("is corrupt (it lists namespace '" + ns + "', not one of fabric 'tg' (tf-tg-*))"),
              std::string::npos)
        << r.output;
  }
}

// --hostfile is written by `run`, as root: a link planted at its path (in /tmp, by another
// user) is replaced, never written through to its target.
TEST(FabricState, AHostfileIsNeverWrittenThroughALinkAtItsPath) {
  const ScratchDir scratch("fabric_hostfile_link");
  const std::string precious = scratch.file("precious");
  write_file(precious, "precious\n");
  const std::string hostfile = scratch.file("hosts");
  fs::create_symlink(precious, hostfile);
  const auto r = shell_run(kCli + " fabric place --topo " + std::string(TOPOCOLL_SOURCE_DIR) +
                           "/examples/bigraph-32.json --ranks 2 --hostfile " + hostfile);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_file(precious), "precious\n") << "written through the link";
  EXPECT_FALSE(fs::is_symlink(hostfile));
  EXPECT_NE(read_file(hostfile).find("slots="), std::string::npos) << read_file(hostfile);
}

// Faults, jobs and routes act on the namespaces a fabric's plan names, `down` on those its
// record lists: a record that lists others (edited, or written by a topocoll that names
// them differently) is refused by every verb that would act on it, naming what differs.
TEST(FabricState, ARecordListingOtherNamespacesThanItsPlanIsRefused) {
  const ScratchDir scratch("fabric_state_plan");
  const std::string state = scratch.file("state");
  fs::create_directories(state);
  const auto topology = topocoll::topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/nap-4x8.json");
  topocoll::fabric::FabricOptions options;
  options.name = "np";
  const auto plan = topocoll::fabric::plan_fabric(topology, options);
  std::vector<std::string> names;
  for (const auto& ns : plan.namespaces) names.push_back(ns.name);
  ASSERT_GT(names.size(), 2u);
  auto record = [&](const std::vector<std::string>& namespaces) {
    const nlohmann::json j = {{"name", "np"}, {"status", "up"}, {"topology_file", "nap-4x8.json"},
                              {"topology", topocoll::topo::topology_to_json(topology)},
                              {"options", {{"rate_mbit", 0.0}, {"scale", 0.0}, {"mtu", 9000}, {"peak_slack_us", 0.0}}},
                              {"namespaces", namespaces}};
    write_file(state + "/np.json", j.dump(1) + "\n");
  };
  record(names);
  const auto faithful = shell_run(in_state(state, "fabric status --name np"));
  EXPECT_EQ(faithful.status, 0) << faithful.output;
  EXPECT_NE(faithful.output.find("fabric np: up since"), std::string::npos) << faithful.output;

  std::vector<std::string> edited = names;
  const std::string dropped = edited.back();
  edited.back() = "tf-np-elsewhere";
  record(edited);
  for (const std::string& verb : std::vector<std::string>{"status --name np", "cut --name np " + plan.cables.front().name,
                                                          "restore --name np", "exec --name np 0 -- true"}) {
    const auto r = shell_run(in_state(state, "fabric " + verb));
    EXPECT_NE(r.output.find("record does not list the namespaces its topology makes (1 listed but not made, "
                            "first tf-np-elsewhere; 1 made but not listed, first " + dropped + ")"),
              std::string::npos) << verb << ": " << r.output;
    if (verb.rfind("status", 0) != 0) {
      EXPECT_NE(r.status, 0) << verb << ": " << r.output;
    }
  }
}

}  // namespace


namespace {

// `fabric run`'s own flags are checked before any rank starts: a --rank0-env that is no
// NAME=VALUE was found only inside rank 0, after every rank had started (and the others
// were ended 15 s later).
TEST(FabricJobArgs, ARank0VariableThatIsNoAssignmentFailsBeforeAnyRankStarts) {
  const ScratchDir scratch("fabric_job_args");
  for (const std::string bad : {"FOO", "=x"}) {
    const auto r = shell_run(in_state(scratch.path(), "fabric run --name nofabric --ranks 2 --rank0-env " + bad + " -- true"));
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("--rank0-env '" + bad + "': expected NAME=VALUE"), std::string::npos) << r.output;
  }
}

// `fabric predict` took no --ranks as "every endpoint" while its synopsis, `fabric run` and
// `place` require the job's size.
TEST(FabricJobArgs, PredictNeedsTheJobsSize) {
  const std::string topo = " --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json";
  const auto none = shell_run(kCli + " fabric predict" + topo);
  EXPECT_NE(none.status, 0) << none.output;
  EXPECT_NE(none.output.find("fabric predict needs --ranks R (or --placement endpoints=...)"), std::string::npos)
      << none.output;
  const auto listed = shell_run(kCli + " fabric predict" + topo + " --placement endpoints=s0.g0,s1.g0 --sizes 1M:1M");
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_NE(listed.output.find("2 ranks"), std::string::npos) << listed.output;
}

// A 0 rate or scale meant "the default" in `fabric predict` while `fabric up` refuses it;
// an endpoint named twice to `accept` was run and reported as the cluster's duplicate.
TEST(FabricJobArgs, PredictRefusesAZeroRateAndAcceptAnEndpointNamedTwice) {
  for (const std::string flag : {"--rate-mbit", "--scale"}) {
    const auto r = shell_run(kCli + " fabric predict --topo " TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json --ranks 4 " + flag + " 0");
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(flag + " \"0\": expected a number above 0"), std::string::npos) << r.output;
  }
  const auto r = shell_run(kCli + " accept --topo " TOPOCOLL_SOURCE_DIR
                           "/examples/bigraph-32.json --endpoints s0.g0,s0.g0 --rank 0 --ranks 2 --bootstrap 127.0.0.1:1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--endpoints: 's0.g0' is named twice"), std::string::npos) << r.output;
  // --lane-marks reads as TOPOCOLL_NET_LANE_MARKS does (0x hex too, at most 16).
  const auto marks = shell_run(kCli + " accept --topo " TOPOCOLL_SOURCE_DIR
                               "/examples/bigraph-32.json --lane-marks 0x100,abc --rank 0 --ranks 2 --bootstrap 127.0.0.1:1");
  EXPECT_NE(marks.status, 0) << marks.output;
  EXPECT_NE(marks.output.find("--lane-marks \"0x100,abc\": expected a list of 1 to 16 non-zero socket marks"),
            std::string::npos)
      << marks.output;
}

// A flag the verb does not read is an error, not ignored (`cut A-B --rate-mbit 5` cut the
// cable and said nothing of the rate). Checked before any fabric is looked up.
TEST(FabricJobArgs, AFlagTheVerbDoesNotReadIsAnError) {
  const ScratchDir scratch("fabric_verb_flags");
  for (const auto& [verb, flag] : std::vector<std::pair<std::string, std::string>>{
           {"cut A-B", "--rate-mbit 5"}, {"down", "--scale 0.5"}, {"status", "--mtu 1500"},
           {"route 0 1", "--force"}, {"exec 0", "--json"}}) {
    const auto r = shell_run(in_state(scratch.path(), "fabric " + verb + " --name nofabric " + flag + " -- true"));
    EXPECT_NE(r.status, 0) << verb << ": " << r.output;
    const std::string verb_word = verb.substr(0, verb.find(' '));
    EXPECT_NE(r.output.find(verb_word + " does not take " + flag.substr(0, flag.find(' '))), std::string::npos)
        << verb << ": " << r.output;
  }
}

}  // namespace
