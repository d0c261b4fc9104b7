// The net plugin through ncclNetPlugin_v11 (and the older structs) as NCCL drives it: ranks
// are processes on loopback; sizes 0 B to 64 MB, many requests in flight, tags, grouped
// receives, truncation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "tests/plugin/net_plugin_harness.h"

namespace topocoll::testing {
namespace {

// Every rank sends `sizes[k]` bytes with tag k to every other rank, all posted at once, and
// checks every byte it receives.
int exchange_all(int rank, RankMesh& mesh, const std::vector<size_t>& sizes) {
  const ncclNet_v11_t* net = net_v11();
  RANK_REQUIRE(net, "ncclNetPlugin_v11 not found");
  RANK_REQUIRE(std::strcmp(net->name, "topocoll") == 0, "name %s", net->name);
  PeerComms comms;
  RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms), "connections not established");
  const int n = mesh.ranks(), k_count = int(sizes.size());
  std::vector<std::vector<std::vector<uint8_t>>> out(n), in(n);
  std::vector<void*> sends, recvs;
  std::vector<std::tuple<int, int>> recv_ids;
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    out[q].resize(k_count);
    in[q].resize(k_count);
    for (int k = 0; k < k_count; ++k) {
      out[q][k].resize(sizes[k]);
      fill_pattern(out[q][k], rank, q, k);
      in[q][k].assign(sizes[k] + 8, 0);
      void* mh = nullptr;
      RANK_REQUIRE(net->regMr(comms.recv[q], in[q][k].data(), in[q][k].size(), NCCL_PTR_HOST, &mh) == ncclSuccess);
      void* data = in[q][k].data();
      size_t size = in[q][k].size();
      int tag = k;
      void* r = nullptr;
      RANK_REQUIRE(net->irecv(comms.recv[q], 1, &data, &size, &tag, &mh, nullptr, &r) == ncclSuccess && r);
      recvs.push_back(r);
      recv_ids.emplace_back(q, k);
      RANK_REQUIRE(net->deregMr(comms.recv[q], mh) == ncclSuccess);
    }
  }
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    for (int k = 0; k < k_count; ++k) {
      void* r = nullptr;
      RANK_REQUIRE(net->isend(comms.send[q], out[q][k].data(), sizes[k], k, nullptr, nullptr, &r) == ncclSuccess && r);
      sends.push_back(r);
    }
  }
  // Every request tested in turn until all are done, as NCCL's proxy does.
  std::vector<void*> all = recvs;
  all.insert(all.end(), sends.begin(), sends.end());
  std::vector<int> got;
  size_t failed = 0;
  const ncclResult_t res = wait_requests(net, all, &got, 60000, &failed);
  RANK_REQUIRE(res == ncclSuccess, "%s %zu: result %d", failed < recvs.size() ? "receive" : "send",
               failed < recvs.size() ? failed : failed - recvs.size(), int(res));
  for (size_t i = 0; i < recvs.size(); ++i) {
    auto [q, k] = recv_ids[i];
    RANK_REQUIRE(size_t(got[i]) == sizes[k], "receive %d from %d: %d bytes, expected %zu", k, q, got[i], sizes[k]);
    RANK_REQUIRE(check_pattern(in[q][k], sizes[k], q, rank, k), "receive %d from %d: wrong bytes", k, q);
  }
  // Keep every connection open until all ranks have all their data.
  for (int q = 0; q < n; ++q)
    if (q != rank) RANK_REQUIRE(mesh.send(rank, q, "x", 1));
  for (int q = 0; q < n; ++q) {
    char c;
    if (q != rank) RANK_REQUIRE(mesh.recv(q, rank, &c, 1));
  }
  close_all(net, &comms);
  RANK_REQUIRE(logged(NCCL_LOG_WARN).empty(), "unexpected WARN: %s", logged(NCCL_LOG_WARN).front().c_str());
  return 0;
}

