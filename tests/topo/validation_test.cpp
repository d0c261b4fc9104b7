// Every malformed file in tests/data/topo/ is rejected with its exact JSON pointer and reason.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "topo/topology_json.h"

namespace topocoll::topo {
namespace {

struct Case {
  const char* file;
  const char* pointer;
  const char* reason;
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.file; }

const Case kCases[] = {
    {"not_json.json", "", "invalid JSON at byte 1: syntax error while parsing value - invalid literal; last read: 'k'"},
    {"empty.json", "", "the file is empty (a topology file is a JSON object: docs/topology.md)"},
    {"truncated.json", "", "invalid JSON at byte 301: syntax error while parsing array - unexpected end of input; expected ']'"},
    {"top_level_array.json", "", "expected an object, got array"},
    {"missing_kind.json", "", "missing field \"kind\""},
    {"kind_not_string.json", "/kind", "expected a string, got integer"},
    {"unknown_kind.json", "/kind", "unknown kind \"fattree\" (expected bigraph or nap)"},
    {"bigraph_unknown_switch.json", "/servers/3/nics/1/switch", "unknown switch \"U9\""},
    {"bigraph_gpu_not_integer.json", "/servers/1/nics/0/gpu", "expected an integer, got string"},
    {"bigraph_missing_servers.json", "", "missing field \"servers\""},
    {"bigraph_nic_missing_switch.json", "/servers/0/nics/0", "missing field \"switch\""},
    {"bigraph_misspelt_field.json", "", "unknown field \"swiches\""},
    // JSON keeps the last of two equal keys: one value would be silently ignored.
    {"bigraph_duplicate_field.json", "/servers/1/nics/0/gpu", "duplicate field \"gpu\""},
    {"bigraph_duplicate_top_field.json", "/link_gbps", "duplicate field \"link_gbps\""},
    {"bigraph_duplicate_endpoint_id.json", "/servers/2/nics/1/id", "duplicate endpoint id \"s0.g0\""},
    {"bigraph_duplicate_host_gpu.json", "/servers/2/nics/1/gpu", "GPU 0 of host \"s2\" is already endpoint \"s2.g0\""},
    {"bigraph_duplicate_server.json", "/servers/2/name", "duplicate server \"s1\""},
    {"bigraph_duplicate_switch.json", "/switches/lower/1", "duplicate switch \"U1\""},
    {"bigraph_nic_cabled_twice.json", "/servers/1/nics/1/name", "NIC \"nic0\" of server \"s1\" is already cabled to switch \"L0\""},
    {"bigraph_link_inside_group.json", "/links/1", "link inside the upper group: \"U1\" - \"U0\" (BiGraph links join an upper and a lower switch)"},
    {"bigraph_duplicate_link.json", "/links/1", "duplicate link \"L0\" - \"U0\""},
    {"bigraph_disconnected.json", "/links", "the network is disconnected: endpoint \"s0.g0\" cannot reach endpoint \"s2.g0\" through switches (an endpoint never forwards, not even to its host's other NICs)"},
    // Reachable only through host a's two NICs: routing never forwards through an endpoint.
    {"bigraph_groups_joined_only_through_a_host.json", "/links", "the network is disconnected: endpoint \"b.g0\" cannot reach endpoint \"c.g0\" through switches (an endpoint never forwards, not even to its host's other NICs)"},
    {"bigraph_zero_rate.json", "/link_gbps", "rate must be >= 0.001 Gb/s (1 Mb/s), got 0"},
    {"bigraph_negative_rate.json", "/link_gbps", "rate must be >= 0.001 Gb/s (1 Mb/s), got -100"},
    {"bigraph_absurd_rate.json", "/link_gbps", "rate 1000000 Gb/s is absurd (limit 100000 Gb/s)"},
    {"bigraph_negative_latency.json", "/link_latency_us", "latency must be >= 0 us, got -1"},
    {"bigraph_absurd_latency.json", "/switch_latency_us", "latency 50000 us is absurd (limit 10000 us)"},
    {"bigraph_unequal_groups.json", "/switches", "the upper group has 2 switches and the lower 3; BiGraph groups must be the same size"},
    {"bigraph_switch_ports_full.json", "/servers/2/nics/0/switch", "switch \"U1\" has no free port (3 ports)"},
    {"bigraph_shape_uneven_servers.json", "/shape/gpus_per_server", "8 endpoints do not fill servers of 3 GPUs"},
    {"bigraph_shape_huge.json", "/shape/endpoints_per_switch", "2097152 endpoints exceed the limit of 65536"},
    {"nap_torus_mismatch.json", "/torus", "torus 3x2 holds 6 packages, not 2"},
    {"nap_shape_torus_mismatch.json", "/shape/torus", "torus 3x2 holds 6 packages, not 4"},
    // The torus was never written: the message names what was (and the default it met).
    {"nap_shape_packages_without_torus.json", "/shape/packages", "8 packages and no \"torus\": the default torus 2x2 holds 4 (give the torus)"},
    // Cabled to nothing: the connectivity check (endpoints only) would not see it.
    // One machine to DNS and hostfiles; an option or a directory to the commands names reach.
    {"bigraph_host_case.json", "/servers/1/name", "host \"NODE1\" is host \"node1\" spelt otherwise (host names are compared ignoring case)"},
    {"bigraph_leading_dash.json", "/servers/0/name", "begins with '-': names and ids begin with a letter or digit (a leading '-' reads as an option, '.' and '..' as directories)"},
    // A host's fabric across packages would be a path outside NAP's torus.
    {"nap_host_across_packages.json", "/nodes/1/package", "host \"h\" is in package 0 (endpoint \"p0.n0\"): a host's GPUs are nodes of one package"},
    {"bigraph_unused_switch.json", "/switches/lower/1", "switch \"L1\" has no cable (no link, no NIC)"},
    {"nap_torus_not_array.json", "/torus", "expected an array, got string"},
    {"nap_too_many_local_switches.json", "/local_switches", "2 local switches need 2 ports per node, but a node has 1"},
    {"nap_too_many_nodes.json", "/nodes_per_package", "2 nodes need 2 ports per local switch, but a local switch has 1"},
    {"nap_missing_node.json", "/nodes", "3 nodes listed, the shape has 4 (2 packages x 2 nodes)"},
    {"nap_duplicate_node.json", "/nodes/3", "node 0 of package 1 is already endpoint \"p1.n0\""},
    {"nap_package_out_of_range.json", "/nodes/2/package", "must be in [0, 1], got 2"},
    {"nap_duplicate_host_gpu.json", "/nodes/1/gpu", "GPU 0 of host \"p0.h0\" is already endpoint \"p0.n0\""},
    {"nap_zero_inter_rate.json", "/inter_gbps", "rate must be >= 0.001 Gb/s (1 Mb/s), got 0"},
    {"nap_negative_latency.json", "/intra_latency_us", "latency must be >= 0 us, got -0.5"},
    // Names reach hostfiles, namespace names, hostnames and comma-separated variables.
    {"bigraph_host_name_line_break.json", "/servers/1/name", "has a control character (line break, tab, ...)"},
    {"bigraph_endpoint_id_comma.json", "/servers/0/nics/1/id", "has ',' at position 6: names and ids take letters, digits, '_', '.' and '-' only"},
    {"bigraph_host_name_too_long.json", "/servers/2/name", "longer than 64 characters"},
    {"bigraph_switch_id_space.json", "/switches/lower/0", "has byte 0x20 at position 2: names and ids take letters, digits, '_', '.' and '-' only"},
    {"bigraph_name_tab.json", "/name", "has a control character (line break, tab, ...)"},
    {"nap_nic_comma.json", "/nodes/1/nic", "has ',' at position 3: names and ids take letters, digits, '_', '.' and '-' only"},
};

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, RejectedWithPointerAndReason) {
  const Case& c = GetParam();
  const std::string path = std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/topo/" + c.file;
  try {
    load_topology_file(path);
    FAIL() << c.file << " was accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), c.pointer);
    EXPECT_EQ(e.reason(), c.reason);
    // The reason alone for the whole file; pointer first for a place in it.
    EXPECT_EQ(std::string(e.what()), std::string(c.pointer).empty() ? std::string(c.reason)
                                                                    : std::string(c.pointer) + ": " + c.reason);
  }
}

INSTANTIATE_TEST_SUITE_P(TopoFiles, Malformed, ::testing::ValuesIn(kCases),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

TEST(TopoValidation, SmallValidFilesLoad) {
  const std::string dir = std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/topo/";
  Topology big = load_topology_file(dir + "valid_bigraph_small.json");
  EXPECT_EQ(big.endpoints().size(), 8u);
  EXPECT_EQ(big.hosts().size(), 4u);
  Topology nap = load_topology_file(dir + "valid_nap_tiny.json");
  EXPECT_EQ(nap.endpoints().size(), 4u);
  EXPECT_EQ(nap.package_count(), 2);
}

TEST(TopoValidation, MissingFileNamesThePath) {
  try {
    load_topology_file("/nonexistent/topology.json");
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "");
    EXPECT_EQ(e.reason(), "cannot read \"/nonexistent/topology.json\": No such file or directory");
  }
}

TEST(TopoValidation, RateBelowOneMegabitIsRejected) {
  try {
    load_topology_text(R"({"kind": "bigraph", "shape": {"link_gbps": 1e-308}})");
    FAIL() << "a rate of 1e-308 Gb/s was accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "/shape/link_gbps");
    EXPECT_EQ(e.reason(), "rate must be >= 0.001 Gb/s (1 Mb/s), got 1e-308");
  }
}

// Devices and directories are refused before anything is read: /dev/zero never ends.
TEST(TopoValidation, NonRegularFilesAreRefusedByKind) {
  const std::pair<const char*, const char*> cases[] = {
      {"/dev/zero", "\"/dev/zero\" is a character device, not a topology file (a regular file is expected)"},
      {"/dev/urandom", "\"/dev/urandom\" is a character device, not a topology file (a regular file is expected)"},
      {"/tmp", "\"/tmp\" is a directory, not a topology file (a regular file is expected)"},
  };
  for (const auto& [path, reason] : cases) {
    try {
      load_topology_file(path);
      FAIL() << path << " was accepted";
    } catch (const TopologyError& e) {
      EXPECT_EQ(e.reason(), reason);
    }
  }
}

TEST(TopoValidation, FileOverTheSizeLimitIsRefusedUnread) {
  char path[] = "/tmp/topocoll_huge_topoXXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, ::ftruncate(fd, off_t(kMaxTopologyFileBytes) + 1));  // sparse: costs no disk
  ::close(fd);
  try {
    load_topology_file(path);
    ADD_FAILURE() << "a file over the limit was accepted";
  } catch (const TopologyError& e) {
    EXPECT_NE(e.reason().find("more than the 64 MiB a topology file may have"), std::string::npos)
        << e.reason();
  }
  ::unlink(path);
}

TEST(TopoValidation, NumbersOutOfIntegerRange) {
  try {
    load_topology_text(R"({"kind": "nap", "shape": {"nodes_per_package": 18446744073709551615}})");
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "/shape/nodes_per_package");
    EXPECT_EQ(e.reason(), "must be in [1, 1024], got 18446744073709551615");
  }
  try {
    load_topology_text(R"({"kind": "bigraph", "shape": {"link_gbps": 1e999}})");
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "");
    EXPECT_EQ(e.reason(), "invalid JSON: number overflow parsing '1e999'");
  }
}

