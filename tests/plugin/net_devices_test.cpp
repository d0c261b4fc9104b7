// The net face's devices come from the process context: its topology object (not a copy
// loaded again), its host, and a handle fingerprint that is 32 bits of the one topology
// fingerprint the interposer's init exchange carries whole.
#include <gtest/gtest.h>

#include <string>

#include "plugin/net/net_device.h"
#include "topo/topology_fingerprint.h"

namespace topocoll::plugin {
namespace {

const std::string kTopology = std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/net/bigraph-planes.json";

TEST(NetDevices, ComeFromTheProcessContextsTopologyAndHost) {
  const ProcessContext context = make_process_context(config::read_env(
      {{"TOPOCOLL_TOPO_FILE", kTopology}, {"NCCL_HOSTID", "s1"}, {"TOPOCOLL_NET_PLANE_ADDRS", "nic0=127.0.0.1,nic1=127.0.0.2"}}));
  ASSERT_NE(context.topology, nullptr) << context.topology_error;
  const DeviceCatalog catalog = discover_devices(context);
  EXPECT_EQ(catalog.topology.get(), context.topology.get());
  EXPECT_EQ(catalog.host, "s1");
  ASSERT_EQ(catalog.devices.size(), 2u);
  EXPECT_EQ(catalog.devices[0].address.ip_string(), "127.0.0.1");
  EXPECT_EQ(catalog.topology_fingerprint, handle_fingerprint(context.topology_fingerprint));
  EXPECT_EQ(context.topology_fingerprint, topo::topology_fingerprint(*context.topology));
}

TEST(NetDevices, HandleFingerprintIsZeroOnlyWithoutATopology) {
  EXPECT_EQ(handle_fingerprint(0), 0u);
  EXPECT_EQ(handle_fingerprint(0x0000000100000001ull), 1u) << "halves that cancel still name a topology";
  EXPECT_EQ(handle_fingerprint(0x1234567800000000ull), 0x12345678u);
  EXPECT_NE(handle_fingerprint(0x1234567800000000ull), handle_fingerprint(0x1234567900000000ull));
}

}  // namespace
}  // namespace topocoll::plugin
