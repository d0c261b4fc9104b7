// What the net plugin does with bad input and vanishing peers: an error returned to NCCL with
// a WARN naming the problem, never a hang (every rank runs under a watchdog alarm).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <vector>
#include <thread>
#include <chrono>

#include "net/socket_transport.h"
#include "tests/plugin/net_plugin_harness.h"

namespace topocoll::testing {
namespace {

TEST(NetPluginErrors, ForeignHandleIsRejectedWithAWarn) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char garbage[NCCL_NET_HANDLE_MAXSIZE];
    std::memset(garbage, 0x42, sizeof garbage);
    void* send = nullptr;
    ncclResult_t r = net->connect(ctx, 0, garbage, &send, nullptr);
    RANK_REQUIRE(r != ncclSuccess && send == nullptr, "connect with a foreign handle returned %d", int(r));
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "foreign or corrupt connection handle"), "no WARN");
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

TEST(NetPluginErrors, HandleOfAnotherProtocolVersionIsRejected) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
    net::Handle h;
    std::memcpy(&h, handle, sizeof h);
    h.version = uint16_t(net::kProtocolVersion + 1);  // a peer running another release
    std::memcpy(handle, &h, sizeof h);
    void* send = nullptr;
    ncclResult_t r = net->connect(ctx, 0, handle, &send, nullptr);
    RANK_REQUIRE(r != ncclSuccess && send == nullptr, "connect returned %d", int(r));
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "protocol version"), "no WARN naming the version");
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

TEST(NetPluginErrors, CudaMemoryRegistrationIsRefusedDmaBufAbsentHostIsANoOp) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const int peer = 1 - rank;
    char buffer[64];
    void* mh = nullptr;
    RANK_REQUIRE(net->regMr(comms.send[peer], buffer, sizeof buffer, NCCL_PTR_CUDA, &mh) != ncclSuccess);
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "NCCL_PTR_HOST only"), "no WARN for a CUDA pointer");
    // No DMA-BUF entry, as NCCL's Socket transport: NCCL then skips its DMA-BUF probe
    // (init.cc dmaBufSupported) instead of logging "DMA-BUF is available" for a host transport.
    RANK_REQUIRE(net->regMrDmaBuf == nullptr);
    RANK_REQUIRE(net->regMr(comms.send[peer], buffer, sizeof buffer, NCCL_PTR_HOST, &mh) == ncclSuccess && mh);
    RANK_REQUIRE(net->deregMr(comms.send[peer], mh) == ncclSuccess);
    void* flush = reinterpret_cast<void*>(1);
    int size = 64;
    void* data = buffer;
    RANK_REQUIRE(net->iflush(comms.recv[peer], 1, &data, &size, &mh, &flush) == ncclSuccess && flush == nullptr);
    // As NCCL's Socket transport: no device offload, no NIC fusion (NCCL 2.28 calls
    // irecvConsumed after every received step whenever it is set).
    RANK_REQUIRE(net->getDeviceMr == nullptr && net->irecvConsumed == nullptr && net->makeVDevice == nullptr);
    char c = 0;
    RANK_REQUIRE(mesh.send(rank, peer, &c, 1) && mesh.recv(peer, rank, &c, 1));
    close_all(net, &comms);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// The sender is killed with 64 MB queued; the receiver (which only starts reading after the
// sender is gone, so far less than 64 MB can have been buffered) gets an error, not a hang.
TEST(NetPluginErrors, SenderKilledMidTransferFailsTheReceive) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const size_t size = 64 << 20;
    std::vector<uint8_t> buffer(size, 7);
    void* r = nullptr;
    if (rank == 0) {
      RANK_REQUIRE(net->isend(comms.send[1], buffer.data(), size, 0, nullptr, nullptr, &r) == ncclSuccess && r);
      int done = 0;
      RANK_REQUIRE(net->test(r, &done, nullptr) == ncclSuccess);
      RANK_REQUIRE(mesh.send(0, 1, "s", 1));
      ::raise(SIGKILL);
    }
    char c;
    RANK_REQUIRE(mesh.recv(0, 1, &c, 1), "sender never started");
    RANK_REQUIRE(mesh.wait_for_exit(0, 1), "sender did not die");
    void* data = buffer.data();
    size_t cap = size;
    int tag = 0;
    RANK_REQUIRE(net->irecv(comms.recv[0], 1, &data, &cap, &tag, nullptr, nullptr, &r) == ncclSuccess && r);
    ncclResult_t res = wait_request(net, r, nullptr);
    RANK_REQUIRE(res == ncclRemoteError, "receive from a dead sender returned %d", int(res));
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "peer closed"), "no WARN naming the closed peer");
    close_all(net, &comms);
    return 0;
  });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].signal, SIGKILL) << describe(results);
  EXPECT_TRUE(results[1].exited && results[1].exit_code == 0) << describe(results);
}

