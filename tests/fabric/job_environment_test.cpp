// What each rank of a job on a fabric is told (fabric/job_environment.h), from the plan
// alone: its namespace and host name, NCCL's host and interface, the topology, the plugin
// faces, the launcher variables — kept where the launcher set them, else the job's.
#include <gtest/gtest.h>

#include <map>

#include "fabric/fabric_plan.h"
#include "fabric/job_environment.h"
#include "fabric/loopback_relay.h"
#include "topo/topology_json.h"

namespace topocoll::fabric {
namespace {

FabricPlan plan_of(const std::string& name, const std::string& fabric = "jt") {
  FabricOptions o;
  o.name = fabric;
  return plan_fabric(topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/" + name), o);
}

std::map<std::string, std::string> as_map(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> out;
  for (const auto& kv : kvs) out[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  return out;
}

InheritedEnvironment nothing() {
  return [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
}

InheritedEnvironment from(std::map<std::string, std::string> values) {
  return [values](std::string_view name) -> std::optional<std::string> {
    const auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(JobEnvironment, ARankIsItsEndpointsHostWithNcclOnItsAddress) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  o.topology_file = "/run/topocoll/fabric/jt.d/topology.json";
  const RankSetting s = rank_setting(plan, "jt", {5, 9, 2}, 1, o, nothing());
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.nranks, 3);
  EXPECT_EQ(s.endpoint, 9);
  EXPECT_EQ(s.netns, "tf-jt-s9");
  EXPECT_EQ(s.hostname, "s9");
  const auto env = as_map(s.environment);
  EXPECT_EQ(env.at("NCCL_HOSTID"), "s9");
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "=nic0");  // exactly: no nic01 besides it
  EXPECT_EQ(env.at("TOPOCOLL_TOPO_FILE"), o.topology_file);
  EXPECT_EQ(env.at("TOPOCOLL_FABRIC"), "jt");
  EXPECT_EQ(env.at("TOPOCOLL_FABRIC_ENDPOINT"), "s9.g0");
  EXPECT_EQ(env.at("TOPOCOLL_FABRIC_ADDRESS"), plan.endpoints[9].address);
  EXPECT_EQ(env.at("TOPOCOLL_NET_PLANE_ADDRS"), "nic0=" + plan.endpoints[9].address);
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "3");
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "1");
  // The rendezvous: rank 0's host (s5) on the management network.
  EXPECT_EQ(env.at("MASTER_ADDR"), plan.ns_of(plan.endpoints[5]).management_address.substr(
                                       0, plan.ns_of(plan.endpoints[5]).management_address.find('/')));
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_FALSE(env.count("LD_PRELOAD"));
  EXPECT_FALSE(env.count("NCCL_TUNER_PLUGIN"));
  EXPECT_FALSE(env.count("NCCL_NET_PLUGIN"));
  EXPECT_FALSE(env.count("TOPOCOLL_NET_LANE_MARKS"));  // BiGraph routes do not stripe
  EXPECT_EQ(s.unset, (std::vector<std::string>{"TOPOCOLL_BOOTSTRAP", "TOPOCOLL_BOOTSTRAP_SERVED"}));
}

TEST(JobEnvironment, TheLaunchersOwnVariablesAreKept) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  o.preload = "/opt/lib/libnccl-topocoll.so";
  o.tuner_plugin = "/opt/lib/libnccl-topocoll.so";
  o.net_plugin = "topocoll";
  const auto s = rank_setting(plan, "jt", {0, 1, 2, 3}, 2, o,
                              from({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.9.9.9"},
                                    {"MASTER_PORT", "1234"}, {"LD_PRELOAD", "libother.so"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  const auto env = as_map(s.environment);
  EXPECT_FALSE(env.count("RANK"));  // torchrun's or mpirun's, unchanged
  EXPECT_FALSE(env.count("WORLD_SIZE"));
  EXPECT_FALSE(env.count("MASTER_ADDR"));
  EXPECT_FALSE(env.count("MASTER_PORT"));
  EXPECT_EQ(env.at("LD_PRELOAD"), "/opt/lib/libnccl-topocoll.so:libother.so");
  EXPECT_EQ(env.at("NCCL_TUNER_PLUGIN"), "/opt/lib/libnccl-topocoll.so");
  EXPECT_EQ(env.at("NCCL_NET_PLUGIN"), "topocoll");
  // Each rank alone on its emulated host: its local rank there, whatever mpirun counted.
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_LOCAL_SIZE"), "1");
}

// NCCL takes the tuner from the net plugin's library when NCCL_TUNER_PLUGIN is unset (NCCL
// 2.28, src/plugin/tuner.cc): --net-plugin alone turns the tuner off explicitly, unless the
// job sets NCCL_TUNER_PLUGIN itself or --tuner names one.
TEST(JobEnvironment, TheNetPluginAloneDoesNotBringItsTuner) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  o.net_plugin = "topocoll";
  EXPECT_EQ(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, nothing()).environment).at("NCCL_TUNER_PLUGIN"), "none");
  EXPECT_FALSE(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, from({{"NCCL_TUNER_PLUGIN", "mine"}})).environment)
                   .count("NCCL_TUNER_PLUGIN"));
  o.tuner_plugin = "topocoll";
  EXPECT_EQ(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, nothing()).environment).at("NCCL_TUNER_PLUGIN"), "topocoll");
}

