// Plane-aware routing of the net plugin: with a topology, a connection leaves through the
// local NIC the topology routes the peer over. On loopback every plane (NIC) binds its own
// 127.0.0.x, so the accepting side sees which plane a connection took.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "net/interface_list.h"
#include "plugin/net/plane_router.h"
#include "tests/common/scratch_dir.h"
#include "tests/plugin/net_plugin_harness.h"
#include "topo/generators.h"

namespace topocoll::testing {
namespace {

const std::string kTopology = std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/net/bigraph-planes.json";

// The last INFO line that mentions `what`.
std::string last_info_with(const std::string& what) {
  std::string found;
  for (const auto& line : logged(NCCL_LOG_INFO))
    if (line.find(what) != std::string::npos) found = line;
  return found;
}

// tests/data/net/bigraph-planes.json: s0.nic0 on U0, s0.nic1 on L0, s1.nic0 on U1,
// s1.nic1 on L1. From s0 to s1.nic0 (upper group) the direct path starts at s0.nic1
// (lower group, 3 links); via s0.nic0 it takes 4 (U0 -> L -> U1).
TEST(NetPluginPlanes, ConnectionLeavesThroughTheNicOfTheDirectInterGroupPath) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_TOPO_FILE", kTopology.c_str(), 1);
    ::setenv("TOPOCOLL_HOSTNAME", rank == 0 ? "s0" : "s1", 1);
    ::setenv("TOPOCOLL_NET_PLANE_ADDRS", rank == 0 ? "nic0=127.0.0.2,nic1=127.0.0.3" : "nic0=127.0.0.4,nic1=127.0.0.5", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess);
    int ndev = 0;
    RANK_REQUIRE(net->devices(&ndev) == ncclSuccess && ndev == 2, "%d devices, expected the 2 NICs of the host", ndev);
    ncclNetProperties_v11_t props;
    RANK_REQUIRE(net->getProperties(1, &props) == ncclSuccess);
    RANK_REQUIRE(std::strcmp(props.name, "nic1") == 0, "device 1 is %s", props.name);
    RANK_REQUIRE(props.speed == 100000, "speed %d Mb/s, topology says 100 Gb/s", props.speed);
    RANK_REQUIRE(props.latency > 1.49f && props.latency < 1.51f, "latency %f", double(props.latency));

    // Rank 1 listens on nic0 twice and nic1 once; rank 0 connects with the devices NCCL
    // would pick (its nic0, nic0, nic1).
    const int listen_dev[3] = {0, 1, 0};
    const int connect_dev[3] = {0, 0, 1};
    const char* expected_source[3] = {"127.0.0.3", "127.0.0.2", "127.0.0.3"};
    void* comms[3] = {};
    if (rank == 1) {
      void* listens[3] = {};
      for (int i = 0; i < 3; ++i) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        RANK_REQUIRE(net->listen(ctx, listen_dev[i], handle, &listens[i]) == ncclSuccess);
        RANK_REQUIRE(mesh.send(1, 0, handle, sizeof handle));
      }
      for (int i = 0; i < 3; ++i) {
        while (!comms[i]) RANK_REQUIRE(net->accept(listens[i], &comms[i], nullptr) == ncclSuccess);
        std::string line = last_info_with("accepted connection");
        RANK_REQUIRE(line.find(std::string("from ") + expected_source[i] + ":") != std::string::npos,
                     "connection %d: \"%s\", expected it from %s", i, line.c_str(), expected_source[i]);
        RANK_REQUIRE(net->closeListen(listens[i]) == ncclSuccess);
        char data[16] = {};
        size_t size = sizeof data;
        int tag = i;
        void* data_ptr = data;
        void* r = nullptr;
        RANK_REQUIRE(net->irecv(comms[i], 1, &data_ptr, &size, &tag, nullptr, nullptr, &r) == ncclSuccess && r);
        int got = 0;
        RANK_REQUIRE(wait_request(net, r, &got) == ncclSuccess && got == 6 && std::memcmp(data, "plane", 6) == 0);
        RANK_REQUIRE(net->closeRecv(comms[i]) == ncclSuccess);
      }
    } else {
      for (int i = 0; i < 3; ++i) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        RANK_REQUIRE(mesh.recv(1, 0, handle, sizeof handle));
        while (!comms[i]) RANK_REQUIRE(net->connect(ctx, connect_dev[i], handle, &comms[i], nullptr) == ncclSuccess);
        std::string line = last_info_with("leaves through");
        RANK_REQUIRE(line.find(std::string("(") + expected_source[i] + ")") != std::string::npos,
                     "connection %d: \"%s\", expected it to leave from %s", i, line.c_str(), expected_source[i]);
        void* r = nullptr;
        RANK_REQUIRE(net->isend(comms[i], (void*)"plane", 6, i, nullptr, nullptr, &r) == ncclSuccess && r);
        RANK_REQUIRE(wait_request(net, r, nullptr) == ncclSuccess);
      }
      // The rerouted connection says why: 3 links instead of 4 from NCCL's choice.
      RANK_REQUIRE(logged_contains(NCCL_LOG_INFO, "takes 3 links from nic1"), "no INFO with the route");
      RANK_REQUIRE(logged_contains(NCCL_LOG_INFO, "4 from NCCL's choice nic0"), "no INFO naming NCCL's choice");
      RANK_REQUIRE(mesh.wait_for_exit(1, 0), "peer did not finish");
      for (void* s : comms) RANK_REQUIRE(net->closeSend(s) == ncclSuccess);
    }
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    RANK_REQUIRE(logged(NCCL_LOG_WARN).empty(), "unexpected WARN: %s", logged(NCCL_LOG_WARN).front().c_str());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// The same network under another name (a file in `dir`): another fingerprint, the same hosts
// and NICs.
std::string renamed_topology(const testing_support::ScratchDir& dir) {
  std::ifstream in(kTopology);
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  const std::string name = "net-planes-2x2";
  json.replace(json.find(name), name.size(), "net-planes-renamed");
  const std::string path = dir.file("bigraph-planes-renamed.json");
  std::ofstream(path) << json;
  return path;
}