// An array of 300,000 empty objects is refused for its unknown field at once: the parse
// with nlohmann's callback walked an array's elements at each object's end (quadratic: a
// 1 MB file took minutes, every rank's NCCL init with it). ctest's timeout is the bound.
TEST(TopoValidation, ALargeArrayOfObjectsIsReadInLinearTime) {
  std::string text = "{\"kind\":\"nap\",\"x\":[";
  for (int i = 0; i < 300000; ++i) text += i ? ",{}" : "{}";
  text += "]}";
  try {
    load_topology_text(text);
    ADD_FAILURE() << "an unknown field was accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.reason(), "unknown field \"x\"") << e.what();
  }
}

// More values than any topology holds are refused while reading, not built into memory.
TEST(TopoValidation, MoreValuesThanAnyTopologyHoldsAreRefusedWhileReading) {
  std::string text = "{\"kind\":\"nap\",\"x\":[";
  text.reserve(20 << 20);
  for (int i = 0; i < (8 << 20) + 1; ++i) text += i ? ",0" : "0";
  text += "]}";
  try {
    load_topology_text(text);
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "/x/8388605") << e.what();  // the root, "kind" and "x" count too
    EXPECT_NE(e.reason().find("more than 8388608 values"), std::string::npos) << e.what();
  }
}