// The receiver dies while 64 MB are being sent to it: the send fails instead of hanging.
TEST(NetPluginErrors, ReceiverKilledMidTransferFailsTheSend) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const size_t size = 64 << 20;
    std::vector<uint8_t> buffer(size, 7);
    void* r = nullptr;
    if (rank == 1) {
      void* data = buffer.data();
      size_t cap = size;
      int tag = 0;
      RANK_REQUIRE(net->irecv(comms.recv[0], 1, &data, &cap, &tag, nullptr, nullptr, &r) == ncclSuccess && r);
      char c;
      RANK_REQUIRE(mesh.recv(0, 1, &c, 1), "sender never started");
      int done = 0;
      RANK_REQUIRE(net->test(r, &done, nullptr) == ncclSuccess);
      ::raise(SIGKILL);
    }
    RANK_REQUIRE(net->isend(comms.send[1], buffer.data(), size, 0, nullptr, nullptr, &r) == ncclSuccess && r);
    RANK_REQUIRE(mesh.send(0, 1, "s", 1));
    ncclResult_t res = wait_request(net, r, nullptr);
    RANK_REQUIRE(res == ncclRemoteError, "send to a dead receiver returned %d", int(res));
    RANK_REQUIRE(!logged(NCCL_LOG_WARN).empty(), "no WARN");
    close_all(net, &comms);
    return 0;
  });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].signal, SIGKILL) << describe(results);
  EXPECT_TRUE(results[0].exited && results[0].exit_code == 0) << describe(results);
}

// NCCL connects lazily, at a pair's first collective: a rank whose neighbours both arrived
// accepts while a third still waits for another rank (rank 0 preprocessing behind a
// barrier). NCCL's Socket transport's accept waits as long as that takes (net_socket.cc has
// no deadline there), so the plugin's does too: past TOPOCOLL_NET_TIMEOUT_MS the late peer
// still connects, and the accept, not having failed, takes it. The stray-free idle wait is
// unbounded; PyTorch's watchdog ends a job whose peer never comes.
TEST(NetPluginErrors, AnAcceptWaitsForALatePeerPastTheConnectTimeout) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    ::setenv("TOPOCOLL_NET_TIMEOUT_MS", "200", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
    void* recv = nullptr;
    const auto late = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
    while (std::chrono::steady_clock::now() < late) {
      const ncclResult_t r = net->accept(listen, &recv, nullptr);
      RANK_REQUIRE(r == ncclSuccess && !recv, "accept with no peer yet returned %d", int(r));
    }
    void* send = nullptr;
    for (int i = 0; i < 100000 && (!send || !recv); ++i) {
      if (!send) RANK_REQUIRE(net->connect(ctx, 0, handle, &send, nullptr) == ncclSuccess);
      if (!recv) RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess);
    }
    RANK_REQUIRE(send && recv, "the late peer's connection was not made (send %p recv %p)", send, recv);
    RANK_REQUIRE(logged(NCCL_LOG_WARN).empty(), "a WARN: %s", logged(NCCL_LOG_WARN).front().c_str());
    RANK_REQUIRE(net->closeSend(send) == ncclSuccess);
    RANK_REQUIRE(net->closeRecv(recv) == ncclSuccess);
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// NCCL's bootstrap closes its ring's comms and listener without looking (bootstrap.cc
// bootstrapClose, NCCL_OOB_NET_ENABLE=1): null when the init failed or was aborted before
// they were made. NCCL's Socket transport takes null as nothing to close; an error here would
// end NCCL's teardown early (commFree's NCCLCHECK), leaking the rest and the plugin's context.
TEST(NetPluginErrors, ClosingNullIsNothingToClose) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    RANK_REQUIRE(net->closeSend(nullptr) == ncclSuccess);
    RANK_REQUIRE(net->closeRecv(nullptr) == ncclSuccess);
    RANK_REQUIRE(net->closeListen(nullptr) == ncclSuccess);
    RANK_REQUIRE(logged(NCCL_LOG_WARN).empty(), "a WARN: %s", logged(NCCL_LOG_WARN).front().c_str());
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

