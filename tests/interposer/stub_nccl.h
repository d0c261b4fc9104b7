// A test-only stand-in for libnccl: defines the pnccl* symbols the interposer forwards to
// and records every call, so tests can check that a call reached "NCCL" with exactly the
// user's arguments. Never installed; built only with the tests.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#define STUB_NCCL_API __attribute__((visibility("default")))

namespace stub_nccl {

struct Call {
  std::string fn;  // the pnccl* name
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::size_t count = 0;
  int datatype = -1;
  int op = -1;
  int peer = -1;  // Send/Recv peer; Split color
  int key = -1;   // Split key
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

STUB_NCCL_API std::vector<Call> calls();
STUB_NCCL_API void reset();
// Off: calls are only counted (the forwarding benchmark); on by default.
STUB_NCCL_API void set_recording(bool on);
STUB_NCCL_API long long call_count();
// NCCL's group nesting as the stub sees it.
STUB_NCCL_API int group_depth();
// From now on, calls of the pnccl* function `fn` return `result` (still recorded);
// reset() clears it.
STUB_NCCL_API void set_failure(const std::string& fn, ncclResult_t result);
// What pncclGetLastError returns from now on (NCCL's process-wide last error).
STUB_NCCL_API void set_last_error(const std::string& text);
// On: each pncclAllGather of ncclUint8 also records its `count` send bytes (host memory
// only: the test must have made the buffer), in call order. reset() turns it off and
// clears them.
STUB_NCCL_API void set_capture_payload(bool on);
STUB_NCCL_API std::vector<std::vector<unsigned char>> allgather_payloads();
// When set, each pncclAllGather of ncclUint8 then overwrites its receive buffer (host
// memory only) with these bytes, as if every rank had sent its part: lets the init exchange
// reach an agreement. reset() clears it.
STUB_NCCL_API void set_allgather_result(std::vector<unsigned char> bytes);
// A pncclAllReduce(ncclInt32, ncclMin) of one element (the init ready vote, host memory
// only) records the value this rank sent and, once set, writes min(sent, `peers_min`) to
// its receive buffer, as if the other ranks had voted `peers_min`. reset() clears both.
STUB_NCCL_API void set_allreduce_min_peers(int peers_min);
STUB_NCCL_API std::vector<int> allreduce_min_votes();
// What pncclGetVersion reports (NCCL_VERSION_CODE of the header unless set); reset() restores.
STUB_NCCL_API void set_version(int version);
// The communicators the stub hands out report this size and rank.
STUB_NCCL_API void set_comm_shape(int nranks, int rank, int device);
// What pncclCommGetAsyncError reports for `comm` (ncclSuccess unless set; a null `comm`:
// for every communicator not set on its own); reset() clears.
STUB_NCCL_API void set_async_error(ncclComm_t comm, ncclResult_t error);
// The config of the last pncclCommSplit given one, its strings copied; reset() clears it.
struct SplitConfig {
  bool given = false;
  ncclConfig_t config{};
  std::string net_name, comm_name;
};
STUB_NCCL_API SplitConfig last_split_config();
// Runs inside each pncclCommSplit, after the split is recorded and before it returns (a
// split waiting for its peers), whether or not it made a communicator; reset() clears it.
STUB_NCCL_API void set_split_hook(std::function<void()> hook);
STUB_NCCL_API ncclResult_t async_error_of(ncclComm_t comm);
// What NCCL's ncclCommEnsureReady calls before a split or shrink (init.cc
// ncclCommInitChildComm): the public ncclCommGetAsyncError, which under LD_PRELOAD is the
// interposer's. A test binary links the interposer statically and exports nothing, so it
// hands the stub that entry point here; the stub's split and shrink then fail with the error
// it reports, as NCCL's do. Null (the default): no such check. reset() keeps it.
STUB_NCCL_API void set_readiness_query(ncclResult_t (*query)(ncclComm_t, ncclResult_t*));
// Communicators the stub made (init, split, shrink) and nothing destroyed or aborted yet;
// never reset: a test compares it before and after.
STUB_NCCL_API long live_comms();

}  // namespace stub_nccl
