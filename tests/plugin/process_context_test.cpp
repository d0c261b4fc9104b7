// The process context every face reads: the topology of TOPOCOLL_TOPO_FILE loaded once with
// its one fingerprint, this host found in it, an error naming the file when it cannot load,
// and the lower layers' warnings going to NCCL's logger inside NCCL.
#include <gtest/gtest.h>

#include <cstdarg>
#include <fstream>
#include <string>
#include <vector>

#include "config/warnings.h"
#include "plugin/log.h"
#include "plugin/process_context.h"
#include "topo/topology_fingerprint.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::plugin {
namespace {

using testing_support::example_path;

TEST(ProcessContext, LoadsTheTopologyWithItsFingerprintAndFindsTheHost) {
  const ProcessContext c = make_process_context(
      config::read_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-16x8")}, {"NCCL_HOSTID", "s3.cluster.example"}}));
  ASSERT_NE(c.topology, nullptr) << c.topology_error;
  EXPECT_EQ(c.topology_error, "");
  EXPECT_EQ(c.topology_fingerprint, topo::topology_fingerprint(topo::load_topology_file(example_path("bigraph-16x8"))));
  ASSERT_TRUE(c.host_index);
  EXPECT_EQ(c.topology->hosts()[*c.host_index].name, "s3");
  EXPECT_EQ(c.host.name, "s3") << "the topology's spelling";
  EXPECT_STREQ(c.host.source, "NCCL_HOSTID");
  EXPECT_EQ(c.env.topo_file, example_path("bigraph-16x8"));
}

TEST(ProcessContext, AHostTheTopologyLacksIsKeptAsFound) {
  const ProcessContext c = make_process_context(
      config::read_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-16x8")}, {"TOPOCOLL_HOSTNAME", "elsewhere"}}));
  ASSERT_NE(c.topology, nullptr);
  EXPECT_FALSE(c.host_index);
  EXPECT_EQ(c.host.name, "elsewhere");
  EXPECT_STREQ(c.host.source, "TOPOCOLL_HOSTNAME");
}

TEST(ProcessContext, NoFileNoTopologyAndABadFileIsNamed) {
  const ProcessContext none = make_process_context(config::read_env({}));
  EXPECT_EQ(none.topology, nullptr);
  EXPECT_EQ(none.topology_error, "");
  EXPECT_EQ(none.topology_fingerprint, 0u);
  EXPECT_FALSE(none.host_index);

  const ProcessContext missing = make_process_context(config::read_env({{"TOPOCOLL_TOPO_FILE", "/nonexistent/t.json"}}));
  EXPECT_EQ(missing.topology, nullptr);
  EXPECT_EQ(missing.topology_error.rfind("TOPOCOLL_TOPO_FILE=\"/nonexistent/t.json\": ", 0), 0u)
      << missing.topology_error;

  const std::string path = std::string(TOPOCOLL_BINARY_DIR) + "/process_context_bad_topology.json";
  std::ofstream(path) << "{ \"kind\": \"bigraph\", ";
  const ProcessContext bad = make_process_context(config::read_env({{"TOPOCOLL_TOPO_FILE", path}}));
  EXPECT_EQ(bad.topology, nullptr);
  EXPECT_NE(bad.topology_error.find(path), std::string::npos) << bad.topology_error;
  EXPECT_EQ(bad.topology_fingerprint, 0u);
}

// Loaded once: every call is the same context, the same topology object; a test context
// stands in while it lives and the process's comes back after.
TEST(ProcessContext, TheProcessHasOneContext) {
  const ProcessContext& first = process_context();
  EXPECT_EQ(&process_context(), &first);
  EXPECT_EQ(process_context().topology.get(), first.topology.get());
  const ProcessContext other = make_process_context(config::read_env({{"TOPOCOLL_TOPO_FILE", example_path("nap-4x8")}}));
  {
    ScopedProcessContext scope(other);
    EXPECT_EQ(&process_context(), &other);
    EXPECT_NE(process_context().topology, nullptr);
  }
  EXPECT_EQ(&process_context(), &first);
}

struct Logged {
  ncclDebugLogLevel level;
  std::string text;
};
std::vector<Logged> g_logged;
void capture(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_logged.push_back({level, buf});
}

// Inside NCCL a bad setting or a stray connection is an NCCL WARN, with the plugin's prefix.
TEST(ProcessContext, LowerLayersWarnThroughNcclsLogger) {
  g_logged.clear();
  set_nccl_logger(&capture);
  config::warn_once("TOPOCOLL_NET_RENDEZVOUS=\"maybe\": a test warning");
  config::warn("closed a stray connection (a test)");
  set_nccl_logger(nullptr);
  ASSERT_EQ(g_logged.size(), 2u);
  EXPECT_EQ(g_logged[0].level, NCCL_LOG_WARN);
  EXPECT_EQ(g_logged[0].text, "topocoll: TOPOCOLL_NET_RENDEZVOUS=\"maybe\": a test warning");
  EXPECT_EQ(g_logged[1].text, "topocoll: closed a stray connection (a test)");
}

}  // namespace
}  // namespace topocoll::plugin