TEST(NetPluginErrors, BadDeviceAndForeignPointersAreErrors) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    int ndev = 0;
    RANK_REQUIRE(net->devices(&ndev) == ncclSuccess);
    ncclNetProperties_v11_t props;
    RANK_REQUIRE(net->getProperties(ndev, &props) != ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, -1, handle, &listen) != ncclSuccess && !listen);
    long not_a_comm[8] = {};
    void* r = nullptr;
    RANK_REQUIRE(net->isend(not_a_comm, handle, 1, 0, nullptr, nullptr, &r) != ncclSuccess && !r);
    RANK_REQUIRE(net->closeSend(not_a_comm) != ncclSuccess);
    RANK_REQUIRE(net->closeListen(not_a_comm) != ncclSuccess);
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "is not a topocoll"), "no WARN naming the bad pointer");
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}


// What NCCL never does on purpose but a plugin must survive: the
// wrong object as a request, a comm closed twice, a request tested after its comm closed,
// sizes the transport cannot carry. Each is ncclInvalidArgument with a WARN, and the ASan
// build sees no use-after-free.
TEST(NetPluginErrors, MisuseThroughTheCAbiIsAnErrorNotACrash) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
    void* send = nullptr;
    void* recv = nullptr;
    for (int i = 0; i < 100000 && !send; ++i) RANK_REQUIRE(net->connect(ctx, 0, handle, &send, nullptr) == ncclSuccess);
    RANK_REQUIRE(send, "no connection made");
    for (int i = 0; i < 100000 && !recv; ++i)
      RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess);
    RANK_REQUIRE(recv, "no connection accepted");

    int done = 0;
    RANK_REQUIRE(net->test(send, &done, nullptr) == ncclInvalidArgument && !done, "a comm passed as a request");
    long garbage[16];
    std::memset(garbage, 0x6b, sizeof garbage);
    RANK_REQUIRE(net->test(garbage, &done, nullptr) == ncclInvalidArgument, "garbage passed as a request");
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "is not a pending topocoll request"), "no WARN");

    char small[16] = {};
    void* request = nullptr;
    ncclResult_t r = net->isend(send, small, size_t(1) << 62, 0, nullptr, nullptr, &request);
    RANK_REQUIRE(r == ncclInvalidArgument && !request, "isend of 2^62 bytes returned %d", int(r));
    r = net->isend(send, small, SIZE_MAX, 0, nullptr, nullptr, &request);
    RANK_REQUIRE(r == ncclInvalidArgument && !request, "isend of SIZE_MAX bytes returned %d", int(r));
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "a message carries at most"), "no WARN naming the limit");
    void* data[1] = {small};
    size_t sizes[1] = {SIZE_MAX};
    int tags[1] = {0};
    r = net->irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &request);
    RANK_REQUIRE(r == ncclInvalidArgument && !request, "irecv of SIZE_MAX bytes returned %d", int(r));

    // A pending receive outlives its comm only as an invalid pointer.
    sizes[0] = sizeof small;
    RANK_REQUIRE(net->irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &request) == ncclSuccess && request);
    RANK_REQUIRE(net->closeRecv(recv) == ncclSuccess);
    RANK_REQUIRE(net->test(request, &done, nullptr) == ncclInvalidArgument, "test after closeRecv");
    RANK_REQUIRE(net->closeRecv(recv) == ncclInvalidArgument, "closeRecv twice");
    RANK_REQUIRE(net->closeSend(send) == ncclSuccess);
    RANK_REQUIRE(net->closeSend(send) == ncclInvalidArgument, "closeSend twice");
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->closeListen(listen) == ncclInvalidArgument, "closeListen twice");
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}


