// Test-only libnccl stand-in (stub_nccl.h). Thread-safe; communicators are heap tokens.
#include "tests/interposer/stub_nccl.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <mutex>
#include <utility>

namespace stub_nccl {
namespace {

// The stub moves its bytes as host memory (votes, gathered records) and its communicators
// own no device, so a process that loads it sees no GPU either: CUDA's runtime then fails
// every device call as on a machine without one, which is what these tests describe. With a
// device visible, topocoll's scratch and votes were real device memory that the stub then
// read as host memory (segfaults, and "could allocate" where a test means "cannot", on the
// GPU machine). Before main and before any CUDA call; "-1" names no device (CUDA lists the
// devices before the first invalid index).
__attribute__((constructor)) void hide_cuda_devices() { ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1); }

std::mutex g_mutex;
std::vector<Call> g_calls;
std::atomic<bool> g_recording{true};
std::atomic<long long> g_count{0};
thread_local int g_depth = 0;
// NCCL's ncclGroupError: an operation that failed when enqueued inside a group fails the
// group's outermost end (group.h ncclGroupErrCheck).
thread_local ncclResult_t g_group_error = ncclSuccess;
// Splits made inside a group: as NCCL 2.28 (init.cc: "*newcomm should be NCCL_COMM_NULL
// until comm split fully complete"), the handle is written at the outermost group end.
// A fixed array: the stub allocates nothing in the calls the out-of-memory sweeps fail.
thread_local std::array<std::pair<ncclComm_t*, ncclComm_t>, 64> g_children_at_group_end;
thread_local std::size_t g_nchildren_at_group_end = 0;
int g_nranks = 2, g_rank = 0, g_device = 0;

struct FakeComm {
  int nranks, rank, device;
};
std::atomic<long> g_live_comms{0};  // made and not yet destroyed or aborted

std::string g_fail_fn;
char g_last_error[256] = "the stub's last error";
ncclResult_t g_fail_result = ncclSuccess;
std::atomic<bool> g_failing{false};
std::atomic<bool> g_capture{false};
// Kept without allocating, so a test that fails allocations on purpose sees every one.
constexpr std::size_t kMaxPayloadBytes = 1 << 16, kMaxRecords = 256;
std::array<unsigned char, kMaxPayloadBytes> g_payload_bytes;
std::array<std::size_t, kMaxRecords + 1> g_payload_ends{};  // payload i: [ends[i], ends[i+1])
std::size_t g_npayloads = 0;
std::vector<unsigned char> g_allgather_result;
bool g_have_peers_min = false;
int g_peers_min = 1;
std::array<int, kMaxRecords> g_votes;
std::size_t g_nvotes = 0;
std::map<ncclComm_t, ncclResult_t> g_async_errors;
int g_version = NCCL_VERSION_CODE;
SplitConfig g_split_config;
std::function<void()> g_split_hook;
std::atomic<ncclResult_t (*)(ncclComm_t, ncclResult_t*)> g_readiness_query{nullptr};

// A call as the stub receives it: building one allocates nothing. The stub, like NCCL's C
// API, never throws: where its own records cannot be kept (a test failing allocations on
// purpose, tests/common/failing_allocation.h) the call fails with ncclSystemError, as NCCL
// out of host memory would.
struct CallArgs {
  const char* fn;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::size_t count = 0;
  int datatype = -1;
  int op = -1;
  int peer = -1;
  int key = -1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

ncclResult_t record(const CallArgs& a) {
  g_count.fetch_add(1, std::memory_order_relaxed);
  if (!g_recording.load(std::memory_order_relaxed)) return ncclSuccess;
  try {
    std::lock_guard lock(g_mutex);
    const ncclResult_t r =
        g_failing.load(std::memory_order_relaxed) && g_fail_fn == a.fn ? g_fail_result : ncclSuccess;
    g_calls.push_back(
        Call{a.fn, a.sendbuff, a.recvbuff, a.count, a.datatype, a.op, a.peer, a.key, a.comm, a.stream});
    return r;
  } catch (...) {
    return ncclSystemError;
  }
}

// The communicators the stub made and has not freed, in a fixed table (no allocation a test
// failing allocations would see): a query on any other handle (a test's made-up one, or one
// destroyed meanwhile) answers for the stub's device without reading it.
constexpr std::size_t kMaxLiveComms = 1024;
std::array<const void*, kMaxLiveComms> g_made{};

// Null when out of host memory (the caller fails with ncclSystemError).
ncclComm_t make_comm() {
  std::lock_guard lock(g_mutex);
  auto* c = new (std::nothrow) FakeComm{g_nranks, g_rank, g_device};
  if (c) {
    ++g_live_comms;
    if (auto slot = std::find(g_made.begin(), g_made.end(), nullptr); slot != g_made.end()) *slot = c;
  }
  return reinterpret_cast<ncclComm_t>(c);
}
void free_comm(ncclComm_t c) {
  if (!c) return;
  --g_live_comms;
  {
    std::lock_guard lock(g_mutex);
    if (auto slot = std::find(g_made.begin(), g_made.end(), c); slot != g_made.end()) *slot = nullptr;
  }
  delete reinterpret_cast<FakeComm*>(c);
}
// Whether `c` is a live communicator the stub made.
bool made_and_live(const ncclComm_t c) {
  std::lock_guard lock(g_mutex);
  return std::find(g_made.begin(), g_made.end(), c) != g_made.end();
}


const FakeComm* fake(const ncclComm_t c) { return reinterpret_cast<const FakeComm*>(c); }

void note_split_config(const ncclConfig_t& config) noexcept try {
  std::lock_guard lock(g_mutex);
  g_split_config.given = true;
  g_split_config.config = config;
  g_split_config.net_name = config.netName ? config.netName : "";
  g_split_config.comm_name = config.commName ? config.commName : "";
} catch (...) {  // out of memory: the config goes unrecorded
}

}  // namespace

long live_comms() { return g_live_comms.load(); }
std::vector<Call> calls() {
  std::lock_guard lock(g_mutex);
  return g_calls;
}
void reset() {
  std::lock_guard lock(g_mutex);
  g_calls.clear();
  g_count = 0;
  g_group_error = ncclSuccess;
  g_failing = false;
  g_fail_fn.clear();
  g_capture = false;
  g_npayloads = 0;
  g_allgather_result.clear();
  g_have_peers_min = false;
  g_nvotes = 0;
  g_async_errors.clear();
  g_version = NCCL_VERSION_CODE;
  g_split_config = {};
  g_split_hook = nullptr;
}
SplitConfig last_split_config() {
  std::lock_guard lock(g_mutex);
  return g_split_config;
}
void set_version(int version) {
  std::lock_guard lock(g_mutex);
  g_version = version;
}
void set_async_error(ncclComm_t comm, ncclResult_t error) {
  std::lock_guard lock(g_mutex);
  g_async_errors[comm] = error;
}
ncclResult_t async_error_of(ncclComm_t comm) {
  std::lock_guard lock(g_mutex);
  auto it = g_async_errors.find(comm);
  if (it == g_async_errors.end()) it = g_async_errors.find(nullptr);
  return it == g_async_errors.end() ? ncclSuccess : it->second;
}
void set_allgather_result(std::vector<unsigned char> bytes) {
  std::lock_guard lock(g_mutex);
  g_allgather_result = std::move(bytes);
}
void set_allreduce_min_peers(int peers_min) {
  std::lock_guard lock(g_mutex);
  g_have_peers_min = true;
  g_peers_min = peers_min;
}
std::vector<int> allreduce_min_votes() {
  std::lock_guard lock(g_mutex);
  return std::vector<int>(g_votes.begin(), g_votes.begin() + std::ptrdiff_t(g_nvotes));
}
void set_capture_payload(bool on) { g_capture = on; }
std::vector<std::vector<unsigned char>> allgather_payloads() {
  std::lock_guard lock(g_mutex);
  std::vector<std::vector<unsigned char>> out;
  for (std::size_t i = 0; i < g_npayloads; ++i)
    out.emplace_back(g_payload_bytes.begin() + std::ptrdiff_t(g_payload_ends[i]),
                     g_payload_bytes.begin() + std::ptrdiff_t(g_payload_ends[i + 1]));
  return out;
}
void set_failure(const std::string& fn, ncclResult_t result) {
  std::lock_guard lock(g_mutex);
  g_fail_fn = fn;
  g_fail_result = result;
  g_failing = true;
}
void set_last_error(const std::string& text) {
  std::lock_guard lock(g_mutex);
  std::snprintf(g_last_error, sizeof g_last_error, "%s", text.c_str());
}
void set_recording(bool on) { g_recording = on; }
long long call_count() { return g_count.load(); }
int group_depth() { return g_depth; }
void set_readiness_query(ncclResult_t (*query)(ncclComm_t, ncclResult_t*)) { g_readiness_query.store(query); }

// ncclCommEnsureReady's verdict on a parent (ncclSuccess: ready).
ncclResult_t parent_readiness(ncclComm_t parent) {
  ncclResult_t (*query)(ncclComm_t, ncclResult_t*) = g_readiness_query.load();
  ncclResult_t error = ncclSuccess;
  if (!query) return ncclSuccess;
  if (const ncclResult_t r = query(parent, &error); r != ncclSuccess) return r;
  return error == ncclInProgress ? ncclInvalidArgument : error;
}

void set_split_hook(std::function<void()> hook) {
  std::lock_guard lock(g_mutex);
  g_split_hook = std::move(hook);
}

void set_comm_shape(int nranks, int rank, int device) {
  std::lock_guard lock(g_mutex);
  g_nranks = nranks;
  g_rank = rank;
  g_device = device;
}

}  // namespace stub_nccl