// Where the topology did not choose the plane (here the peer loaded another topology), the
// source address is not bound to NCCL's device: the kernel picks it by the route to the
// peer, as for NCCL's own socket transport. With one subnet per NIC, NCCL's device may not
// be the NIC that reaches the peer, and a packet with another NIC's address is dropped by
// strict reverse-path filters and cloud anti-spoofing.
TEST(NetPluginPlanes, WithoutTheTopologysChoiceTheKernelPicksTheSourceAddress) {
  const testing_support::ScratchDir dir("net_planes_renamed");
  const std::string other = renamed_topology(dir);
  auto results = run_ranks(2, [&other](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_TOPO_FILE", rank == 0 ? kTopology.c_str() : other.c_str(), 1);
    ::setenv("TOPOCOLL_HOSTNAME", rank == 0 ? "s0" : "s1", 1);
    ::setenv("TOPOCOLL_NET_PLANE_ADDRS", rank == 0 ? "nic0=127.0.0.2,nic1=127.0.0.3" : "nic0=127.0.0.4,nic1=127.0.0.5", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    if (rank == 1) {
      void* listen = nullptr;
      void* recv = nullptr;
      RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
      RANK_REQUIRE(mesh.send(1, 0, handle, sizeof handle));
      while (!recv) RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess);
      const std::string line = last_info_with("accepted connection");
      RANK_REQUIRE(line.find("from 127.0.0.") != std::string::npos, "\"%s\"", line.c_str());
      RANK_REQUIRE(line.find("from 127.0.0.2:") == std::string::npos,
                   "\"%s\": the source was bound to NCCL's device although no topology chose it", line.c_str());
      RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
      RANK_REQUIRE(mesh.wait_for_exit(0, 1), "peer did not finish");
      RANK_REQUIRE(net->closeRecv(recv) == ncclSuccess);
    } else {
      void* send = nullptr;
      RANK_REQUIRE(mesh.recv(1, 0, handle, sizeof handle));
      while (!send) RANK_REQUIRE(net->connect(ctx, 0, handle, &send, nullptr) == ncclSuccess);
      RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "loaded a different topology"), "no WARN about the topologies");
      RANK_REQUIRE(!logged_contains(NCCL_LOG_INFO, "leaves through"), "a plane was chosen");
      RANK_REQUIRE(net->closeSend(send) == ncclSuccess);
    }
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

TEST(NetPluginPlanes, HostMissingFromTheTopologyFallsBackToInterfacesWithAWarn) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    ::setenv("TOPOCOLL_TOPO_FILE", kTopology.c_str(), 1);
    ::setenv("TOPOCOLL_HOSTNAME", "not-a-host", 1);
    ::setenv("TOPOCOLL_NET_IFNAME", "=lo", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess);
    int ndev = 0;
    RANK_REQUIRE(net->devices(&ndev) == ncclSuccess && ndev == 1, "%d devices", ndev);
    ncclNetProperties_v11_t props;
    RANK_REQUIRE(net->getProperties(0, &props) == ncclSuccess && std::strcmp(props.name, "lo") == 0);
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "\"not-a-host\" (from TOPOCOLL_HOSTNAME) is not in topology"),
                 "no WARN naming the host and where its name came from");
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// The rule every face shares (config/local_host.h): with no TOPOCOLL_HOSTNAME, NCCL_HOSTID
// names the host, as it does for NCCL and the interposer; a domain does not hide it. The
// first H100 run had the interposer find s0 this way while the net face looked for "vm".
TEST(NetPluginPlanes, HostFromNcclHostIdWithOrWithoutDomain) {
  for (const char* id : {"s1", "s1.cluster.example"}) {
    auto results = run_ranks(1, [id](int, RankMesh&) {
      ::setenv("TOPOCOLL_TOPO_FILE", kTopology.c_str(), 1);
      ::unsetenv("TOPOCOLL_HOSTNAME");
      ::setenv("NCCL_HOSTID", id, 1);
      ::setenv("TOPOCOLL_NET_PLANE_ADDRS", "nic0=127.0.0.1,nic1=127.0.0.2", 1);
      const ncclNet_v11_t* net = net_v11();
      RANK_REQUIRE(net);
      void* ctx = nullptr;
      RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess);
      int ndev = 0;
      RANK_REQUIRE(net->devices(&ndev) == ncclSuccess && ndev == 2, "%d devices", ndev);
      RANK_REQUIRE(logged_contains(NCCL_LOG_INFO, "endpoint s1.g0") && logged_contains(NCCL_LOG_INFO, "endpoint s1.g1"),
                   "devices are not host s1's endpoints");
      RANK_REQUIRE(!logged_contains(NCCL_LOG_WARN, "is not in topology"), "host not found");
      RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
      return 0;
    });
    EXPECT_TRUE(all_ok(results)) << id << ": " << describe(results);
  }
}

