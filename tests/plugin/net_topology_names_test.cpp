// The net face's names stay apart from NCCL_TOPO_FILE's <net> elements: NCCL finds a device in
// that XML by name and keeps the file's attributes (gdr among them) over the plugin's.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "plugin/net/nccl_topology_names.h"
#include "plugin/net/net_device.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::plugin {
namespace {

using Names = std::set<std::string>;

TEST(NcclTopologyNames, EveryNetElementsNameIsFound) {
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel">
    <pci busid="0000:0c:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="mlx5_0" dev="0" speed="200000" port="1" guid="0x1" latency="0" gdr="1" maxconn="131072"/>
        <net  name = 'mlx5_1' gdr="1"></net>
      </nic>
    </pci>
    <network name="not-a-net"/>
    <net gdr="1" name="ib2" />
    <net dev="3"/>
    <netx name="nope"/>
  </cpu>
</system>)";
  EXPECT_EQ(net_names_in_nccl_topology(xml), (Names{"mlx5_0", "mlx5_1", "ib2"}));
}

TEST(NcclTopologyNames, MalformedTextYieldsWhatItCanAndNeverReadsPastTheEnd) {
  EXPECT_EQ(net_names_in_nccl_topology(""), Names{});
  EXPECT_EQ(net_names_in_nccl_topology("<net"), Names{});
  EXPECT_EQ(net_names_in_nccl_topology("<net name="), Names{});
  EXPECT_EQ(net_names_in_nccl_topology("<net name=\"open"), Names{});
  EXPECT_EQ(net_names_in_nccl_topology("<net xname=\"a\" name=\"b\""), Names{"b"});
  EXPECT_EQ(net_names_in_nccl_topology("<net name=\"\"/>"), Names{""});
}

TEST(NcclTopologyNames, OnlyTakenNamesChangeAndAllStayDistinct) {
  EXPECT_EQ(names_apart_from({"nic0", "nic1"}, {}), (std::vector<std::string>{"nic0", "nic1"}));
  EXPECT_EQ(names_apart_from({"mlx5_0", "mlx5_1"}, {"mlx5_0", "ib9"}),
            (std::vector<std::string>{"mlx5_0-topocoll", "mlx5_1"}));
  EXPECT_EQ(names_apart_from({"a", "a-topocoll"}, {"a"}), (std::vector<std::string>{"a-topocoll2", "a-topocoll"}));
  EXPECT_EQ(names_apart_from({"a"}, {"a", "a-topocoll"}), (std::vector<std::string>{"a-topocoll2"}));
}

const std::string kPlanesTopology = std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/net/bigraph-planes.json";

DeviceCatalog devices_with(const std::string& nccl_topo_file) {
  return discover_devices(make_process_context(config::read_env({{"TOPOCOLL_TOPO_FILE", kPlanesTopology},
                                                                 {"NCCL_HOSTID", "s1"},
                                                                 {"TOPOCOLL_NET_PLANE_ADDRS", "nic0=127.0.0.1,nic1=127.0.0.2"},
                                                                 {"NCCL_TOPO_FILE", nccl_topo_file}})));
}

TEST(NcclTopologyNames, ADeviceNamedLikeANetOfNcclsTopologyFileIsToldApart) {
  const testing_support::ScratchDir dir("nccl_topo_names");
  const std::string file = dir.path() + "/topo.xml";
  std::ofstream(file) << "<system><cpu><pci><nic><net name=\"nic1\" gdr=\"1\" speed=\"400000\"/></nic></pci></cpu></system>";
  const DeviceCatalog catalog = devices_with(file);
  ASSERT_EQ(catalog.devices.size(), 2u);
  EXPECT_EQ(catalog.devices[0].name, "nic0");
  EXPECT_EQ(catalog.devices[0].nccl_name, "nic0");
  EXPECT_EQ(catalog.devices[1].name, "nic1") << "the topology's name still routes";
  EXPECT_EQ(catalog.devices[1].nccl_name, "nic1-topocoll");

  const DeviceCatalog unreadable = devices_with(dir.path() + "/missing.xml");
  ASSERT_EQ(unreadable.devices.size(), 2u);
  EXPECT_EQ(unreadable.devices[1].nccl_name, "nic1");
  // A pipe is never opened (that would wait for a writer and stall NCCL's init).
  const std::string fifo = dir.path() + "/pipe.xml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const DeviceCatalog piped = devices_with(fifo);
  ASSERT_EQ(piped.devices.size(), 2u);
  EXPECT_EQ(piped.devices[1].nccl_name, "nic1");
  const DeviceCatalog unset = devices_with("");
  ASSERT_EQ(unset.devices.size(), 2u);
  EXPECT_EQ(unset.devices[0].nccl_name, "nic0");
}

}  // namespace
}  // namespace topocoll::plugin
