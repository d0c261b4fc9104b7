// The emulated fabric for real (ctest label `fabric`; root with network namespaces, as CI
// is): bigraph-32 and a NAP package come up at a low rate and bench runs verified collectives
// on them, reporting the link loads the model gives (their times are measured in perf/, never
// checked here).
// Also: two fabrics coexist, `down` removes exactly what `up` made (after a crash too),
// faults reach the kernel and a cut cable fails a run instead of hanging it, and refusals
// (not root, too large, a failing tool) leave nothing behind. Where namespaces cannot be
// made every test skips, saying why.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fabric/fabric_lock.h"
#include "fabric/fabric_plan.h"
#include "fabric/fabric_record.h"
#include "fabric/live_fabric.h"
#include "net/network_namespace.h"
#include "tests/common/fabric_fixture.h"
#include "tests/common/scratch_dir.h"
#include "topo/topology_json.h"

namespace topocoll::fabric {
namespace {

using testing_support::shell_run;
namespace fs = std::filesystem;

using testing_support::FabricUp;
using testing_support::kCli;
using testing_support::kExamples;
using testing_support::ScratchDir;

std::set<std::string> namespaces_now() {
  std::set<std::string> out;
  for (const auto& n : net::netns_with_prefix("")) out.insert(n);
  return out;
}

nlohmann::json bench(const std::string& args, std::string* output) {
  const ScratchDir scratch("fabric_live_bench");
  const std::string json = scratch.file("rows.json");
  const auto r = shell_run(kCli + " bench " + args + " --json " + json);
  *output = r.output;
  if (r.status != 0) return nullptr;
  std::ifstream in(json);
  return in ? nlohmann::json::parse(in) : nullptr;
}

// Both rings run correctly on the fabric and bench reports the link loads the model
// predicts for them. How much longer the load-4 ring takes is a measurement, not a test
// (perf/results/fabric-calibration-*, topocoll demo).
TEST(FabricLive, BiGraphRingInRankOrderLoadsALinkFourTimesTheTopologyOrderedRing) {
  REQUIRE_FABRIC();
  FabricUp f("tlbg", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  std::string out;
  // Rank order on s0..s7 (switches U0 and L0 alternating): four flows on U0->L0 and four on
  // L0->U0 every step. The topology-aware ring over one endpoint per switch: one flow per
  // link. Same ranks, same bytes, same steps.
  const auto crowded = bench("--fabric tlbg --endpoints s0.g0,s1.g0,s2.g0,s3.g0,s4.g0,s5.g0,s6.g0,s7.g0"
                             " --algos ring --sizes 256K --iters 2 --warmup 1", &out);
  ASSERT_FALSE(crowded.is_null()) << out;
  const auto spread = bench("--fabric tlbg --endpoints s0.g0,s1.g0,s8.g0,s9.g0,s16.g0,s17.g0,s24.g0,s25.g0"
                            " --algos ring-topo --sizes 256K --iters 2 --warmup 1", &out);
  ASSERT_FALSE(spread.is_null()) << out;
  ASSERT_EQ(crowded.size(), 1u);
  ASSERT_EQ(spread.size(), 1u);
  EXPECT_EQ(crowded[0]["wrong"], 0);
  EXPECT_EQ(spread[0]["wrong"], 0);
  EXPECT_DOUBLE_EQ(crowded[0]["max_link_load"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(spread[0]["max_link_load"].get<double>(), 1.0);
  std::printf("measured (not checked): load 4 %.0f us, load 1 %.0f us\n", crowded[0]["time_us"].get<double>(),
              spread[0]["time_us"].get<double>());
}

TEST(FabricLive, NapPackageRunsFcAndFcDirectCorrectly) {
  REQUIRE_FABRIC();
  FabricUp f("tlnap", "nap-4x8.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  std::string out;
  // The first 8 endpoints are package 0: every flow stripes over the 4 local switches.
  const auto rows = bench("--fabric tlnap --ranks 8 --algos fc,fc-direct --sizes 64K,256K"
                          " --iters 2 --warmup 1", &out);
  ASSERT_FALSE(rows.is_null()) << out;
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    EXPECT_EQ(r["wrong"], 0) << r.dump();
    EXPECT_GT(r["predicted_us"].get<double>(), 0);
  }
  EXPECT_NE(out.find("marks=256,257,258,259"), std::string::npos) << out;
}

TEST(FabricLive, TwoFabricsCoexistAndDownRemovesExactlyWhatUpMade) {
  REQUIRE_FABRIC();
  const auto before = namespaces_now();
  std::set<std::string> with_first;
  {
    FabricUp a("tla", "bigraph-32.json", "10");
    ASSERT_TRUE(a.ok()) << a.output();
    with_first = namespaces_now();
    EXPECT_EQ(with_first.size(), before.size() + 41);
    {
      FabricUp b("tlb", "nap-4x8.json", "10");
      ASSERT_TRUE(b.ok()) << b.output();
      const auto both = namespaces_now();
      EXPECT_EQ(both.size(), before.size() + 41 + 49);
      const auto status = shell_run(kCli + " fabric status --json");
      ASSERT_EQ(status.status, 0) << status.output;
      const auto j = nlohmann::json::parse(status.output);
      std::set<std::string> names;
      for (const auto& x : j) names.insert(x["name"].get<std::string>());
      EXPECT_TRUE(names.count("tla") && names.count("tlb")) << status.output;
      // The same name twice is refused, naming the way out.
      const auto again = shell_run(kCli + " fabric up " + kExamples + "nap-4x8.json --name tlb");
      EXPECT_NE(again.status, 0);
      EXPECT_NE(again.output.find("already up"), std::string::npos) << again.output;
    }
    EXPECT_EQ(namespaces_now(), with_first);
  }
  EXPECT_EQ(namespaces_now(), before);
  EXPECT_FALSE(fs::exists(fabric_record_path("tla")));
}

TEST(FabricLive, DownCleansUpAfterACrashedUpAndItsProcesses) {
  REQUIRE_FABRIC();
  const auto before = namespaces_now();
  // What a crash in the middle of `up` leaves: a record still "building", some namespaces,
  // a process inside one of them.
  FabricRecord r;
  r.name = "tlcrash";
  r.status = "building";
  r.topology = topo::topology_to_json(topo::load_topology_file(kExamples + "bigraph-32.json"));
  r.namespaces = {"tf-tlcrash-s0", "tf-tlcrash-U0", "tf-tlcrash-never-made"};
  save_record(r);
  ASSERT_EQ(shell_run("ip netns add tf-tlcrash-s0 && ip netns add tf-tlcrash-U0 && ip netns add tf-tlcrash-extra").status, 0);
  const ScratchDir scratch("fabric_crash");
  const std::string pid_file = scratch.file("pid");
  ASSERT_EQ(shell_run("ip netns exec tf-tlcrash-s0 sh -c 'echo $$ > " + pid_file +
                      "; exec sleep 600' >/dev/null 2>&1 &").status, 0);
  std::string pid;
  for (int i = 0; i < 100 && pid.empty(); ++i) {
    std::ifstream in(pid_file);
    in >> pid;
    if (pid.empty()) usleep(20000);
  }
  ASSERT_FALSE(pid.empty());
  const auto status = shell_run(kCli + " fabric status --name tlcrash");
  EXPECT_NE(status.output.find("incomplete"), std::string::npos) << status.output;
  // What the record lists goes; a namespace only named like the fabric's stays without --force.
  const auto down = shell_run(kCli + " fabric down --name tlcrash");
  EXPECT_EQ(down.status, 0) << down.output;
  EXPECT_NE(down.output.find("2 namespaces removed"), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("left alone: tf-tlcrash-extra"), std::string::npos) << down.output;
  EXPECT_TRUE(net::netns_exists("tf-tlcrash-extra"));
  const auto forced = shell_run(kCli + " fabric down --name tlcrash --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(forced.output.find("1 namespaces removed"), std::string::npos) << forced.output;
  EXPECT_EQ(namespaces_now(), before);
  auto running = [&] {  // gone, or a zombie waiting for init to reap it
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string id, name, state;
    return stat >> id >> name >> state && state != "Z";
  };
  for (int i = 0; i < 50 && running(); ++i) usleep(20000);
  EXPECT_FALSE(running()) << "the process inside was left running";
  const auto nothing = shell_run(kCli + " fabric down --name tlcrash");
  EXPECT_NE(nothing.status, 0);
  EXPECT_NE(nothing.output.find("no fabric named tlcrash"), std::string::npos) << nothing.output;
}

std::set<std::string> root_namespace_links() {
  std::set<std::string> out;
  std::istringstream in(shell_run("ip -o link show").output);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(": ");
    if (colon != std::string::npos) out.insert(line.substr(colon + 2, line.find(':', colon + 2) - colon - 2));
  }
  return out;
}

// NICs named as `ip` keywords (alias, help, name, netns, dev, up) and
// as the kernel's own /proc/sys entries (all, default). The fabric comes up with them inside
// its namespaces, nothing appears in the machine's own namespace, and traffic crosses them.
TEST(FabricLive, NicsNamedAsIpKeywordsComeUpInsideTheFabricOnly) {
  REQUIRE_FABRIC();
  const auto links_before = root_namespace_links();
  FabricUp f("tlkw", "../tests/data/fabric/keyword_names.json", "10");
  EXPECT_EQ(root_namespace_links(), links_before) << "a link was made in the machine's own namespace";
  ASSERT_TRUE(f.ok()) << f.output();
  for (const char* nic : {"alias", "help", "name", "netns"})
    EXPECT_EQ(shell_run(std::string("ip -n tf-tlkw-help link show dev ") + nic).status, 0) << nic;
  for (const char* nic : {"dev", "up"})
    EXPECT_EQ(shell_run(std::string("ip -n tf-tlkw-h1 link show dev ") + nic).status, 0) << nic;
  std::string out;
  const auto rows = bench("--fabric tlkw --endpoints help.g0,h1.g1,help.g3,h1.g0 --algos ring --sizes 16K"
                          " --iters 1 --warmup 0", &out);
  ASSERT_FALSE(rows.is_null()) << out;
  EXPECT_EQ(rows[0]["wrong"], 0);
}

// Ends a process and removes a namespace made by a test, whatever happened in between.
struct MadeByTheTest {
  std::vector<std::string> namespaces;
  std::string pid;
  ~MadeByTheTest() {
    if (!pid.empty()) ::kill(pid_t(std::stol(pid)), SIGKILL);
    for (const auto& n : namespaces)
      if (net::netns_exists(n)) shell_run("ip netns del " + n);
  }
};

bool process_running(const std::string& pid) {  // gone, or a zombie waiting for init to reap it
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string id, name, state;
  return stat >> id >> name >> state && state != "Z";
}

// Starts `sleep 600` inside namespace `ns` (someone else's work); returns its pid.
std::string start_sleeper_in(const std::string& ns) {
  const ScratchDir scratch("fabric_sleeper_" + ns);
  const std::string pid_file = scratch.file("pid");
  shell_run("ip netns exec " + ns + " sh -c 'echo $$ > " + pid_file + "; exec sleep 600' >/dev/null 2>&1 &");
  std::string pid;
  for (int i = 0; i < 100 && pid.empty(); ++i) {
    std::ifstream in(pid_file);
    in >> pid;
    if (pid.empty()) usleep(20000);
  }
  return pid;
}

// `down` deleted a namespace it never made (matched by prefix) and
// killed the process inside; `up` said "already up" where `status` said no fabric was up.
// Now: `status` names unrecorded namespaces, `up` builds beside them (refusing only one it
// would make itself), `down` removes what its record lists, and only --force the rest.
TEST(FabricLive, DownTouchesOnlyWhatItsRecordListsUnlessForced) {
  REQUIRE_FABRIC();
  const auto before = namespaces_now();
  MadeByTheTest theirs;
  shell_run(kCli + " fabric down --force --name tlmine");  // an earlier crash's leftovers
  theirs.namespaces = {"tf-tlmine-mine", "tf-tlmine-s0"};
  ASSERT_EQ(shell_run("ip netns add tf-tlmine-mine").status, 0);
  theirs.pid = start_sleeper_in("tf-tlmine-mine");
  ASSERT_FALSE(theirs.pid.empty());

  const auto status = shell_run(kCli + " fabric status --name tlmine");
  EXPECT_NE(status.output.find("no fabric named tlmine is up"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("tf-tlmine-mine"), std::string::npos) << status.output;
  const auto refused = shell_run(kCli + " fabric down --name tlmine");
  EXPECT_NE(refused.status, 0) << refused.output;
  EXPECT_NE(refused.output.find("--force"), std::string::npos) << refused.output;
  EXPECT_TRUE(net::netns_exists("tf-tlmine-mine"));
  EXPECT_TRUE(process_running(theirs.pid)) << "down killed a process in a namespace it never made";

  // Not "already up": nothing of its own exists. (Not the FabricUp fixture: it clears the
  // test's name with --force first.)
  const auto made = shell_run(kCli + " fabric up " + kExamples + "bigraph-32.json --name tlmine --rate-mbit 10");
  ASSERT_EQ(made.status, 0) << made.output;
  const auto down = shell_run(kCli + " fabric down --name tlmine");
  EXPECT_EQ(down.status, 0) << down.output;
  EXPECT_NE(down.output.find("41 namespaces removed"), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("left alone: tf-tlmine-mine"), std::string::npos) << down.output;
  EXPECT_TRUE(net::netns_exists("tf-tlmine-mine"));
  EXPECT_TRUE(process_running(theirs.pid));

  // A namespace `up` would make itself, there already: refused, and status says the same.
  ASSERT_EQ(shell_run("ip netns add tf-tlmine-s0").status, 0);
  const auto up = shell_run(kCli + " fabric up " + kExamples + "bigraph-32.json --name tlmine");
  EXPECT_NE(up.status, 0);
  EXPECT_NE(up.output.find("namespace tf-tlmine-s0 exists already"), std::string::npos) << up.output;
  EXPECT_NE(up.output.find("--force"), std::string::npos) << up.output;
  const auto still = shell_run(kCli + " fabric status");
  EXPECT_NE(still.output.find("tf-tlmine-s0"), std::string::npos) << still.output;

  const auto forced = shell_run(kCli + " fabric down --name tlmine --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(forced.output.find("2 namespaces removed"), std::string::npos) << forced.output;
  for (int i = 0; i < 50 && process_running(theirs.pid); ++i) usleep(20000);
  EXPECT_FALSE(process_running(theirs.pid)) << "--force ends the processes inside";
  EXPECT_EQ(namespaces_now(), before);
}

// The loser of two `up`s of one name said "cannot create network
// namespaces here (... File exists)". While one runs (its lock held here), another is told so
// and makes nothing.
TEST(FabricLive, AnUpWhileAnotherUpOfTheNameRunsSaysSo) {
  REQUIRE_FABRIC();
  const auto before = namespaces_now();
  {
    const FabricLock running("tllock", "up");
    const auto second = shell_run(kCli + " fabric up " + kExamples + "bigraph-32.json --name tllock");
    EXPECT_NE(second.status, 0);
    EXPECT_NE(second.output.find("another `fabric up` of this name is running (pid " + std::to_string(::getpid()) + ")"),
              std::string::npos)
        << second.output;
    const auto down = shell_run(kCli + " fabric down --name tllock");
    EXPECT_NE(down.output.find("another `fabric up` of this name is running"), std::string::npos) << down.output;
  }
  EXPECT_EQ(namespaces_now(), before);
  EXPECT_FALSE(fs::exists(fabric_record_path("tllock")));
}

TEST(FabricLive, RefusalsSayWhyAndLeaveNothing) {
  REQUIRE_FABRIC();
  const auto before = namespaces_now();
  const std::string up = " fabric up " + kExamples + "bigraph-32.json --name tlref";
  // Not root.
  if (shell_run("command -v setpriv").status == 0) {
    const auto r = shell_run("setpriv --reuid=65534 --regid=65534 --clear-groups " + kCli + up);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("needs root"), std::string::npos) << r.output;
  }
  // Too large for what the machine may give it.
  const auto big = shell_run("TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB=1 " + kCli + up);
  EXPECT_NE(big.status, 0);
  EXPECT_NE(big.output.find("needs about"), std::string::npos) << big.output;
  EXPECT_NE(big.output.find("41 namespaces"), std::string::npos) << big.output;
  // A tool failing halfway (tc refuses the shapers after the namespaces exist).
  const ScratchDir bin_dir("fabric_fakebin");
  const std::string bin = bin_dir.path();
  {
    std::ofstream tc(bin + "/tc");
    tc << "#!/bin/sh\ncase \" $* \" in *\" -batch \"*) echo 'RTNETLINK answers: injected failure' >&2; exit 2;; esac\n"
          "exec /usr/sbin/tc \"$@\" 2>/dev/null || exec /sbin/tc \"$@\"\n";
  }
  fs::permissions(bin + "/tc", fs::perms::owner_all);
  const auto half = shell_run("PATH=" + bin + ":$PATH " + kCli + up);
  EXPECT_NE(half.status, 0);
  EXPECT_NE(half.output.find("injected failure"), std::string::npos) << half.output;
  EXPECT_EQ(namespaces_now(), before);
  EXPECT_FALSE(fs::exists(fabric_record_path("tlref")));
  // Bad options.
  const auto name = shell_run(kCli + " fabric up " + kExamples + "bigraph-32.json --name Bad-Name");
  EXPECT_NE(name.output.find("--name 'Bad-Name'"), std::string::npos) << name.output;
}

TEST(FabricLive, FaultsReachTheKernelAndACutCableFailsARunWithoutHanging) {
  REQUIRE_FABRIC();
  FabricUp f("tlfault", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  auto qdisc = [](const std::string& ns, const std::string& dev) {
    return shell_run("tc -n " + ns + " qdisc show dev " + dev).output;
  };
  EXPECT_NE(qdisc("tf-tlfault-U0", "L1").find("rate 10Mbit"), std::string::npos);
  ASSERT_EQ(shell_run(kCli + " fabric degrade --name tlfault 'U0->L1' --rate-mbit 2.5").status, 0);
  EXPECT_NE(qdisc("tf-tlfault-U0", "L1").find("rate 2500Kbit"), std::string::npos) << qdisc("tf-tlfault-U0", "L1");
  EXPECT_NE(qdisc("tf-tlfault-L1", "U0").find("rate 10Mbit"), std::string::npos);  // one direction only
  // The prediction follows the degraded rate.
  std::string out;
  const auto slow = bench("--fabric tlfault --endpoints s0.g0,s9.g0 --algos ring --sizes 64K --iters 2 --warmup 0", &out);
  ASSERT_FALSE(slow.is_null()) << out;
  EXPECT_NE(out.find("2 ranks"), std::string::npos);

  ASSERT_EQ(shell_run(kCli + " fabric cut --name tlfault s9.g0-L1").status, 0);
  EXPECT_NE(qdisc("tf-tlfault-s9", "nic0").find("limit 0p"), std::string::npos)
      << qdisc("tf-tlfault-s9", "nic0");
  EXPECT_NE(qdisc("tf-tlfault-L1", "s9.g0").find("limit 0p"), std::string::npos);
  // A shaper in place of the cut would carry traffic again: refused, as is a second cut.
  const auto degrade_cut = shell_run(kCli + " fabric degrade --name tlfault L1-s9.g0 --rate-mbit 5");
  EXPECT_NE(degrade_cut.status, 0);
  EXPECT_NE(degrade_cut.output.find("cable s9.g0-L1 is cut: `topocoll fabric restore s9.g0-L1` first"),
            std::string::npos) << degrade_cut.output;
  EXPECT_NE(shell_run(kCli + " fabric degrade --name tlfault 's9.g0->L1' --rate-mbit 5").status, 0);
  const auto cut_again = shell_run(kCli + " fabric cut --name tlfault s9.g0-L1");
  EXPECT_NE(cut_again.output.find("cable s9.g0-L1 is cut already"), std::string::npos) << cut_again.output;
  EXPECT_NE(qdisc("tf-tlfault-s9", "nic0").find("limit 0p"), std::string::npos);
  {
    // Faults take the fabric's lock: none while another command changes it.
    const FabricLock held("tlfault", "test");
    const auto locked = shell_run(kCli + " fabric restore --name tlfault s9.g0-L1");
    EXPECT_NE(locked.status, 0);
    EXPECT_NE(locked.output.find("another `fabric test` of this name is running"), std::string::npos)
        << locked.output;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto cut = shell_run("TOPOCOLL_NET_TIMEOUT_MS=3000 " + kCli +
                             " bench --fabric tlfault --endpoints s0.g0,s9.g0 --algos ring --sizes 64K --iters 1 --warmup 0");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(cut.status, 0) << cut.output;
  EXPECT_LT(seconds, 40) << "a run over a cut cable must fail, not hang\n" << cut.output;

  const auto status = shell_run(kCli + " fabric status --name tlfault");
  EXPECT_NE(status.output.find("fault: degrade U0->L1 to 2.50 Mbit/s"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("fault: cut s9.g0-L1"), std::string::npos) << status.output;
  ASSERT_EQ(shell_run(kCli + " fabric restore --name tlfault").status, 0);
  EXPECT_NE(qdisc("tf-tlfault-U0", "L1").find("rate 10Mbit"), std::string::npos);
  EXPECT_NE(qdisc("tf-tlfault-s9", "nic0").find("rate 10Mbit"), std::string::npos);
  const auto healed = bench("--fabric tlfault --endpoints s0.g0,s9.g0 --algos ring --sizes 64K --iters 1 --warmup 0", &out);
  EXPECT_FALSE(healed.is_null()) << out;
}

// The peak bucket's slack (fabric_script.h) reaches every shaper, survives a degrade and a
// restore, and a record written before the slack existed reads as what it built: one frame.
TEST(FabricLive, ThePeakSlackReachesTheShapersAndOutlivesFaults) {
  REQUIRE_FABRIC();
  FabricUp f("tlpeak", "bigraph-32.json", "10", "--peak-slack-us 1000");
  ASSERT_TRUE(f.ok()) << f.output();
  auto qdisc = [] { return shell_run("tc -n tf-tlpeak-U0 qdisc show dev L1").output; };
  auto minburst = [](const std::string& line) {  // tc prints it rounded to its cell size
    const auto at = line.find("minburst ");
    return at == std::string::npos ? 0L : std::atol(line.c_str() + at + 9);
  };
  const std::string shaped = qdisc();
  // One frame (9064) and 1 ms of 10.1 Mbit/s (1263 bytes).
  EXPECT_NEAR(minburst(shaped), 9064 + 1263, 150) << shaped;
  auto status = [] { return nlohmann::json::parse(shell_run(kCli + " fabric status --name tlpeak --json").output); };
  EXPECT_EQ(status()[0]["peak_slack_us"], 1000.0);
  ASSERT_EQ(shell_run(kCli + " fabric degrade --name tlpeak 'U0->L1' --rate-mbit 5").status, 0);
  EXPECT_NEAR(minburst(qdisc()), 9064 + 631, 150) << qdisc();
  ASSERT_EQ(shell_run(kCli + " fabric restore --name tlpeak").status, 0);
  EXPECT_EQ(qdisc(), shaped);

  const std::string record = fabric_record_path("tlpeak");
  std::ifstream in(record);
  nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["options"]["peak_slack_us"], 1000.0);
  j["options"].erase("peak_slack_us");
  std::ofstream(record) << j.dump();
  EXPECT_EQ(status()[0]["peak_slack_us"], 0.0);
  ASSERT_EQ(shell_run(kCli + " fabric degrade --name tlpeak 'U0->L1' --rate-mbit 10").status, 0);
  EXPECT_NEAR(minburst(qdisc()), 9064, 150) << qdisc();
}

// perf/fabric/cable_check.py, which the GPU record runs after every `fabric up`, measures a
// flow across its route's cables and names what it cannot measure (its figure is a
// measurement, never checked here).
TEST(FabricLive, TheCableCheckMeasuresAFlowAndNamesABadEndpoint) {
  REQUIRE_FABRIC();
  FabricUp f("tlcheck", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  const ScratchDir scratch("fabric_cable_check");
  const std::string script = "python3 " + std::string(TOPOCOLL_SOURCE_DIR) + "/perf/fabric/cable_check.py --cli " +
                             kCli + " --name tlcheck --seconds 0.5";
  const auto r = shell_run(script + " --to s16.g0 --json " + scratch.file("check.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(scratch.file("check.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["from"], "s0.g0");
  EXPECT_EQ(j["route"], "s0.g0->U0  U0->L2  L2->U2  U2->s16.g0");
  EXPECT_EQ(j["cables"], 4);
  EXPECT_EQ(j["cable_mbit"], 20.0);
  EXPECT_GT(j["goodput_mbit"].get<double>(), 0);
  const auto bad = shell_run(script + " --to s99.g0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("no endpoint 's99.g0' in fabric tlcheck"), std::string::npos) << bad.output;
  const auto down = shell_run("python3 " + std::string(TOPOCOLL_SOURCE_DIR) + "/perf/fabric/cable_check.py --cli " +
                              kCli + " --name tlnone");
  EXPECT_NE(down.status, 0);
  EXPECT_NE(down.output.find("fabric tlnone is not up"), std::string::npos) << down.output;
}

TEST(FabricLive, SwappedCablesStillCarryTrafficTheWrongWay) {
  REQUIRE_FABRIC();
  FabricUp f("tlswap", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  // U0's ports to L0 and L1 exchange their far ends: traffic still arrives, detouring
  // through the other lower switch and a second upper one.
  ASSERT_EQ(shell_run(kCli + " fabric swap --name tlswap U0-L0 U0-L1").status, 0);
  std::string out;
  const auto rows = bench("--fabric tlswap --endpoints s0.g0,s1.g0,s8.g0,s9.g0 --algos ring --sizes 64K --iters 1 --warmup 0", &out);
  ASSERT_FALSE(rows.is_null()) << out;
  EXPECT_EQ(rows[0]["wrong"], 0);
  const auto u1 = shell_run("tc -s -n tf-tlswap-U1 qdisc show dev L0").output;  // the detour
  EXPECT_EQ(u1.find("Sent 0 bytes"), std::string::npos) << u1;
  ASSERT_EQ(shell_run(kCli + " fabric restore --name tlswap U0-L1").status, 0);
  EXPECT_EQ(shell_run("ip -n tf-tlswap-U0 neigh show nud permanent").output, "");
}

TEST(FabricLive, ExecRunsInTheEndpointsNamespaceUnderItsHostsName) {
  REQUIRE_FABRIC();
  FabricUp f("tlexec", "bigraph-32.json", "10");
  ASSERT_TRUE(f.ok()) << f.output();
  const auto who = shell_run(kCli + " fabric exec --name tlexec s9.g0 -- sh -c 'hostname; echo $TOPOCOLL_FABRIC_ADDRESS; ip -o -4 addr show nic0'");
  ASSERT_EQ(who.status, 0) << who.output;
  std::istringstream lines(who.output);
  std::string host, address;
  std::getline(lines, host);
  std::getline(lines, address);
  EXPECT_EQ(host, "s9");  // the host name, not the machine's
  ASSERT_FALSE(address.empty()) << who.output;
  EXPECT_NE(who.output.find("inet " + address + "/"), std::string::npos) << who.output;  // its NIC
  EXPECT_NE(shell_run("hostname").output, "s9\n");  // the machine's own name stays
}

}  // namespace
}  // namespace topocoll::fabric