// Inside a rank: with no topology and `settings` applied (null: unset), the names of the
// devices the plugin offers.
int device_names_without_topology(const std::vector<std::pair<const char*, const char*>>& settings,
                                  std::vector<std::string>* names) {
  ::unsetenv("TOPOCOLL_TOPO_FILE");
  for (const auto& [name, value] : settings) value ? ::setenv(name, value, 1) : ::unsetenv(name);
  const ncclNet_v11_t* net = net_v11();
  RANK_REQUIRE(net);
  void* ctx = nullptr;
  RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess);
  int ndev = 0;
  RANK_REQUIRE(net->devices(&ndev) == ncclSuccess);
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v11_t props;
    RANK_REQUIRE(net->getProperties(d, &props) == ncclSuccess);
    names->push_back(props.name);
  }
  RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
  return 0;
}

// NCCL ignores an NCCL_SOCKET_IFNAME of one character (misc/socket.cc): the default then, as
// for NCCL; two characters are a selector, here one that matches nothing (a WARN).
TEST(NetPluginPlanes, OneCharacterNcclSocketIfnameIsIgnoredAsNcclIgnoresIt) {
  for (const char* selector : {"q", "qz"}) {
    auto results = run_ranks(1, [selector](int, RankMesh&) {
      std::vector<std::string> names;
      RANK_REQUIRE(device_names_without_topology({{"TOPOCOLL_NET_IFNAME", nullptr}, {"NCCL_SOCKET_IFNAME", selector}},
                                                 &names) == 0);
      const bool ignored = std::strlen(selector) == 1;
      RANK_REQUIRE(ignored != names.empty(), "NCCL_SOCKET_IFNAME=%s: %zu devices", selector, names.size());
      RANK_REQUIRE(ignored != logged_contains(NCCL_LOG_WARN, "no network interface matches"), "WARN or not");
      return 0;
    });
    EXPECT_TRUE(all_ok(results)) << selector << ": " << describe(results);
  }
}

TEST(NetPluginPlanes, InterfaceSelectorPicksDevicesWithoutTopology) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    std::vector<std::string> names;
    RANK_REQUIRE(device_names_without_topology({{"NCCL_SOCKET_IFNAME", "=lo"}}, &names) == 0);
    RANK_REQUIRE(names == std::vector<std::string>{"lo"}, "%zu devices, not lo alone", names.size());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// Without NCCL_SOCKET_IFNAME (and no IPoIB), NCCL_COMM_ID's subnet picks the interface, as