// The tuner learns only rank and node counts from NCCL: every rank is told the job's hosts in
// rank order, so a job on part of the fabric is tuned too (plugin/tuner/communicator_fit.h),
// but only where the ranks go host by host, the numbering the tuner assumes; numbered
// otherwise, the tuner is off for the job, even where it spans the whole fabric.
TEST(JobEnvironment, TheTunerIsToldTheJobsHostsInRankOrder) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  const auto env_of = [](const FabricPlan& p, const std::vector<int>& endpoints, const InheritedEnvironment& inherited) {
    return as_map(rank_setting(p, "jt", endpoints, 0, {}, inherited).environment);
  };
  auto env = env_of(plan, {5, 9, 2}, nothing());
  EXPECT_EQ(env.at("TOPOCOLL_TUNER_HOSTS"), "s5,s9,s2");
  EXPECT_EQ(env.count("TOPOCOLL_TUNER"), 0u);
  EXPECT_EQ(env_of(plan, {5, 9}, from({{"TOPOCOLL_TUNER_HOSTS", "s0,s1"}})).at("TOPOCOLL_TUNER_HOSTS"), "s5,s9")
      << "a value left in the environment by another job is replaced: the launcher knows the placement";
  const FabricPlan multi = plan_of("bigraph-16x8.json");
  // Endpoints 0-7 are s0's, 8-15 s1's.
  EXPECT_EQ(env_of(multi, {8, 9, 0, 1}, nothing()).at("TOPOCOLL_TUNER_HOSTS"), "s1,s0");
  std::vector<int> interleaved, descending;
  for (int g = 0; g < 8; ++g) interleaved.insert(interleaved.end(), {g, 8 + g});
  for (int e = 15; e >= 0; --e) descending.push_back(e);
  for (const auto& [endpoints, why] : {std::pair{interleaved, "s0's ranks interleaved with s1's: not host by host"},
                                       std::pair{descending, "GPUs in descending order"}}) {
    env = env_of(multi, endpoints, nothing());
    EXPECT_EQ(env.count("TOPOCOLL_TUNER_HOSTS"), 0u) << why;
    EXPECT_EQ(env.at("TOPOCOLL_TUNER"), "0") << why << ", over every endpoint: the tuner would assume the file's order";
  }
  // Turned off where the job asked for the tuner: the job is told, once (rank 0 prints it).
  JobOptions with_tuner;
  with_tuner.tuner_plugin = "/opt/libnccl-topocoll.so";
  const RankSetting off = rank_setting(multi, "jt", descending, 0, with_tuner, nothing());
  ASSERT_EQ(off.notes.size(), 1u);
  EXPECT_NE(off.notes[0].find("tuner (/opt/libnccl-topocoll.so) is turned off"), std::string::npos) << off.notes[0];
  EXPECT_TRUE(rank_setting(multi, "jt", descending, 0, {}, nothing()).notes.empty()) << "no tuner asked for";
  EXPECT_TRUE(rank_setting(multi, "jt", {8, 9, 0, 1}, 0, with_tuner, nothing()).notes.empty()) << "host by host";
  const RankSetting inherited = rank_setting(multi, "jt", descending, 0, {}, from({{"NCCL_TUNER_PLUGIN", "/lib/t.so"}}));
  ASSERT_EQ(inherited.notes.size(), 1u) << "a tuner the launcher passed on (mpirun -x) is turned off just as well";
  EXPECT_NE(inherited.notes[0].find("tuner (/lib/t.so)"), std::string::npos) << inherited.notes[0];
  EXPECT_TRUE(rank_setting(multi, "jt", descending, 0, {}, from({{"NCCL_TUNER_PLUGIN", "none"}})).notes.empty());
}