// nlohmann's lexer ends the input at a NUL: a file with JSON after one would load its prefix.
TEST(TopoValidation, ANulByteIsRefusedNotTakenForTheEnd) {
  const std::string text("{\"kind\":\"nap\",\"shape\":{\"torus\":[2,2]}}\0{\"kind\":\"bigraph\", junk", 60);
  try {
    load_topology_text(text);
    ADD_FAILURE() << "the part before the NUL was loaded";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.reason(), "a NUL byte at byte 38 (a topology file is JSON text)") << e.what();
  }
}

// A field name reaches logs escaped (no terminal escape, no forged line), cut at 64
// characters; a pointer escapes '~' and '/' as RFC 6901 says.
TEST(TopoValidation, FieldNamesInMessagesAreEscapedAndPointersFollowRfc6901) {
  try {
    load_topology_text("{\"kind\":\"nap\",\"shape\":{},\"x\\u001b[31m\\nbuild: ok\":1}");
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.reason(), "unknown field \"x\\u001b[31m\\nbuild: ok\"") << e.what();
    for (char c : std::string(e.what())) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << e.what();
  }
  try {
    load_topology_text("{\"kind\":\"nap\",\"shape\":{},\"" + std::string(1000, 'k') + "\":1}");
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.reason(), "unknown field \"" + std::string(64, 'k') + "\"...") << e.what();
  }
  try {
    load_topology_text("{\"kind\":\"nap\",\"shape\":{\"a/b~c\":{\"a\":1,\"a\":2}}}");
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "/shape/a~1b~0c/a") << e.what();
    EXPECT_EQ(e.reason(), "duplicate field \"a\"") << e.what();
  }
}

}  // namespace
}  // namespace topocoll::topo