using stub_nccl::Call;
using stub_nccl::record;

namespace {
// A collective or point-to-point call: NCCL refuses a null communicator before anything
// else (enqueue.cc ncclEnqueueCheck -> CommCheck), and a refusal inside a group is the group's.
ncclResult_t enqueue(const stub_nccl::CallArgs& a) {
  ncclResult_t r = record(a);
  if (!a.comm) {
    r = ncclInvalidArgument;
    // NCCL's WARN is its new last error (debug.cc ncclLastError).
    std::lock_guard lock(stub_nccl::g_mutex);
    std::snprintf(stub_nccl::g_last_error, sizeof stub_nccl::g_last_error, "%s", "comm argument is NULL");
  }
  if (stub_nccl::g_depth > 0 && r != ncclSuccess && r != ncclInProgress) stub_nccl::g_group_error = r;
  return r;
}
}  // namespace

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))

STUB_EXPORT ncclResult_t pncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t,
                                        ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  if (t == ncclInt32 && op == ncclMin && n == 1 && s && r) {
    std::lock_guard lock(stub_nccl::g_mutex);
    int32_t sent = 0;
    std::memcpy(&sent, s, sizeof sent);
    if (stub_nccl::g_nvotes < stub_nccl::g_votes.size()) stub_nccl::g_votes[stub_nccl::g_nvotes++] = sent;
    if (stub_nccl::g_have_peers_min) {
      const int32_t min = std::min(sent, int32_t(stub_nccl::g_peers_min));
      std::memcpy(r, &min, sizeof min);
    }
  }
  return enqueue({"pncclAllReduce", s, r, n, int(t), int(op), -1, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t,
                                            ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return enqueue({"pncclReduceScatter", s, r, n, int(t), int(op), -1, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t,
                                        ncclComm_t c, cudaStream_t st) {
  if (stub_nccl::g_capture && s && t == ncclUint8) {
    const auto* bytes = static_cast<const unsigned char*>(s);
    std::lock_guard lock(stub_nccl::g_mutex);
    using stub_nccl::g_npayloads, stub_nccl::g_payload_ends, stub_nccl::g_payload_bytes;
    const std::size_t begin = g_payload_ends[g_npayloads];
    if (g_npayloads < stub_nccl::kMaxRecords && begin + n <= g_payload_bytes.size()) {
      std::memcpy(g_payload_bytes.data() + begin, bytes, n);
      g_payload_ends[++g_npayloads] = begin + n;
    }
  }
  if (t == ncclUint8 && r) {
    std::lock_guard lock(stub_nccl::g_mutex);
    const auto& all = stub_nccl::g_allgather_result;
    if (!all.empty()) std::memcpy(r, all.data(), all.size());
  }
  return enqueue({"pncclAllGather", s, r, n, int(t), -1, -1, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t,
                                       ncclComm_t c, cudaStream_t st) {
  return enqueue({"pncclAlltoAll", s, r, n, int(t), -1, -1, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclSend(const void* s, size_t n, ncclDataType_t t, int peer,
                                   ncclComm_t c, cudaStream_t st) {
  return enqueue({"pncclSend", s, nullptr, n, int(t), -1, peer, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                                   cudaStream_t st) {
  return enqueue({"pncclRecv", nullptr, r, n, int(t), -1, peer, -1, c, st});
}
STUB_EXPORT ncclResult_t pncclGroupStart() {
  // A start that fails opens no group (NCCL's own never fails: group.h).
  const ncclResult_t r = record({"pncclGroupStart"});
  if (r == ncclSuccess) ++stub_nccl::g_depth;
  return r;
}
namespace stub_nccl {
// At the outermost end of a group (a simulated one too: NCCL 2.28 runs a group's inits and
// splits there, group.cc asyncJobLaunch, and skips only the launches).
void end_group(ncclResult_t r) {
  if (g_depth != 0) return;
  const std::size_t n = std::exchange(g_nchildren_at_group_end, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto [handle, made] = g_children_at_group_end[i];
    if (r == ncclSuccess) __atomic_store_n(handle, made, __ATOMIC_RELEASE);
    else free_comm(made);  // a failed group makes none of its children
  }
}
}  // namespace stub_nccl

STUB_EXPORT ncclResult_t pncclGroupEnd() {
  if (stub_nccl::g_depth == 0) return ncclInvalidUsage;
  --stub_nccl::g_depth;
  ncclResult_t r = record({"pncclGroupEnd"});
  if (stub_nccl::g_depth == 0 && stub_nccl::g_group_error != ncclSuccess)
    r = std::exchange(stub_nccl::g_group_error, ncclSuccess);
  stub_nccl::end_group(r);
  return r;
}
STUB_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t*) {
  if (stub_nccl::g_depth == 0) return ncclInvalidUsage;
  --stub_nccl::g_depth;
  ncclResult_t r = record({"pncclGroupSimulateEnd"});
  if (stub_nccl::g_depth == 0 && stub_nccl::g_group_error != ncclSuccess)
    r = std::exchange(stub_nccl::g_group_error, ncclSuccess);
  stub_nccl::end_group(r);
  return r;
}
STUB_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = stub_nccl::make_comm();
  if (!*comm) return ncclSystemError;
  return record({"pncclCommInitRank", nullptr, nullptr, size_t(nranks), -1, -1, rank, -1, *comm});
}
STUB_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId,
                                                 int rank, ncclConfig_t*) {
  *comm = stub_nccl::make_comm();
  if (!*comm) return ncclSystemError;
  return record({"pncclCommInitRankConfig", nullptr, nullptr, size_t(nranks), -1, -1, rank, -1, *comm});
}
STUB_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int,
                                                   ncclUniqueId*, ncclConfig_t*) {
  *comm = stub_nccl::make_comm();
  if (!*comm) return ncclSystemError;
  return record({"pncclCommInitRankScalable", nullptr, nullptr, size_t(nranks), -1, -1, rank, -1, *comm});
}
STUB_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  for (int i = 0; i < ndev; ++i)
    if (!(comms[i] = stub_nccl::make_comm())) return ncclSystemError;
  return record({"pncclCommInitAll", nullptr, nullptr, size_t(ndev)});
}
STUB_EXPORT ncclResult_t pncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t* out,
                                        ncclConfig_t* config) {
  if (const ncclResult_t ready = stub_nccl::parent_readiness(c); ready != ncclSuccess) {
    *out = nullptr;
    record({"pncclCommSplit", nullptr, nullptr, 0, -1, config ? config->splitShare : -1, color, key, c});
    return ready;
  }
  const ncclComm_t made = color == NCCL_SPLIT_NOCOLOR ? nullptr : stub_nccl::make_comm();
  *out = nullptr;
  if (made && stub_nccl::g_depth > 0 && stub_nccl::g_nchildren_at_group_end < stub_nccl::g_children_at_group_end.size())
    stub_nccl::g_children_at_group_end[stub_nccl::g_nchildren_at_group_end++] = {out, made};
  else
    *out = made;
  if (config) stub_nccl::note_split_config(*config);
  // `op` carries the config's splitShare (-1 without a config).
  ncclResult_t r = record({"pncclCommSplit", nullptr, nullptr, 0, -1,
                           config ? config->splitShare : -1, color, key, c});
  if (color != NCCL_SPLIT_NOCOLOR && !made) r = ncclSystemError;  // out of memory here
  std::function<void()> hook;
  {
    std::lock_guard lock(stub_nccl::g_mutex);
    hook = stub_nccl::g_split_hook;
  }
  if (hook) hook();
  return r;
}
STUB_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t c, void* buff, size_t size, void** handle) {
  *handle = buff;
  return record({"pncclCommRegister", buff, nullptr, size, -1, -1, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t c, void* handle) {
  return record({"pncclCommDeregister", handle, nullptr, 0, -1, -1, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t c, ncclResult_t* e) {
  *e = stub_nccl::async_error_of(c);
  return record({"pncclCommGetAsyncError", nullptr, nullptr, 0, -1, -1, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t c, int flags) {
  return record({"pncclCommRevoke", nullptr, nullptr, 0, -1, flags, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommShrink(ncclComm_t c, int*, int n, ncclComm_t* out,
                                         ncclConfig_t*, int) {
  // NCCL_SHRINK_ABORT resets the abort flags, not the communicator's error: the readiness
  // check is the same either way.
  if (const ncclResult_t ready = stub_nccl::parent_readiness(c); ready != ncclSuccess) {
    *out = nullptr;
    record({"pncclCommShrink", nullptr, nullptr, size_t(n), -1, -1, -1, -1, c});
    return ready;
  }
  *out = stub_nccl::make_comm();
  if (!*out) return ncclSystemError;
  return record({"pncclCommShrink", nullptr, nullptr, size_t(n), -1, -1, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t c) {
  return record({"pncclCommFinalize", nullptr, nullptr, 0, -1, -1, -1, -1, c});
}
STUB_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t c) {
  record({"pncclCommDestroy", nullptr, nullptr, 0, -1, -1, -1, -1, c});
  // As NCCL 2.28.9's (init.cc): a failed communicator's error returns from inside the group
  // the destroy opened, which stays open, and the communicator is not freed.
  if (const ncclResult_t e = stub_nccl::async_error_of(c); e != ncclSuccess && e != ncclInProgress) {
    ++stub_nccl::g_depth;
    return e;
  }
  stub_nccl::free_comm(c);
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t pncclCommAbort(ncclComm_t c) {
  record({"pncclCommAbort", nullptr, nullptr, 0, -1, -1, -1, -1, c});
  stub_nccl::free_comm(c);
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t pncclCommCount(const ncclComm_t c, int* n) {
  *n = stub_nccl::fake(c)->nranks;
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t c, int* r) {
  *r = stub_nccl::fake(c)->rank;
  return ncclSuccess;
}
STUB_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t c, int* d) {
  if (!stub_nccl::made_and_live(c)) {
    std::lock_guard lock(stub_nccl::g_mutex);
    *d = stub_nccl::g_device;
    return ncclSuccess;
  }
  *d = stub_nccl::fake(c)->device;
  return ncclSuccess;
}
STUB_EXPORT const char* pncclGetLastError(ncclComm_t) { return stub_nccl::g_last_error; }
STUB_EXPORT ncclResult_t pncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  std::lock_guard lock(stub_nccl::g_mutex);
  *version = stub_nccl::g_version;
  return ncclSuccess;
}

STUB_EXPORT const char* pncclGetErrorString(ncclResult_t r) {
  return r == ncclSuccess ? "no error" : "stub error";
}