// A listener whose backlog is full and which never accepts: a connect to it stays under way
// (its SYN is dropped), as to a peer that is slow or gone. target() is a plugin handle
// naming it, made from one of the plugin's own handles so that only the address differs.
class UnacceptingListener {
 public:
  explicit UnacceptingListener(const char* plugin_handle) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(listener_, 0) == 0;
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    for (int i = 0; i < 8; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      fillers_.push_back(fd);
    }
    net::Handle h;
    std::memcpy(&h, plugin_handle, sizeof h);
    h.family = AF_INET;
    h.port = ntohs(a.sin_port);
    std::memset(h.address, 0, sizeof h.address);
    std::memcpy(h.address, &a.sin_addr, 4);
    std::memcpy(target_, &h, sizeof h);
  }
  ~UnacceptingListener() {
    for (int fd : fillers_) ::close(fd);
    ::close(listener_);
  }
  bool ok() const { return ok_; }
  // A fresh copy each time: NCCL hands connect() one handle per connection.
  std::vector<char> target() const { return std::vector<char>(target_, target_ + sizeof target_); }

 private:
  int listener_ = -1;
  bool ok_ = false;
  std::vector<int> fillers_;
  char target_[NCCL_NET_HANDLE_MAXSIZE] = {};
};

size_t open_descriptors() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;  // the directory stream's own
}