// NCCL picks its own (misc/socket.cc ncclFindInterfaces): a root on loopback gives lo alone,
// which the default tier never offers beside another interface. One NCCL cannot read is a
// WARN naming it, and the default tier stands.
TEST(NetPluginPlanes, TheCommIdsSubnetPicksTheDeviceWithoutASelector) {
  for (const auto& i : net::list_interfaces())
    if (i.name.starts_with("ib")) GTEST_SKIP() << "IPoIB interface " << i.name << " comes first";
  auto results = run_ranks(1, [](int, RankMesh&) {
    std::vector<std::string> names;
    RANK_REQUIRE(device_names_without_topology({{"NCCL_SOCKET_IFNAME", nullptr}, {"TOPOCOLL_NET_IFNAME", nullptr},
                                                {"NCCL_COMM_ID", "127.0.0.1:29500"}},
                                               &names) == 0);
    RANK_REQUIRE(names == std::vector<std::string>{"lo"}, "%zu devices, not lo alone", names.size());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
  results = run_ranks(1, [](int, RankMesh&) {
    std::vector<std::string> names;
    RANK_REQUIRE(device_names_without_topology({{"NCCL_SOCKET_IFNAME", nullptr}, {"TOPOCOLL_NET_IFNAME", nullptr},
                                                {"NCCL_COMM_ID", "[::1"}},
                                               &names) == 0);
    RANK_REQUIRE(!names.empty());
    bool named = false;
    for (const std::string& w : logged(NCCL_LOG_WARN)) named |= w.find("NCCL_COMM_ID \"[::1\"") != std::string::npos;
    RANK_REQUIRE(named, "no WARN names the bad NCCL_COMM_ID");
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// choose_plane on a generated BiGraph whose servers have one NIC in each group: every
// connection between servers leaves through the NIC opposite the peer's group (EFLOPS:
// one inter-group link, the path HD's cross-group pairs are planned on), whatever NCCL asked.
TEST(PlaneRouter, BiGraphAlwaysTakesTheDirectInterGroupPath) {
  topo::BiGraphShape shape;
  shape.switches_per_group = 4;
  shape.endpoints_per_switch = 4;
  shape.gpus_per_server = 2;
  shape.nic_spread = "alternate";
  topo::Topology t = topo::generate_bigraph(shape);
  for (const auto& host : t.hosts()) {
    std::vector<plugin::NetDevice> devices;
    for (int e : host.endpoints) {
      plugin::NetDevice d;
      d.name = t.endpoints()[e].nic;
      d.endpoint = e;
      devices.push_back(d);
    }
    ASSERT_EQ(devices.size(), 2u);
    for (int peer = 0; peer < int(t.endpoints().size()); ++peer) {
      if (t.endpoints()[peer].host == host.name) continue;
      const auto peer_group = t.switches()[t.endpoints()[peer].attach_switch].role;
      for (int requested = 0; requested < 2; ++requested) {
        plugin::PlaneChoice c = plugin::choose_plane(t, devices, requested, peer);
        ASSERT_GE(c.device, 0);
        const auto& own = t.endpoints()[devices[c.device].endpoint];
        if (own.attach_switch == t.endpoints()[peer].attach_switch) {
          EXPECT_EQ(c.links, 2) << c.why;  // same switch: shorter still
        } else {
          EXPECT_NE(t.switches()[own.attach_switch].role, peer_group) << c.why;
          EXPECT_EQ(c.links, 3) << c.why;
        }
      }
    }
  }
}

// NAP with two nodes per host: a connection leaves through the local node with the shortest
// route to the peer (the one whose torus ring reaches it), and keeps NCCL's node on a tie.
TEST(PlaneRouter, NapPicksTheShortestLocalNodeAndKeepsNcclsChoiceOnATie) {
  topo::NapShape shape;
  shape.packages = 4;
  shape.nodes_per_package = 4;
  shape.local_switches = 2;
  shape.torus = {2, 2};
  shape.gpus_per_host = 2;
  topo::Topology t = topo::generate_nap(shape);
  int rerouted = 0, kept = 0;
  for (const auto& host : t.hosts()) {
    std::vector<plugin::NetDevice> devices;
    for (int e : host.endpoints) {
      plugin::NetDevice d;
      d.name = t.endpoints()[e].nic;
      d.endpoint = e;
      devices.push_back(d);
    }
    for (int peer = 0; peer < int(t.endpoints().size()); ++peer) {
      if (t.endpoints()[peer].host == host.name) continue;
      std::vector<size_t> links;
      for (const auto& d : devices) links.push_back(t.route(d.endpoint, peer).front().links.size());
      const size_t best = *std::min_element(links.begin(), links.end());
      for (int requested = 0; requested < int(devices.size()); ++requested) {
        plugin::PlaneChoice c = plugin::choose_plane(t, devices, requested, peer);
        ASSERT_GE(c.device, 0);
        EXPECT_EQ(size_t(c.links), best) << c.why;
        if (links[requested] == best) {
          EXPECT_EQ(c.device, requested) << c.why;
          ++kept;
        } else {
          ++rerouted;
        }
      }
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(rerouted, 0);  // the shape has peers only one of a host's nodes reaches directly
}

}  // namespace
}  // namespace topocoll::testing