TEST(NetPluginV11, TwoRanksZeroBytesTo64MegabytesAllInFlight) {
  const std::vector<size_t> sizes = {0, 1, 7, 4095, 4096, 65537, 1 << 20, (16 << 20) + 3, 64 << 20};
  auto results = run_ranks(2, [&](int rank, RankMesh& mesh) { return exchange_all(rank, mesh, sizes); });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// Ranks, and progress threads per connection ("" = the plugin's default, none).
class NetPluginRanks : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(NetPluginRanks, AllPairsManyRequestsInFlight) {
  const std::vector<size_t> sizes = {0, 1, 1000, 70001, 300000, 0, (1 << 20) + 7, 12};
  const auto [ranks, threads] = GetParam();
  auto results = run_ranks(ranks, [&, threads = threads](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_NET_SOCKETS_PER_CONN", "2", 1);  // keeps 8 ranks light on 2 cores
    if (*threads) ::setenv("TOPOCOLL_NET_THREADS", threads, 1);
    ::setenv("TOPOCOLL_NET_CHUNK_BYTES", "64K", 1);
    return exchange_all(rank, mesh, sizes);
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(Processes, NetPluginRanks,
                         ::testing::Values(std::tuple{3, "1"}, std::tuple{5, ""}, std::tuple{8, ""}));

TEST(NetPluginV11, GroupedReceiveMatchesTagsAndReportsEachSize) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const int peer = 1 - rank;
    const std::vector<size_t> sizes = {5000, 0, 123456, 77};
    const int tags[4] = {40, 41, 42, 43};
    if (rank == 0) {
      ncclNetProperties_v11_t props;
      RANK_REQUIRE(net->getProperties(0, &props) == ncclSuccess);
      // NCCL is told 1 (no shared comms, see getProperties); the transport still carries a
      // group, matching each message to the posted buffer of its tag.
      RANK_REQUIRE(props.maxRecvs == 1, "maxRecvs %d", props.maxRecvs);
      std::vector<std::vector<uint8_t>> in(4, std::vector<uint8_t>(200000));
      void* data[4];
      size_t caps[4];
      int t[4];
      for (int i = 0; i < 4; ++i) data[i] = in[i].data(), caps[i] = in[i].size(), t[i] = tags[i];
      void* r = nullptr;
      RANK_REQUIRE(net->irecv(comms.recv[peer], 4, data, caps, t, nullptr, nullptr, &r) == ncclSuccess && r);
      int got[4] = {-1, -1, -1, -1};
      RANK_REQUIRE(wait_request(net, r, got) == ncclSuccess);
      for (int i = 0; i < 4; ++i) {
        RANK_REQUIRE(size_t(got[i]) == sizes[i], "buffer %d: %d bytes", i, got[i]);
        RANK_REQUIRE(check_pattern(in[i], sizes[i], peer, rank, i), "buffer %d: wrong bytes", i);
      }
      // More than NCCL_NET_MAX_RECVS buffers is refused.
      void* nine[9] = {};
      size_t nine_sizes[9] = {};
      int nine_tags[9] = {};
      void* bad = nullptr;
      RANK_REQUIRE(net->irecv(comms.recv[peer], 9, nine, nine_sizes, nine_tags, nullptr, nullptr, &bad) != ncclSuccess);
    } else {
      // Sent in another order than the receive posted them.
      const int order[4] = {3, 1, 0, 2};
      std::vector<std::vector<uint8_t>> out(4);
      std::vector<void*> reqs;
      for (int i : order) {
        out[i].resize(sizes[i]);
        fill_pattern(out[i], rank, peer, i);
        void* r = nullptr;
        RANK_REQUIRE(net->isend(comms.send[peer], out[i].data(), sizes[i], tags[i], nullptr, nullptr, &r) == ncclSuccess && r);
        reqs.push_back(r);
      }
      for (void* r : reqs) RANK_REQUIRE(wait_request(net, r, nullptr) == ncclSuccess);
    }
    char c = 0;
    RANK_REQUIRE(mesh.send(rank, peer, &c, 1) && mesh.recv(peer, rank, &c, 1));
    close_all(net, &comms);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

TEST(NetPluginV11, SendLargerThanPostedReceiveIsAnErrorNamingBothSizes) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const int peer = 1 - rank;
    std::vector<uint8_t> buf(4096, 1);
    void* r = nullptr;
    if (rank == 0) {
      void* data = buf.data();
      size_t size = 100;
      int tag = 1;
      RANK_REQUIRE(net->irecv(comms.recv[peer], 1, &data, &size, &tag, nullptr, nullptr, &r) == ncclSuccess && r);
      ncclResult_t res = wait_request(net, r, nullptr);
      RANK_REQUIRE(res != ncclSuccess && res != ncclInProgress, "truncated receive returned %d", int(res));
      RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "peer sent 200 bytes"), "no WARN naming the sent size");
      RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "holds only 100 bytes"), "no WARN naming the posted size");
    } else {
      RANK_REQUIRE(net->isend(comms.send[peer], buf.data(), 200, 1, nullptr, nullptr, &r) == ncclSuccess && r);
      RANK_REQUIRE(wait_request(net, r, nullptr) == ncclSuccess);
    }
    char c = 0;
    RANK_REQUIRE(mesh.send(rank, peer, &c, 1) && mesh.recv(peer, rank, &c, 1));
    close_all(net, &comms);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// One transfer on loopback inside one process through an older struct (V = its version:
