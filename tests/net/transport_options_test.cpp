// Which callers get which transport: the host backend's options (from_env) leave the
// progress threads watching every socket, since its waiter sleeps until they report; only the
// net plugin's (for_nccl_net_plugin) leave small messages to a polling caller.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "config/env.h"
#include "config/warnings.h"
#include "net/transport_options.h"

namespace topocoll::net {
namespace {

TEST(TransportOptions, OnlyTheNetPluginLeavesSmallMessagesToAPollingCaller) {
  const config::Env env = config::read_env({});
  const TransportOptions host = TransportOptions::from_env(env);
  const TransportOptions plugin = TransportOptions::for_nccl_net_plugin(env);
  EXPECT_FALSE(host.caller_polls) << "the host backend sleeps until a progress thread reports";
  EXPECT_TRUE(plugin.caller_polls) << "NCCL's proxy keeps testing its requests";
  EXPECT_EQ(host.describe().find("caller_polls"), std::string::npos) << host.describe();
  EXPECT_NE(plugin.describe().find("caller_polls"), std::string::npos) << plugin.describe();
  // The rest is the same environment read the same way (the chunk: below).
  EXPECT_EQ(host.min_stripe_bytes, plugin.min_stripe_bytes);
}

TEST(TransportOptions, SettingsReducedToFitEachOtherAreSaidOnce) {
  static std::vector<std::string> warned;
  warned.clear();
  config::set_warning_sink([](const std::string& m) { warned.push_back(m); });
  const TransportOptions o = TransportOptions::from_env(config::read_env(
      {{"TOPOCOLL_NET_SOCKETS_PER_CONN", "2"}, {"TOPOCOLL_NET_THREADS", "5"}, {"TOPOCOLL_NET_CHUNK_BYTES", "64K"},
       {"TOPOCOLL_NET_MIN_STRIPE_BYTES", "1M"}}));
  const TransportOptions fine = TransportOptions::from_env(config::read_env({}));
  config::set_warning_sink(nullptr);
  EXPECT_EQ(o.threads_per_conn, 2);
  EXPECT_EQ(o.min_stripe_bytes, size_t(64) << 10);
  ASSERT_EQ(warned.size(), 2u);
  EXPECT_NE(warned[0].find("TOPOCOLL_NET_THREADS=5 is more than the 2 sockets"), std::string::npos) << warned[0];
  EXPECT_NE(warned[1].find("TOPOCOLL_NET_MIN_STRIPE_BYTES=1048576 is more than the chunk"), std::string::npos) << warned[1];
  EXPECT_EQ(fine.threads_per_conn, 2);  // the defaults fit: nothing said
}

// On one socket the chunk stripes nothing and only cuts the proxy's calls: the plugin's is
// 2 MiB there unless set (perf/results/net-plugin-caller-pass-20261128); with several sockets
// it stays the striping unit both ends agree on, and a set value is used as set.
TEST(TransportOptions, ThePluginsOneSocketConnectionsTakeLargerChunksUnlessTold) {
  const config::Env unset = config::read_env({});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(unset).chunk_bytes, TransportOptions::kOneSocketChunkBytes);
  EXPECT_EQ(TransportOptions::from_env(unset).chunk_bytes, size_t(512) << 10);
  const config::Env marks = config::read_env({{"TOPOCOLL_NET_LANE_MARKS", "256,257"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(marks).chunk_bytes, size_t(512) << 10);
  const config::Env told = config::read_env({{"TOPOCOLL_NET_CHUNK_BYTES", "256K"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(told).chunk_bytes, size_t(256) << 10);
}

// Without progress threads the proxy moves a connection's sockets in turn: one socket, as
// NCCL's Socket transport outside cloud NICs, or one per lane mark (each its own path).
TEST(TransportOptions, ThePluginWithoutThreadsUsesOneSocketPerPathUnlessTold) {
  const config::Env unset = config::read_env({});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(unset).sockets_per_conn, 1);
  EXPECT_EQ(TransportOptions::from_env(unset).sockets_per_conn, 4) << "the host backend's threads share them";
  EXPECT_NE(TransportOptions::for_nccl_net_plugin(unset).describe().find("sockets=1 "), std::string::npos);
  const config::Env marks = config::read_env({{"TOPOCOLL_NET_LANE_MARKS", "256,257,258"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(marks).sockets_per_conn, 3);
  const config::Env threads = config::read_env({{"TOPOCOLL_NET_THREADS", "2"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(threads).sockets_per_conn, 4);
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(threads).threads_per_conn, 2);
  const config::Env told = config::read_env({{"TOPOCOLL_NET_SOCKETS_PER_CONN", "4"}});
  EXPECT_TRUE(told.warnings.empty());
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(told).sockets_per_conn, 4);
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(told).threads_per_conn, 0);
  const config::Env told_marks =
      config::read_env({{"TOPOCOLL_NET_SOCKETS_PER_CONN", "2"}, {"TOPOCOLL_NET_LANE_MARKS", "256,257,258"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(told_marks).sockets_per_conn, 2);
}

TEST(TransportOptions, UnsetStallTimeoutIsTheConnectTimeoutForTheHostBackendAndNeverForThePlugin) {
  const config::Env env = config::read_env({{"TOPOCOLL_NET_TIMEOUT_MS", "5000"}});
  EXPECT_EQ(TransportOptions::from_env(env).stall_timeout_ms, 5000);
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(env).stall_timeout_ms, 0);
  const config::Env set = config::read_env({{"TOPOCOLL_NET_STALL_TIMEOUT_MS", "700"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(set).stall_timeout_ms, 700);
}

// An accept with no connection arriving waits as long as NCCL asks (its Socket transport's
// accept has no deadline; NCCL connects lazily, so a peer can come late), whatever
// TOPOCOLL_NET_TIMEOUT_MS; topocoll's engine, whose bootstrap bounds rank skew, gives up then.
TEST(TransportOptions, AnIdleAcceptGivesUpAtTheTimeoutInTheEngineAndNeverInThePlugin) {
  const config::Env env = config::read_env({{"TOPOCOLL_NET_TIMEOUT_MS", "5000"}});
  EXPECT_EQ(TransportOptions::from_env(env).accept_idle_timeout_ms, 5000);
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(env).accept_idle_timeout_ms, 0);
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(env).timeout_ms, 5000) << "connect and handshake stay bounded";
  EXPECT_NE(TransportOptions::for_nccl_net_plugin(env).describe().find("accept_idle_ms=never"), std::string::npos);
}

// The net plugin runs no progress thread unless told (NCCL's proxy moves every byte, as in
// NCCL's own Socket transport); the host backend, whose waiter sleeps, keeps at least one.
TEST(TransportOptions, ThePluginRunsNoProgressThreadUnlessToldAndTheHostBackendAlwaysOne) {
  const config::Env unset = config::read_env({});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(unset).threads_per_conn, 0);
  EXPECT_EQ(TransportOptions::from_env(unset).threads_per_conn, 2);
  const config::Env zero = config::read_env({{"TOPOCOLL_NET_THREADS", "0"}});
  EXPECT_TRUE(zero.warnings.empty());
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(zero).threads_per_conn, 0);
  EXPECT_EQ(TransportOptions::from_env(zero).threads_per_conn, 1) << "a sleeping waiter needs a thread";
  const config::Env two = config::read_env({{"TOPOCOLL_NET_THREADS", "2"}});
  EXPECT_EQ(TransportOptions::for_nccl_net_plugin(two).threads_per_conn, 2);
  TransportOptions sleeping;
  sleeping.threads_per_conn = 0;
  EXPECT_EQ(sleeping.normalized().threads_per_conn, 1);
  EXPECT_NE(TransportOptions::for_nccl_net_plugin(unset).describe().find("threads=0"), std::string::npos);
}

TEST(TransportOptions, NormalizedKeepsTheThreadsIdleRecheckPositive) {
  TransportOptions o;
  EXPECT_EQ(o.idle_poll_ms, 1000);
  o.idle_poll_ms = 0;
  EXPECT_EQ(o.normalized().idle_poll_ms, 1);
}

}  // namespace
}  // namespace topocoll::net