// NCCL 2.28 unloads the net plugin with its last communicator and forgets its name
// (src/plugin/net.cc): a job that destroys every communicator and makes new ones would go on
// over NCCL's own transports without a word. --net-plugin keeps it loaded, unless the job
// says otherwise.
TEST(JobEnvironment, TheNetPluginStaysLoadedForTheWholeJob) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  EXPECT_FALSE(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, nothing()).environment).count("NCCL_NET_PLUGIN_REF_COUNT"));
  o.net_plugin = "topocoll";
  EXPECT_EQ(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, nothing()).environment).at("NCCL_NET_PLUGIN_REF_COUNT"), "1");
  EXPECT_FALSE(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, from({{"NCCL_NET_PLUGIN_REF_COUNT", "0"}})).environment)
                   .count("NCCL_NET_PLUGIN_REF_COUNT"));
}

TEST(JobEnvironment, RankZerosOwnVariablesGoToRankZeroOnly) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  o.rank0_environment = {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,TUNING"};
  EXPECT_EQ(as_map(rank_setting(plan, "jt", {0, 1}, 0, o, nothing()).environment).at("NCCL_DEBUG"), "INFO");
  EXPECT_FALSE(as_map(rank_setting(plan, "jt", {0, 1}, 1, o, nothing()).environment).count("NCCL_DEBUG"));
  o.rank0_environment = {"NCCL_DEBUG"};
  EXPECT_THROW(rank_setting(plan, "jt", {0, 1}, 0, o, nothing()), std::invalid_argument);
}

// A variable the fabric sets is replaced, not shadowed by a second entry getenv never reads.
TEST(JobEnvironment, RankZerosOwnVariablesReplaceTheFabrics) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  o.rank0_environment = {"NCCL_SOCKET_IFNAME=eth9"};
  std::vector<std::string> named;
  for (const std::string& kv : rank_setting(plan, "jt", {0, 1}, 0, o, nothing()).environment)
    if (kv.starts_with("NCCL_SOCKET_IFNAME=")) named.push_back(kv);
  EXPECT_EQ(named, std::vector<std::string>{"NCCL_SOCKET_IFNAME=eth9"});
}

// LD_PRELOAD splits at spaces and colons: such a path would preload its pieces.
TEST(JobEnvironment, APreloadPathTheLoaderWouldSplitOrResolveElsewhereIsRefused) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  JobOptions o;
  for (const char* bad : {"/opt/my libs/libnccl-topocoll.so", "/opt/a:b/libnccl-topocoll.so", "build/libnccl-topocoll.so"}) {
    o.preload = bad;
    EXPECT_THROW(rank_setting(plan, "jt", {0, 1}, 0, o, nothing()), std::invalid_argument) << bad;
  }
  for (const char* good : {"/opt/topocoll/libnccl-topocoll.so", "libnccl-topocoll.so"}) {
    o.preload = good;
    EXPECT_EQ(as_map(rank_setting(plan, "jt", {0, 1}, 0, o, nothing()).environment).at("LD_PRELOAD"), good);
  }
}