// v10 adds profiler arguments and a connect config, v9 made sizes size_t).
template <int V, typename Net, typename Props>
int older_version_roundtrip(const char* symbol) {
  const Net* net = static_cast<const Net*>(plugin_symbol(symbol));
  RANK_REQUIRE(net, "%s not exported", symbol);
  RANK_REQUIRE(std::strcmp(net->name, "topocoll") == 0);
  if constexpr (V >= 10) {
    RANK_REQUIRE(net->init(test_logger, nullptr) == ncclSuccess);
  } else {
    RANK_REQUIRE(net->init(test_logger) == ncclSuccess);
  }
  int ndev = 0;
  RANK_REQUIRE(net->devices(&ndev) == ncclSuccess && ndev >= 1);
  Props props;
  std::memset(&props, 0xab, sizeof props);
  RANK_REQUIRE(net->getProperties(0, &props) == ncclSuccess);
  RANK_REQUIRE(props.ptrSupport == NCCL_PTR_HOST && props.name && props.speed > 0 && props.maxRecvs >= 1,
               "%s: properties", symbol);
  RANK_REQUIRE(props.netDeviceType == NCCL_NET_DEVICE_HOST);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *send = nullptr, *recv = nullptr;
  RANK_REQUIRE(net->listen(0, handle, &listen) == ncclSuccess);
  for (int i = 0; i < 1000000 && !(send && recv); ++i) {
    if constexpr (V >= 10) {
      if (!send) RANK_REQUIRE(net->connect(0, nullptr, handle, &send, nullptr) == ncclSuccess);
    } else {
      if (!send) RANK_REQUIRE(net->connect(0, handle, &send, nullptr) == ncclSuccess);
    }
    if (!recv) RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess);
  }
  RANK_REQUIRE(send && recv);
  std::vector<uint8_t> out(300000), in(300000);
  fill_pattern(out, 0, 0, V);
  void *rs = nullptr, *rr = nullptr;
  void* data = in.data();
  int tag = V;
  if constexpr (V >= 10) {
    size_t size = in.size();
    RANK_REQUIRE(net->irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, &rr) == ncclSuccess);
    RANK_REQUIRE(net->isend(send, out.data(), out.size(), V, nullptr, nullptr, &rs) == ncclSuccess);
  } else if constexpr (V == 9) {
    size_t size = in.size();
    RANK_REQUIRE(net->irecv(recv, 1, &data, &size, &tag, nullptr, &rr) == ncclSuccess);
    RANK_REQUIRE(net->isend(send, out.data(), out.size(), V, nullptr, &rs) == ncclSuccess);
  } else {
    int size = int(in.size());
    RANK_REQUIRE(net->irecv(recv, 1, &data, &size, &tag, nullptr, &rr) == ncclSuccess);
    RANK_REQUIRE(net->isend(send, out.data(), int(out.size()), V, nullptr, &rs) == ncclSuccess);
  }
  RANK_REQUIRE(rs && rr);
  int got = -1;
  const ncclNet_v11_t* v11 = net_v11();  // test() has one signature in every version
  RANK_REQUIRE(wait_request(v11, rr, &got) == ncclSuccess && got == int(out.size()), "%s: got %d", symbol, got);
  RANK_REQUIRE(wait_request(v11, rs, nullptr) == ncclSuccess);
  RANK_REQUIRE(in == out, "%s: wrong bytes", symbol);
  RANK_REQUIRE(net->closeSend(send) == ncclSuccess);
  RANK_REQUIRE(net->closeRecv(recv) == ncclSuccess);
  RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
  return 0;
}

TEST(NetPluginOlderVersions, EachStructMovesDataOnLoopback) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    if (older_version_roundtrip<10, ncclNet_v10_t, ncclNetProperties_v10_t>("ncclNetPlugin_v10")) return 1;
    if (older_version_roundtrip<9, ncclNet_v9_t, ncclNetProperties_v9_t>("ncclNetPlugin_v9")) return 1;
    if (older_version_roundtrip<8, ncclNet_v8_t, ncclNetProperties_v8_t>("ncclNetPlugin_v8")) return 1;
    if (older_version_roundtrip<7, ncclNet_v7_t, ncclNetProperties_v7_t>("ncclNetPlugin_v7")) return 1;
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

}  // namespace
}  // namespace topocoll::testing
