#include "net/nic_resolver.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "net/rdma_port.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::net {
namespace {

namespace fs = std::filesystem;

// A fake /sys under a temporary directory: RDMA devices with their network interfaces, and
// interfaces under class/net.
class FakeSysfs {
 public:
  FakeSysfs() {
    fs::create_directories(root_ / "class" / "infiniband");
    fs::create_directories(root_ / "class" / "net");
  }
  void add_rdma_device(const std::string& device, const std::vector<std::string>& netdevs) {
    fs::path net = root_ / "class" / "infiniband" / device / "device" / "net";
    fs::create_directories(net);
    for (const auto& n : netdevs) fs::create_directories(net / n);
  }
  void add_interface(const std::string& name) { fs::create_directories(root_ / "class" / "net" / name); }
  const fs::path& root() const { return root_; }

 private:
  testing_support::ScratchDir scratch_{"fake_sysfs"};
  const fs::path root_ = scratch_.path();
};

NetworkInterface interface(const std::string& name, const std::string& ip) {
  NetworkInterface i;
  i.name = name;
  i.address = *SocketAddress::parse(ip);
  return i;
}

TEST(NicResolver, ExplicitAddressWinsOverInterfaceOfSameName) {
  FakeSysfs sysfs;
  NicResolver resolver({{"lo", *SocketAddress::parse("10.1.2.3")}, {"nic1", *SocketAddress::parse("fd00::7")}},
                       {interface("lo", "127.0.0.1")}, sysfs.root());
  NicAddress lo = resolver.resolve("lo");
  ASSERT_TRUE(lo.ok()) << lo.error;
  EXPECT_EQ(lo.address.ip_string(), "10.1.2.3");
  EXPECT_EQ(lo.source, "TOPOCOLL_NET_PLANE_ADDRS");
  EXPECT_TRUE(lo.interface_name.empty());
  NicAddress nic1 = resolver.resolve("nic1");
  ASSERT_TRUE(nic1.ok()) << nic1.error;
  EXPECT_EQ(nic1.address.ip_string(), "fd00::7");
}

TEST(NicResolver, InterfaceNameFromTheHost) {
  NicResolver resolver({}, list_interfaces());
  NicAddress lo = resolver.resolve("lo");
  ASSERT_TRUE(lo.ok()) << lo.error;
  EXPECT_EQ(lo.address.ip_string(), "127.0.0.1");
  EXPECT_EQ(lo.interface_name, "lo");
  EXPECT_EQ(lo.source, "interface lo");
}

TEST(NicResolver, RdmaDeviceResolvesThroughItsInterface) {
  FakeSysfs sysfs;
  // Two interfaces on the device's PCI function; only "lo" has an address.
  sysfs.add_rdma_device("mlx5_0", {"lo", "ens1f0np0"});
  NicResolver resolver({}, list_interfaces(), sysfs.root());
  NicAddress nic = resolver.resolve("mlx5_0");
  ASSERT_TRUE(nic.ok()) << nic.error;
  EXPECT_EQ(nic.address.ip_string(), "127.0.0.1");
  EXPECT_EQ(nic.interface_name, "lo");
  EXPECT_EQ(nic.source.rfind("RDMA device mlx5_0 -> interface lo", 0), 0u) << nic.source;
  EXPECT_FALSE(nic.port_down);
}

TEST(NicResolver, RdmaDeviceWhoseInterfacesHaveNoAddress) {
  FakeSysfs sysfs;
  sysfs.add_rdma_device("mlx5_3", {"ens9f1np1"});
  sysfs.add_rdma_device("mlx5_4", {});
  NicResolver resolver({}, {interface("lo", "127.0.0.1")}, sysfs.root());
  NicAddress with_netdev = resolver.resolve("mlx5_3");
  EXPECT_FALSE(with_netdev.ok());
  EXPECT_NE(with_netdev.error.find("NIC \"mlx5_3\""), std::string::npos) << with_netdev.error;
  EXPECT_NE(with_netdev.error.find("interface(s) ens9f1np1 but none is up with an IP address"),
            std::string::npos)
      << with_netdev.error;
  NicAddress without = resolver.resolve("mlx5_4");
  EXPECT_FALSE(without.ok());
  EXPECT_NE(without.error.find("RDMA device mlx5_4 has no network interface under"), std::string::npos)
      << without.error;
}

TEST(NicResolver, UnknownNicNamesWhatWasTried) {
  FakeSysfs sysfs;
  sysfs.add_interface("eth7");  // exists, but not up with an address
  NicResolver resolver({{"nic0", *SocketAddress::parse("10.0.0.1")}}, {interface("lo", "127.0.0.1")},
                       sysfs.root());
  NicAddress unknown = resolver.resolve("nic9");
  EXPECT_FALSE(unknown.ok());
  EXPECT_FALSE(unknown.address.is_set());
  const std::string& e = unknown.error;
  EXPECT_NE(e.find("NIC \"nic9\" has no local IP address"), std::string::npos) << e;
  EXPECT_NE(e.find("no TOPOCOLL_NET_PLANE_ADDRS entry"), std::string::npos) << e;
  EXPECT_NE(e.find("no up interface named nic9"), std::string::npos) << e;
  EXPECT_NE(e.find("no RDMA device " + (sysfs.root() / "class" / "infiniband" / "nic9").string()),
            std::string::npos)
      << e;
  NicAddress down = resolver.resolve("eth7");
  EXPECT_FALSE(down.ok());
  EXPECT_NE(down.error.find("interface eth7 exists but is down or has no IP address"), std::string::npos)
      << down.error;
  // Path-like names never reach the filesystem.
  EXPECT_FALSE(resolver.resolve("../net/eth7").ok());
  EXPECT_FALSE(resolver.resolve("").ok());
}

// Without libibverbs nothing is checked; with it, a device that does not exist is reported as
// not listed (this machine has no RDMA device named like this either way).
TEST(NicResolver, RdmaPortQueryOfAMissingDevice) {
  RdmaPortStatus status = query_rdma_port("topocoll_no_such_hca");
  EXPECT_FALSE(status.down());
  if (!status.checked) {
    EXPECT_EQ(status.describe(), "");
    return;
  }
  EXPECT_FALSE(status.listed);
  EXPECT_NE(status.describe().find("libibverbs lists no such device"), std::string::npos) << status.describe();
}

}  // namespace
}  // namespace topocoll::net
