// The emulated NCCL calls a net plugin from the threads NCCL 2.28.9 calls it from (a spy
// plugin in front of topocoll's records every call's thread): init, and finalize once the
// proxy has stopped, on the thread that makes and destroys the communicator (init.cc);
// connection setup and teardown on the proxy's service thread (proxy.cc ncclProxyService);
// data on its progress thread (ncclProxyProgress). Each communicator has a proxy and a
// context of its own, unless its parent was made with splitShare=1 (the parent's config
// decides, init.cc ncclCommInitChildComm): then the split shares both, and the context is
// finalized with the last of them.
#include <nccl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/emu/forked_ranks.h"

namespace {

using topocoll::emu::testing::run_ranks;

struct Call {
  std::string name;
  long thread = 0;
  std::string ctx;
};

std::vector<Call> read_calls(const std::string& path) {
  std::vector<Call> calls;
  std::ifstream in(path);
  Call c;
  while (in >> c.name >> c.thread >> c.ctx) calls.push_back(c);
  return calls;
}

const std::set<std::string> kServiceCalls = {"listen", "connect", "accept", "closeListen",
                                             "regMr",  "deregMr", "closeSend", "closeRecv"};
const std::set<std::string> kProgressCalls = {"isend", "irecv", "test"};

// Element i of rank r's input: small integers, exact in float.
float input(int rank, std::size_t i) { return float(rank + int(i % 7)); }

std::string log_path(const char* test, int rank) {
  return std::string(TOPOCOLL_BINARY_DIR) + "/net_proxy_threads_" + test + "_" + std::to_string(getpid()) +
         "_rank" + std::to_string(rank) + ".log";
}

// Both ranks: an allreduce on the communicator (one LL-sized, one SIMPLE-sized message each
// way), its split, an allreduce there, the split destroyed, then the parent; `calls` gets
// what the plugin saw, `main_thread` the thread that made all that.
bool run_parent_and_split(int rank, int nranks, const ncclUniqueId& id, int split_share, const char* test,
                          long* main_thread, std::vector<Call>* calls) {
  const std::string log = log_path(test, rank);
  ::setenv("NCCL_NET_PLUGIN", TOPOCOLL_SPY_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_INNER", TOPOCOLL_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_LOG", log.c_str(), 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  ::setenv("NCCL_TUNER_PLUGIN", "none", 1);
  *main_thread = long(syscall(SYS_gettid));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.splitShare = split_share;
  ncclComm_t comm = nullptr, child = nullptr;
  CHECK_OR_FAIL(ncclCommInitRankConfig(&comm, nranks, id, rank, &config) == ncclSuccess, "init");
  const auto allreduce = [&](ncclComm_t c, std::size_t count) {
    std::vector<float> in(count), out(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = input(rank, i);
    if (ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, c, nullptr) != ncclSuccess) return false;
    for (std::size_t i = 0; i < count; ++i)
      if (out[i] != input(0, i) + input(1, i)) return false;
    return true;
  };
  CHECK_OR_FAIL(allreduce(comm, 1000) && allreduce(comm, 300000), "allreduce on the parent");
  CHECK_OR_FAIL(ncclCommSplit(comm, 0, nranks - 1 - rank, &child, nullptr) == ncclSuccess && child, "split");
  CHECK_OR_FAIL(allreduce(child, 1000) && allreduce(child, 300000), "allreduce on the split");
  CHECK_OR_FAIL(ncclCommDestroy(child) == ncclSuccess, "destroy the split");
  CHECK_OR_FAIL(ncclCommDestroy(comm) == ncclSuccess, "destroy the parent");
  *calls = read_calls(log);
  std::remove(log.c_str());
  return true;
}


// The threads the service and the progress calls came from, each a set.
void threads_of(const std::vector<Call>& calls, std::set<long>* service, std::set<long>* progress) {
  for (const Call& c : calls) {
    if (kServiceCalls.count(c.name)) service->insert(c.thread);
    if (kProgressCalls.count(c.name)) progress->insert(c.thread);
  }
}

bool split_shares_the_proxy(int rank, int n, const ncclUniqueId& id) {
  long main_thread = 0;
  std::vector<Call> calls;
  if (!run_parent_and_split(rank, n, id, 1, "shared", &main_thread, &calls)) return false;
  std::vector<Call> inits, finalizes;
  for (const Call& c : calls) {
    if (c.name == "init") inits.push_back(c);
    if (c.name == "finalize") finalizes.push_back(c);
  }
  CHECK_OR_FAIL(inits.size() == 1, "%zu inits: the split must take the parent's context", inits.size());
  CHECK_OR_FAIL(finalizes.size() == 1 && finalizes[0].ctx == inits[0].ctx, "one finalize, of the one context");
  CHECK_OR_FAIL(calls.back().name == "finalize", "finalize last, once the proxy is gone (last: %s)",
                calls.back().name.c_str());
  CHECK_OR_FAIL(inits[0].thread == main_thread && finalizes[0].thread == main_thread,
                "init and finalize on the caller's thread");
  std::set<long> service, progress;
  threads_of(calls, &service, &progress);
  CHECK_OR_FAIL(service.size() == 1 && progress.size() == 1, "%zu service and %zu progress threads, not 1 and 1",
                service.size(), progress.size());
  CHECK_OR_FAIL(*service.begin() != main_thread && *progress.begin() != main_thread &&
                    *service.begin() != *progress.begin(),
                "setup, data and the caller on three threads");
  for (const Call& c : calls)
    if (c.name == "listen" || c.name == "connect")
      CHECK_OR_FAIL(c.ctx == inits[0].ctx, "%s with another context", c.name.c_str());
  return true;
}
TEST(EmulatedNetProxyThreads, ASplitOfASharingParentSharesItsContextAndProxy) {
  EXPECT_TRUE(run_ranks(2, split_shares_the_proxy));
}

bool split_has_its_own_proxy(int rank, int n, const ncclUniqueId& id) {
  long main_thread = 0;
  std::vector<Call> calls;
  // NCCL_CONFIG_UNDEF_INT: no sharing unless NCCL_COMM_SPLIT_SHARE_RESOURCES says so.
  ::unsetenv("NCCL_COMM_SPLIT_SHARE_RESOURCES");
  if (!run_parent_and_split(rank, n, id, NCCL_CONFIG_UNDEF_INT, "own", &main_thread, &calls)) return false;
  std::vector<std::string> init_ctx, finalize_ctx;
  std::map<std::string, std::set<long>> service_by_ctx;
  for (const Call& c : calls) {
    if (c.name == "init") init_ctx.push_back(c.ctx);
    if (c.name == "finalize") finalize_ctx.push_back(c.ctx);
    if (c.name == "init" || c.name == "finalize")
      CHECK_OR_FAIL(c.thread == main_thread, "%s on another thread than the caller's", c.name.c_str());
    if (c.name == "listen" || c.name == "connect") service_by_ctx[c.ctx].insert(c.thread);
  }
  CHECK_OR_FAIL(init_ctx.size() == 2 && init_ctx[0] != init_ctx[1], "%zu inits, not one per communicator",
                init_ctx.size());
  // The split is destroyed first: its context (the second) is finalized first.
  CHECK_OR_FAIL(finalize_ctx == (std::vector<std::string>{init_ctx[1], init_ctx[0]}),
                "finalize of each context, the split's first");
  CHECK_OR_FAIL(service_by_ctx.size() == 2, "listen/connect on %zu contexts, not 2", service_by_ctx.size());
  std::set<long> service, progress;
  threads_of(calls, &service, &progress);
  CHECK_OR_FAIL(service.size() == 2 && progress.size() == 2, "%zu service and %zu progress threads, not 2 and 2",
                service.size(), progress.size());
  for (long t : service) CHECK_OR_FAIL(!progress.count(t) && t != main_thread, "a thread doing both");
  const auto& a = service_by_ctx.begin()->second;
  const auto& b = service_by_ctx.rbegin()->second;
  CHECK_OR_FAIL(a.size() == 1 && b.size() == 1 && *a.begin() != *b.begin(),
                "each context's connections set up by its own service thread");
  return true;
}
TEST(EmulatedNetProxyThreads, WithoutSharingEachCommunicatorHasItsContextAndProxy) {
  EXPECT_TRUE(run_ranks(2, split_has_its_own_proxy));
}

// NCCL_COMM_SPLIT_SHARE_RESOURCES=1 overrides a config that leaves splitShare undefined.
bool environment_makes_the_split_share(int rank, int n, const ncclUniqueId& id) {
  long main_thread = 0;
  std::vector<Call> calls;
  ::setenv("NCCL_COMM_SPLIT_SHARE_RESOURCES", "1", 1);
  if (!run_parent_and_split(rank, n, id, NCCL_CONFIG_UNDEF_INT, "env", &main_thread, &calls)) return false;
  int inits = 0;
  for (const Call& c : calls) inits += c.name == "init";
  CHECK_OR_FAIL(inits == 1, "%d inits with NCCL_COMM_SPLIT_SHARE_RESOURCES=1", inits);
  return true;
}
TEST(EmulatedNetProxyThreads, TheEnvironmentMakesTheParentShare) {
  EXPECT_TRUE(run_ranks(2, environment_makes_the_split_share));
}

// Forked ranks meet here: each tells every other it arrived, then waits to hear the same
// from all of them (a pipe per rank, made before the fork).
struct RankBarrier {
  explicit RankBarrier(int nranks) : to(std::size_t(nranks)) {
    for (auto& p : to) EXPECT_EQ(::pipe(p.data()), 0);
  }
  ~RankBarrier() {
    for (auto& p : to)
      for (int fd : p) ::close(fd);
  }
  bool meet(int rank) const {
    char c = 'x';
    for (std::size_t r = 0; r < to.size(); ++r)
      if (int(r) != rank && ::write(to[r][1], &c, 1) != 1) return false;
    for (std::size_t r = 1; r < to.size(); ++r)
      if (::read(to[std::size_t(rank)][0], &c, 1) != 1) return false;
    return true;
  }
  std::vector<std::array<int, 2>> to;  // to[r]: the pipe rank r reads
};

// A shrink whose exchange fails (here: rank 1 never shrinks, so rank 0's times out) leaves
// nothing on the net: with the parent's shrinkShare=1 the child had joined the parent's
// proxy, and destroying the parent must still stop that proxy and finalize the context.
// The ranks meet after the allreduce and again after rank 0's shrink failed: rank 1 stays
// until then, so the shrink fails by its timeout, as said, not by a send to a rank that had
// already gone (which failed the shared proxy, and with it ranks 1 and 2 at random).
bool failed_shrink_leaves_no_member(int rank, int n, const ncclUniqueId& id, const RankBarrier& barrier) {
  const std::string log = log_path("shrink", rank);
  ::setenv("NCCL_NET_PLUGIN", TOPOCOLL_SPY_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_INNER", TOPOCOLL_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_LOG", log.c_str(), 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  ::setenv("NCCL_TUNER_PLUGIN", "none", 1);
  ::setenv("TOPOCOLL_EMU_TIMEOUT_S", "1", 1);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.shrinkShare = 1;
  ncclComm_t comm = nullptr, child = nullptr;
  CHECK_OR_FAIL(ncclCommInitRankConfig(&comm, n, id, rank, &config) == ncclSuccess, "init");
  float x = 1, sum = 0;
  CHECK_OR_FAIL(ncclAllReduce(&x, &sum, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess && sum == n,
                "allreduce");
  CHECK_OR_FAIL(barrier.meet(rank), "barrier after the allreduce");
  if (rank == 0) {
    int excluded = 2;
    CHECK_OR_FAIL(ncclCommShrink(comm, &excluded, 1, &child, nullptr, NCCL_SHRINK_DEFAULT) != ncclSuccess || !child,
                  "the shrink cannot succeed without rank 1");
  }
  CHECK_OR_FAIL(barrier.meet(rank), "barrier after the shrink");
  CHECK_OR_FAIL(ncclCommDestroy(comm) == ncclSuccess || rank == 0, "destroy");
  int inits = 0, finalizes = 0;
  for (const Call& c : read_calls(log)) {
    inits += c.name == "init";
    finalizes += c.name == "finalize";
  }
  std::remove(log.c_str());
  CHECK_OR_FAIL(inits == 1 && finalizes == 1, "%d inits and %d finalizes: the shared proxy must stop with the parent",
                inits, finalizes);
  return true;
}
TEST(EmulatedNetProxyThreads, AFailedShrinkLeavesNoMemberBehind) {
  const RankBarrier barrier(3);
  EXPECT_TRUE(run_ranks(3, [&](int rank, int n, const ncclUniqueId& id) {
    return failed_shrink_leaves_no_member(rank, n, id, barrier);
  }));
}

// NCCL's proxy keeps the code the plugin returned (proxy.cc) and ncclCommGetAsyncError gives
// it back: ncclRemoteError for a dead peer is what a framework acts on. The emulation used to
// turn every plugin error into ncclSystemError.

bool plugin_error_code_reaches_the_caller(int rank, int n, const ncclUniqueId& id, const RankBarrier& all_failed) {
  ::setenv("NCCL_NET_PLUGIN", TOPOCOLL_SPY_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_INNER", TOPOCOLL_NET_PLUGIN, 1);
  ::setenv("TOPOCOLL_SPY_NET_TEST_RESULT", std::to_string(int(ncclRemoteError)).c_str(), 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  ::setenv("NCCL_TUNER_PLUGIN", "none", 1);
  ::setenv("TOPOCOLL_EMU_TIMEOUT_S", "5", 1);
  ncclComm_t comm = nullptr;
  CHECK_OR_FAIL(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init");
  std::vector<float> x(1000, 1.0f), sum(1000);
  const ncclResult_t r = ncclAllReduce(x.data(), sum.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
  CHECK_OR_FAIL(r == ncclRemoteError, "the allreduce returned %s", ncclGetErrorString(r));
  ncclResult_t async = ncclSuccess;
  CHECK_OR_FAIL(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclRemoteError,
                "ncclCommGetAsyncError gave %s", ncclGetErrorString(async));
  // Not gone before the peer's call failed on its own: its connection to a rank that
  // exited would fail otherwise (ncclInternalError, a broken pipe).
  CHECK_OR_FAIL(all_failed.meet(rank), "barrier");
  CHECK_OR_FAIL(ncclCommAbort(comm) == ncclSuccess, "abort");
  return true;
}
TEST(EmulatedNetProxyThreads, APluginsErrorReachesTheCallerWithItsCode) {
  const RankBarrier all_failed(2);
  EXPECT_TRUE(run_ranks(2, [&](int rank, int n, const ncclUniqueId& id) {
    return plugin_error_code_reaches_the_caller(rank, n, id, all_failed);
  }));
}

}  // namespace