// connect() keeps an attempt's stage in the handle's unused bytes (NCCL calls it again with
// the same handle). A handle naming another listener but carrying that stage (copied, or
// forged from a peer's) starts its own attempt: it must not take over the first one (here
// one that stays under way, to a listener that never accepts) and so connect to a peer
// other than the one it names.
TEST(NetPluginErrors, AHandleCarryingAnotherAttemptsStageConnectsWhereItNames) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
    UnacceptingListener full(handle);
    RANK_REQUIRE(full.ok());
    std::vector<char> stuck = full.target();
    void* never = nullptr;
    RANK_REQUIRE(net->connect(ctx, 0, stuck.data(), &never, nullptr) == ncclSuccess);
    RANK_REQUIRE(!never, "a connect to a full backlog completed");
    std::memcpy(handle + 64, stuck.data() + 64, sizeof handle - 64);  // its stage
    void* send = nullptr;
    void* recv = nullptr;
    for (int i = 0; i < 100000 && (!send || !recv); ++i) {
      if (!send) RANK_REQUIRE(net->connect(ctx, 0, handle, &send, nullptr) == ncclSuccess);
      if (!recv) RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess);
    }
    RANK_REQUIRE(send && recv, "no connection reached the listener the handle names (send %p recv %p)", send, recv);
    RANK_REQUIRE(net->closeSend(send) == ncclSuccess);
    RANK_REQUIRE(net->closeRecv(recv) == ncclSuccess);
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);  // closes the attempt still under way
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// connect() never blocks. Against a listener whose backlog is full (it
// never accepts), each call returns at once without a comm, and the attempt fails with a
// WARN once TOPOCOLL_NET_TIMEOUT_MS has passed.
TEST(NetPluginErrors, ConnectToAFullBacklogNeverBlocks) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    ::setenv("TOPOCOLL_NET_TIMEOUT_MS", "1500", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void* ctx = nullptr;
    RANK_REQUIRE(net->init(&ctx, 7, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess);
    UnacceptingListener full(handle);
    RANK_REQUIRE(full.ok());
    std::vector<char> target = full.target();
    void* send = nullptr;
    ncclResult_t r = ncclSuccess;
    const auto started = std::chrono::steady_clock::now();
    auto longest = std::chrono::steady_clock::duration::zero();
    while (r == ncclSuccess && !send && std::chrono::steady_clock::now() - started < std::chrono::seconds(10)) {
      const auto before = std::chrono::steady_clock::now();
      r = net->connect(ctx, 0, target.data(), &send, nullptr);
      longest = std::max(longest, std::chrono::steady_clock::now() - before);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    RANK_REQUIRE(r == ncclRemoteError && !send, "connect returned %d", int(r));
    RANK_REQUIRE(longest < std::chrono::milliseconds(200), "one connect() call took %lld ms",
                 (long long)std::chrono::duration_cast<std::chrono::milliseconds>(longest).count());
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "did not complete within 1500 ms"), "no WARN naming the timeout");
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->finalize(ctx) == ncclSuccess);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// A communicator aborted while a connection is being set up: NCCL stops calling connect()
// (it keeps the attempt only in the handle) and finalizes the context once its proxy has
// stopped. finalize closes that context's attempts, and only those; a handle still naming
// a closed attempt starts a new one.
TEST(NetPluginErrors, FinalizeClosesTheConnectsItsContextLeftUnderWay) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void *aborted = nullptr, *alive = nullptr;
    RANK_REQUIRE(net->init(&aborted, 1, nullptr, test_logger, nullptr) == ncclSuccess);
    RANK_REQUIRE(net->init(&alive, 2, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    const size_t without_listen = open_descriptors();
    RANK_REQUIRE(net->listen(alive, 0, handle, &listen) == ncclSuccess);
    const size_t listen_descriptors = open_descriptors() - without_listen;
    UnacceptingListener slow(handle);
    RANK_REQUIRE(slow.ok());

    const size_t before = open_descriptors();
    std::vector<char> first = slow.target(), second = slow.target(), third = slow.target();
    void* send = nullptr;
    RANK_REQUIRE(net->connect(aborted, 0, first.data(), &send, nullptr) == ncclSuccess && !send);
    RANK_REQUIRE(net->connect(aborted, 0, second.data(), &send, nullptr) == ncclSuccess && !send);
    const size_t with_aborted = open_descriptors();
    RANK_REQUIRE(with_aborted > before, "a connect under way holds no socket (%zu -> %zu)", before, with_aborted);
    RANK_REQUIRE(net->connect(alive, 0, third.data(), &send, nullptr) == ncclSuccess && !send);
    const size_t with_both = open_descriptors();

    RANK_REQUIRE(net->finalize(aborted) == ncclSuccess);
    RANK_REQUIRE(open_descriptors() == with_both - (with_aborted - before),
                 "finalize left descriptors open: %zu before, %zu with both contexts' connects, %zu after",
                 before, with_both, open_descriptors());
    RANK_REQUIRE(logged_contains(NCCL_LOG_INFO, "finalize closed 2 connection attempt(s)"), "no INFO line");
    // The other context's attempt is untouched and still driven.
    RANK_REQUIRE(net->connect(alive, 0, third.data(), &send, nullptr) == ncclSuccess && !send);
    // A handle naming a closed attempt starts afresh rather than touching freed memory.
    RANK_REQUIRE(net->connect(alive, 0, first.data(), &send, nullptr) == ncclSuccess && !send);
    RANK_REQUIRE(net->closeListen(listen) == ncclSuccess);
    RANK_REQUIRE(net->finalize(alive) == ncclSuccess);
    RANK_REQUIRE(open_descriptors() == before - listen_descriptors,
                 "the second finalize left descriptors open (%zu before, %zu after)", before, open_descriptors());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// NCCL closes a listener once its connection is accepted (transport/net.cc
// recvProxyConnect); one whose peer never connected before the communicator was aborted is
// never closed by NCCL, and v11's finalize of that context closes it. Listeners of another
// context, and those NCCL closed itself, are untouched.
TEST(NetPluginErrors, FinalizeClosesTheListenersItsContextLeftOpen) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    void *aborted = nullptr, *alive = nullptr;
    RANK_REQUIRE(net->init(&aborted, 1, nullptr, test_logger, nullptr) == ncclSuccess);
    RANK_REQUIRE(net->init(&alive, 2, nullptr, test_logger, nullptr) == ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void *left_open = nullptr, *closed = nullptr, *other = nullptr;
    const size_t before = open_descriptors();
    RANK_REQUIRE(net->listen(aborted, 0, handle, &left_open) == ncclSuccess);
    RANK_REQUIRE(net->listen(aborted, 0, handle, &closed) == ncclSuccess);
    const size_t two = open_descriptors();
    RANK_REQUIRE(two > before, "a listener holds no socket");
    RANK_REQUIRE(net->closeListen(closed) == ncclSuccess);
    const size_t one = open_descriptors();
    RANK_REQUIRE(net->listen(alive, 0, handle, &other) == ncclSuccess);
    const size_t with_other = open_descriptors();
    RANK_REQUIRE(net->finalize(aborted) == ncclSuccess);
    RANK_REQUIRE(open_descriptors() == with_other - (one - before),
                 "finalize left the listener open: %zu before, %zu with it, %zu after", before, with_other,
                 open_descriptors());
    RANK_REQUIRE(logged_contains(NCCL_LOG_INFO, "0 connection attempt(s) and 1 listener(s)"), "no INFO line");
    // The other context's listener is still live, and closing it is still NCCL's to do.
    RANK_REQUIRE(net->closeListen(other) == ncclSuccess);
    RANK_REQUIRE(net->finalize(alive) == ncclSuccess);
    RANK_REQUIRE(open_descriptors() == before, "descriptors left open: %zu before, %zu after", before,
                 open_descriptors());
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// Fault matrix, net plugin harness: a receiver stopped (SIGSTOP) mid-transfer. Its sockets
// stay open, so only the stall timeout can tell: with TOPOCOLL_NET_STALL_TIMEOUT_MS set the
// send fails at it with a WARN naming the peer's address, and the sender then ends the
// stopped rank.
TEST(NetPluginErrors, ReceiverStoppedMidTransferFailsTheSendAtTheStallTimeout) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_NET_STALL_TIMEOUT_MS", "1500", 1);
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const size_t size = 64 << 20;
    std::vector<uint8_t> buffer(size, 7);
    void* r = nullptr;
    if (rank == 1) {
      const pid_t me = ::getpid();
      RANK_REQUIRE(mesh.send(1, 0, &me, sizeof me));
      ::raise(SIGSTOP);
      return 0;
    }
    pid_t stopped = 0;
    RANK_REQUIRE(mesh.recv(1, 0, &stopped, sizeof stopped), "receiver never started");
    RANK_REQUIRE(net->isend(comms.send[1], buffer.data(), size, 0, nullptr, nullptr, &r) == ncclSuccess && r);
    const auto started = std::chrono::steady_clock::now();
    ncclResult_t res = wait_request(net, r, nullptr, 20000);
    const auto took = std::chrono::steady_clock::now() - started;
    ::kill(stopped, SIGKILL);
    RANK_REQUIRE(res == ncclRemoteError, "send to a stopped receiver returned %d", int(res));
    RANK_REQUIRE(took < std::chrono::seconds(6), "the send failed only after %lld ms",
                 (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
    RANK_REQUIRE(logged_contains(NCCL_LOG_WARN, "the peer stopped reading"), "no WARN naming the stall");
    close_all(net, &comms);
    return 0;
  });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].signal, SIGKILL) << describe(results);
  EXPECT_TRUE(results[0].exited && results[0].exit_code == 0) << describe(results);
}

