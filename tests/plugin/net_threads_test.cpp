// The net plugin from two threads at once, as NCCL 2.28 calls it: its proxy service thread
// sets connections up and tears them down (listen, connect, accept, regMr, deregMr, close:
// proxy.cc's proxyService), while its progress thread moves data on the established ones
// (isend, irecv, test: proxyProgress). With runtime connection (NCCL_RUNTIME_CONNECT, the
// default), a collective's new peers are connected while other comms carry traffic. Correct
// bytes here; the ThreadSanitizer build (tools/sanitize.sh tsan) checks the shared state.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/plugin/net_plugin_harness.h"

namespace topocoll::testing {
namespace {

// Both ranks send and receive `rounds` messages of `size` bytes on `comms` (one peer).
int transfer_rounds(const ncclNet_v11_t* net, int rank, const PeerComms& comms, int rounds, size_t size) {
  const int peer = 1 - rank;
  std::vector<uint8_t> out(size), in(size);
  for (int k = 0; k < rounds; ++k) {
    fill_pattern(out, rank, peer, k);
    void* mh = nullptr;
    RANK_REQUIRE(net->regMr(comms.recv[peer], in.data(), in.size(), NCCL_PTR_HOST, &mh) == ncclSuccess);
    void* data = in.data();
    size_t cap = in.size();
    int tag = k;
    void* r = nullptr;
    RANK_REQUIRE(net->irecv(comms.recv[peer], 1, &data, &cap, &tag, &mh, nullptr, &r) == ncclSuccess && r);
    void* s = nullptr;
    RANK_REQUIRE(net->isend(comms.send[peer], out.data(), size, k, nullptr, nullptr, &s) == ncclSuccess && s);
    int got = -1, sent = -1;
    RANK_REQUIRE(wait_request(net, r, &got) == ncclSuccess, "round %d: receive failed", k);
    RANK_REQUIRE(wait_request(net, s, &sent) == ncclSuccess, "round %d: send failed", k);
    RANK_REQUIRE(size_t(got) == size && check_pattern(in, size, peer, rank, k), "round %d: wrong bytes", k);
    RANK_REQUIRE(net->deregMr(comms.recv[peer], mh) == ncclSuccess);
  }
  return 0;
}

// Connections set up, registered and closed `times` times, each with a context of its own
// (NCCL's init per communicator).
int churn_connections(const ncclNet_v11_t* net, int rank, RankMesh& mesh, int times) {
  const int peer = 1 - rank;
  std::vector<uint8_t> buffer(4096);
  for (int t = 0; t < times; ++t) {
    PeerComms extra;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &extra), "connection %d not established", t);
    void* mh = nullptr;
    RANK_REQUIRE(net->regMr(extra.recv[peer], buffer.data(), buffer.size(), NCCL_PTR_HOST, &mh) == ncclSuccess);
    RANK_REQUIRE(net->deregMr(extra.recv[peer], mh) == ncclSuccess);
    close_all(net, &extra);
  }
  return 0;
}

TEST(NetPluginThreads, ConnectionsComeAndGoWhileOthersCarryData) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_NET_SOCKETS_PER_CONN", "2", 1);
    ::setenv("TOPOCOLL_NET_THREADS", "1", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms base;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &base));
    std::atomic<int> progress_result{-1}, service_result{-1};
    std::thread progress([&] { progress_result = transfer_rounds(net, rank, base, 60, (1 << 20) + 5); });
    std::thread service([&] { service_result = churn_connections(net, rank, mesh, 12); });
    progress.join();
    service.join();
    RANK_REQUIRE(progress_result == 0, "the progress thread's transfers failed");
    RANK_REQUIRE(service_result == 0, "the service thread's connections failed");
    // Both ranks done before either closes the connection the other still reads.
    const int peer = 1 - rank;
    RANK_REQUIRE(mesh.send(rank, peer, "x", 1));
    char c;
    RANK_REQUIRE(mesh.recv(peer, rank, &c, 1));
    close_all(net, &base);
    RANK_REQUIRE(logged(NCCL_LOG_WARN).empty(), "unexpected WARN: %s", logged(NCCL_LOG_WARN).front().c_str());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

}  // namespace
}  // namespace topocoll::testing
