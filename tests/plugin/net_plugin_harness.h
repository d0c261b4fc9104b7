// Harness for driving the net plugin as NCCL does: ranks are forked processes that dlopen
// libnccl-topocoll.so and use its exported ncclNetPlugin_vN struct. Handles and small
// notes travel over pipes between ranks; a rank that dies closes its pipe ends, so its
// peers see EOF instead of waiting (no sleeps, no polling of shared flags).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plugin/nccl_api/net_v11.h"

namespace topocoll::testing {

// Pipes between every ordered pair of ranks, set up before fork.
class RankMesh {
 public:
  explicit RankMesh(int ranks);
  ~RankMesh();
  int ranks() const { return ranks_; }
  // In the child for `rank`: keep only the ends this rank uses.
  void keep_ends_of(int rank);
  void close_all();
  bool send(int from, int to, const void* data, size_t size);
  // false on EOF (the sender died or closed) or after timeout_ms.
  bool recv(int from, int to, void* data, size_t size, int timeout_ms = 60000);
  // Blocks until `from` has exited (its write end to `to` is closed).
  bool wait_for_exit(int from, int to, int timeout_ms = 60000);

 private:
  int ranks_;
  std::vector<int> read_fd_, write_fd_;  // index from * ranks + to
};

struct RankResult {
  int rank = 0;
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
};

// Forks `ranks` processes, each running body(rank, mesh) and exiting with its return value
// (a watchdog alarm kills a rank stuck past `watchdog_s`). Waits for all of them.
std::vector<RankResult> run_ranks(int ranks, const std::function<int(int, RankMesh&)>& body,
                                  int watchdog_s = 120);
std::string describe(const std::vector<RankResult>& results);
// Every rank exited with status 0.
bool all_ok(const std::vector<RankResult>& results);

// --- In a rank process --------------------------------------------------------------
// The plugin library, opened once per process.
void* plugin_library();
const void* plugin_symbol(const char* name);
const ncclNet_v11_t* net_v11();
// The logger handed to init: records every message; WARNs also go to stderr.
void test_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
std::vector<std::string> logged(ncclDebugLogLevel level);
bool logged_contains(ncclDebugLogLevel level, const std::string& text);

// Prints "rank R: file:line: message" and makes the rank's body return 1.
#define RANK_REQUIRE(cond, ...)                                                       \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      ::topocoll::testing::rank_failure(__FILE__, __LINE__, #cond, "" __VA_ARGS__);   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)
void rank_failure(const char* file, int line, const char* condition, const char* fmt, ...);

// Data pattern of message k from rank `from` to rank `to`.
void fill_pattern(std::vector<uint8_t>& buffer, int from, int to, int k);
bool check_pattern(const std::vector<uint8_t>& buffer, size_t size, int from, int to, int k);

// v11 connections from this rank to every other rank (one listen per peer, as NCCL does).
struct PeerComms {
  void* ctx = nullptr;
  std::vector<void*> send, recv;  // by peer rank; null for self
};
bool connect_all(const ncclNet_v11_t* net, int rank, RankMesh& mesh, int dev, PeerComms* comms,
                 int timeout_ms = 60000);
void close_all(const ncclNet_v11_t* net, PeerComms* comms);
// Polls test() until done; returns its last result (ncclSuccess when done), ncclInProgress
// when the request neither finished nor failed within timeout_ms.
ncclResult_t wait_request(const ncclNet_v11_t* net, void* request, int* sizes, int timeout_ms = 60000);
// Tests every request in turn until all are done, as NCCL's proxy tests every request it has
// in flight (the plugin, like NCCL's Socket transport, moves a small message while its
// request is tested: waiting on one request while never testing the others can stall them).
// sizes (may be null): one per request. Returns ncclSuccess, the first failure's result, or
// ncclInProgress at timeout_ms; *failed (may be null) = the index of the one that did not end.
ncclResult_t wait_requests(const ncclNet_v11_t* net, const std::vector<void*>& requests, std::vector<int>* sizes,
                           int timeout_ms = 60000, size_t* failed = nullptr);

}  // namespace topocoll::testing