// NCCL's send proxy isends as soon as the GPU's data is ready; the receiver's irecv comes when
// that rank reaches the collective, which may be long after (a rank writing a checkpoint).
// NCCL's own transports wait; so does the plugin by default, well past TOPOCOLL_NET_TIMEOUT_MS
// (connect and accept only), and the message arrives intact.
TEST(NetPluginErrors, AReceiverLatePastEveryTimeoutStillGetsTheMessage) {
  auto results = run_ranks(2, [](int rank, RankMesh& mesh) {
    ::setenv("TOPOCOLL_NET_TIMEOUT_MS", "300", 1);
    ::unsetenv("TOPOCOLL_NET_STALL_TIMEOUT_MS");
    const ncclNet_v11_t* net = net_v11();
    RANK_REQUIRE(net);
    PeerComms comms;
    RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms));
    const size_t size = 64 << 20;  // far more than the socket buffers hold
    std::vector<uint8_t> buffer(size);
    for (size_t i = 0; i < size; ++i) buffer[i] = uint8_t(i * 7 + 3);
    void* r = nullptr;
    if (rank == 0) {
      RANK_REQUIRE(net->isend(comms.send[1], buffer.data(), size, 0, nullptr, nullptr, &r) == ncclSuccess && r);
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      std::fill(buffer.begin(), buffer.end(), uint8_t(0));
      void* data = buffer.data();
      size_t cap = size;
      int tag = 0;
      RANK_REQUIRE(net->irecv(comms.recv[0], 1, &data, &cap, &tag, nullptr, nullptr, &r) == ncclSuccess);
    }
    RANK_REQUIRE(r);
    int got = -1;
    RANK_REQUIRE(wait_request(net, r, &got, 30000) == ncclSuccess, "the late transfer failed");
    if (rank == 1) {
      RANK_REQUIRE(size_t(got) == size, "received %d bytes", got);
      size_t wrong = 0;
      for (size_t i = 0; i < size; ++i) wrong += buffer[i] != uint8_t(i * 7 + 3);
      RANK_REQUIRE(wrong == 0, "%zu bytes wrong", wrong);
    }
    RANK_REQUIRE(!logged_contains(NCCL_LOG_WARN, "stopped reading"), "a WARN about a stall");
    close_all(net, &comms);
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

}  // namespace
}  // namespace topocoll::testing