TEST(JobEnvironment, LocalRanksCountTheJobsEndpointsOnOneHost) {
  const FabricPlan plan = plan_of("bigraph-16x8.json");
  // Endpoints 3 and 1 of host s0, endpoint 8 of s1.
  const std::vector<int> job = {3, 8, 1};
  const auto first = as_map(rank_setting(plan, "jt", job, 0, {}, nothing()).environment);
  const auto third = as_map(rank_setting(plan, "jt", job, 2, {}, nothing()).environment);
  EXPECT_EQ(first.at("LOCAL_RANK"), "0");
  EXPECT_EQ(third.at("LOCAL_RANK"), "1");
  EXPECT_EQ(third.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(as_map(rank_setting(plan, "jt", job, 1, {}, nothing()).environment).at("LOCAL_WORLD_SIZE"), "1");
  // Every NIC of the host binds its own address in the net plugin.
  EXPECT_NE(first.at("TOPOCOLL_NET_PLANE_ADDRS").find(plan.endpoints[1].nic + "=" + plan.endpoints[1].address),
            std::string::npos);
  EXPECT_EQ(first.at("NCCL_SOCKET_IFNAME"), "=" + plan.endpoints[3].interface);
  EXPECT_EQ(first.at("NCCL_SOCKET_IFNAME").find_first_of(":,"), std::string::npos);
}

// NAP nodes hold their address on lo: NCCL must find it under its label, not lo's 127.0.0.1,
// and their flows stripe over the local switches by socket mark.
TEST(JobEnvironment, NapNodesNameTheirAddressByItsLabelOnLo) {
  const FabricPlan plan = plan_of("nap-4x8.json");
  const auto env = as_map(rank_setting(plan, "jt", {0, 8}, 1, {}, nothing()).environment);
  EXPECT_EQ(plan.endpoints[8].interface, "lo");
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "=lo-nic0");
  // NCCL's list syntax (misc/utils.cc parseStringList): ',' separates entries, ':' starts a
  // port; "=lo:nic0" selected lo itself, 127.0.0.1, in every rank's namespace.
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME").find_first_of(":,"), std::string::npos);
  EXPECT_EQ(env.at("TOPOCOLL_NET_LANE_MARKS"), "256,257,258,259");
}

TEST(JobEnvironment, RanksOutsideTheJobAreRefused) {
  const FabricPlan plan = plan_of("bigraph-32.json");
  EXPECT_THROW(rank_setting(plan, "jt", {0, 1}, 2, {}, nothing()), std::invalid_argument);
  EXPECT_THROW(rank_setting(plan, "jt", {0, 99}, 0, {}, nothing()), std::invalid_argument);
}

// Open MPI's ranks reach their daemon's PMIx server on loopback: those addresses are relayed.
TEST(LoopbackRelay, FindsThePmixServersLoopbackAddresses) {
  const auto found = launcher_loopback_addresses(
      {"PMIX_SERVER_URI4=1940258816.0;tcp4://127.0.0.1:55693", "PMIX_SERVER_URI3=1940258816.0;tcp4://127.0.0.1:55693",
       "PMIX_SERVER_URI2=x;tcp4://127.0.1.1:7;tcp6://[::1]:8", "PMIX_SERVER_URI21=x;tcp4://192.0.2.2:46475",
       "OMPI_MCA_orte_hnp_uri=1.0;tcp://127.0.0.1:99", "PMIX_SERVER_URI41=x;tcp4://127.0.0.1:99999"});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].to_string(), "127.0.0.1:55693");
  EXPECT_EQ(found[1].to_string(), "127.0.1.1:7");
}

}  // namespace
}  // namespace topocoll::fabric
