// libcudart_emu.so: the CUDA runtime calls topocoll's interposer and its checks make, on
// host memory (see emu_runtime.h for what this emulation can and cannot show).
//
//   memory   cudaMalloc is host memory filled with 0xCD (device memory is never zeroed),
//            tracked so copies and kernels into freed or foreign memory abort the test;
//   streams  execute in issue order on the calling thread, so "asynchronous" work is done
//            when the call returns;
//   ordering each stream, and the host, carries a vector clock (Lamport/Mattern) that
//            follows CUDA's ordering rules, and each allocation keeps its recent accesses
//            stamped with them: an access that overlaps an earlier one on another stream,
//            one of them a write, with no happens-before between them, is a race and
//            aborts the process (see RaceDetector below);
//   capture  cudaStreamBeginCapture makes the stream record its work instead of running it;
//            cudaGraphLaunch runs the recording, in order, on the launching thread and
//            stream (accesses are stamped then, on the launching stream);
//   events   record a host timestamp and the recording stream's clock.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/emu/emu_runtime.h"

namespace topocoll::emu {
namespace {

// Vector clock: component i counts the pieces of work stream i has been given. Work W on
// stream i stamped c happens before whatever runs on stream j once j's clock has
// component i >= c.
using Clock = std::vector<std::uint64_t>;

void merge_into(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

std::uint64_t component(const Clock& c, std::size_t i) { return i < c.size() ? c[i] : 0; }

}  // namespace
}  // namespace topocoll::emu

struct CUgraph_st {
  std::vector<std::function<void()>> work;
  // While capturing: the mode it began in, the thread that began it, and whether an unsafe
  // call made it invalid (cudaStreamEndCapture then fails).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id owner;
  bool invalidated = false;
  unsigned long long id = 0;  // cudaStreamGetCaptureInfo's, unique in the process
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUstream_st {
  explicit CUstream_st(bool legacy_default = false, bool blocking_stream = true);
  ~CUstream_st();
  CUstream_st(const CUstream_st&) = delete;
  CUstream_st& operator=(const CUstream_st&) = delete;
  CUgraph_st* capture = nullptr;  // non-null while capturing
  bool global_capture = false;    // capture began in cudaStreamCaptureModeGlobal
  std::size_t id = 0;             // component in the vector clocks
  bool legacy = false;            // the legacy default stream (handles 0 and cudaStreamLegacy)
  bool blocking = true;           // not cudaStreamNonBlocking: ordered with the legacy stream
  topocoll::emu::Clock clock;     // guarded by the race detector's mutex
};
struct CUevent_st {
  bool timing = true;    // not cudaEventDisableTiming
  bool recorded = false; // a record has run (cudaEventElapsedTime needs it)
  std::chrono::steady_clock::time_point when{};
  topocoll::emu::Clock clock;  // of the stream at the last record; guarded like the streams'
};

namespace topocoll::emu {
namespace {

thread_local int current_device = 0;
// Streams capturing in global mode, process-wide: the legacy stream may not be used then.
std::atomic<int> global_captures{0};
// Device-wide synchronisations the host asked for (cudaDeviceSynchronize, cudaFree).
std::atomic<long> device_synchronizations{0};
thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
// Every capture in progress, for the rule on potentially unsafe calls.
std::mutex captures_mu;
std::vector<CUgraph_st*> active_captures;

// CUDA's rule for "potentially unsafe" calls (cudaThreadExchangeStreamCaptureMode): in
// global mode a thread may not make them while it has a capture of its own not begun in
// relaxed mode, nor while another thread has one begun in global mode; in thread-local mode
// only its own count; relaxed mode is never prohibited. A prohibited call fails and
// invalidates the captures that prohibited it. Checked by cudaEventQuery and
// cudaEventSynchronize.
bool unsafe_call_prohibited() {
  if (capture_mode == cudaStreamCaptureModeRelaxed) return false;
  std::lock_guard<std::mutex> lock(captures_mu);
  bool prohibited = false;
  for (CUgraph_st* g : active_captures) {
    const bool own = g->owner == std::this_thread::get_id() && g->mode != cudaStreamCaptureModeRelaxed;
    const bool others_global = capture_mode == cudaStreamCaptureModeGlobal && g->mode == cudaStreamCaptureModeGlobal;
    if (own || others_global) {
      g->invalidated = true;
      prohibited = true;
    }
  }
  return prohibited;
}
// The stream whose work is running on this thread now (inside enqueue), or null.
thread_local CUstream_st* running_on = nullptr;

// The special handles. The legacy default stream (0, cudaStreamLegacy) is one per device
// for the process in CUDA; here each thread has its own, which orders less than CUDA does,
// so the race detector can only report more, never hide one. cudaStreamPerThread is a
// blocking stream of each thread's own (ordered with the legacy stream only, not with other
// blocking streams nor with another thread's): one handle, a different stream per thread.
CUstream_st* resolve(cudaStream_t stream) {
  thread_local CUstream_st legacy_stream(/*legacy_default=*/true);
  thread_local CUstream_st per_thread_stream(/*legacy_default=*/false, /*blocking_stream=*/true);
  if (stream == cudaStreamPerThread) return &per_thread_stream;
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  if (handle <= 2) return &legacy_stream;
  return stream;
}

cudaError_t fail_with(cudaError_t e) {
  last_error = e;
  return e;
}

// One access of device memory by a piece of stream work.
struct Access {
  std::size_t stream;     // stream id
  std::uint64_t tick;     // that stream's own clock component at the access
  std::size_t begin, end; // byte offsets in the allocation
  bool write;
  std::string what;
};

struct Allocation {
  std::size_t bytes = 0;
  int device = 0;  // the device current at the allocation (cudaPointerGetAttributes)
  // Accesses not yet known to happen before everything that can follow; pruned as the host
  // synchronises and as later accesses on ordered streams cover them.
  std::vector<Access> recent;
};

// The process's streams, clocks and allocations, under one mutex.
//
// Ordering rules, as CUDA defines them (CUDA Programming Guide, "Streams" and "Events";
// Runtime API "Stream synchronization behavior"):
//   - work on one stream runs in issue order: a stream ticks its own component per work;
//   - work enqueued after the host saw X complete runs after X: enqueue merges the host's
//     clock (cudaStreamSynchronize, cudaEventSynchronize, a successful cudaStreamQuery or
//     cudaEventQuery, cudaDeviceSynchronize and cudaFree advance the host's clock);
//   - cudaEventRecord(e, S) takes S's clock, cudaStreamWaitEvent(T, e) merges it into T;
//   - the legacy default stream waits for all blocking streams and they wait for it
//     (not for cudaStreamNonBlocking streams);
//   - cudaMalloc orders nothing (fresh memory has no history to race with);
//   - synchronous cudaMemcpy and cudaMemset are work of the legacy stream, which
//     non-blocking streams do not wait for; only a copy into host memory is complete when
//     the call returns (host-to-device copies from pageable memory return once staged,
//     device-to-device copies and memsets are asynchronous). So a buffer filled with
//     cudaMemcpy and then used on a non-blocking stream needs a synchronisation between.
struct RaceDetector {
  std::mutex mu;
  std::map<const char*, Allocation> live;  // base -> allocation
  std::vector<CUstream_st*> streams;        // live streams
  std::size_t next_id = 0;
  Clock host;     // what the host has seen complete
  Clock retired;  // the merged clocks of destroyed streams (device synchronisation waits for
                  // their work too)

  // Before a stream's next work: the host's and (legacy rules) other streams' orderings,
  // then one tick.
  void tick(CUstream_st& s) {
    merge_into(s.clock, host);
    if (s.legacy) {
      for (CUstream_st* t : streams)
        if (t != &s && (t->blocking || t->legacy)) merge_into(s.clock, t->clock);
    } else if (s.blocking) {
      for (CUstream_st* t : streams)
        if (t->legacy) merge_into(s.clock, t->clock);
    }
    if (s.clock.size() <= s.id) s.clock.resize(s.id + 1, 0);
    ++s.clock[s.id];
  }

  void synchronize_device() {
    merge_into(host, retired);
    for (CUstream_st* t : streams) merge_into(host, t->clock);
  }

  Allocation* find(const void* p, const char** base) {
    const char* c = static_cast<const char*>(p);
    auto it = live.upper_bound(c);
    if (it == live.begin()) return nullptr;
    --it;
    if (c >= it->first + it->second.bytes) return nullptr;
    *base = it->first;
    return &it->second;
  }

  [[noreturn]] void report(const char* base, const Allocation& a, const Access& earlier,
                           const Access& now, const CUstream_st& s) {
    char msg[1024];
    std::snprintf(msg, sizeof msg,
                  "stream-ordering race on device allocation [%p, +%zu):\n"
                  "  %s %s bytes [%zu, %zu) on stream #%zu (its work #%llu)\n"
                  "  %s %s bytes [%zu, %zu) on stream #%zu (its work #%llu)\n"
                  "  and nothing orders the second after the first (stream #%zu has seen "
                  "stream #%zu's work up to #%llu only): missing cudaEventRecord + "
                  "cudaStreamWaitEvent or a synchronisation",
                  static_cast<const void*>(base), a.bytes, earlier.what.c_str(),
                  earlier.write ? "wrote" : "read", earlier.begin, earlier.end, earlier.stream,
                  (unsigned long long)earlier.tick, now.what.c_str(),
                  now.write ? "writes" : "reads", now.begin, now.end, now.stream,
                  (unsigned long long)now.tick, s.id, earlier.stream,
                  (unsigned long long)component(s.clock, earlier.stream));
    fail(msg);
  }

  void access(const void* p, std::size_t bytes, bool write, CUstream_st& s, const char* what) {
    const char* base = nullptr;
    Allocation* a = find(p, &base);
    if (!a) return;
    const std::size_t begin = std::size_t(static_cast<const char*>(p) - base);
    Access now{s.id, component(s.clock, s.id), begin, std::min(a->bytes, begin + bytes), write,
               what};
    std::vector<Access>& recent = a->recent;
    for (std::size_t i = 0; i < recent.size();) {
      const Access& e = recent[i];
      const bool host_saw = component(host, e.stream) >= e.tick;
      const bool ordered = host_saw || component(s.clock, e.stream) >= e.tick;
      const bool overlap = e.begin < now.end && now.begin < e.end;
      if (!ordered && overlap && (e.write || write)) report(base, *a, e, now, s);
      // Dropped when everything later is ordered after it: the host has seen it (every
      // stream merges the host's clock), or `now` follows it and covers it, so any later
      // access racing with it races with `now` too (a read covers only reads).
      const bool covered = now.begin <= e.begin && e.end <= now.end && (write || !e.write);
      if (host_saw || (ordered && covered)) {
        recent[i] = std::move(recent.back());
        recent.pop_back();
      } else {
        ++i;
      }
    }
    recent.push_back(std::move(now));
  }
};

RaceDetector& detector() {
  static RaceDetector* d = new RaceDetector;  // outlives static destructors of callers
  return *d;
}

bool inside_allocation(const void* p, std::size_t bytes) {
  RaceDetector& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  const char* base = nullptr;
  const Allocation* a = d.find(p, &base);
  if (!a) return false;
  const char* c = static_cast<const char*>(p);
  return bytes <= a->bytes && std::size_t(c - base) <= a->bytes - bytes;
}

// Runs `work` as work of `s` on this thread: accesses it declares are stamped on `s`.
void run_on(CUstream_st* s, const std::function<void()>& work) {
  {
    RaceDetector& d = detector();
    std::lock_guard<std::mutex> lock(d.mu);
    d.tick(*s);
  }
  struct Restore {
    CUstream_st* saved;
    ~Restore() { running_on = saved; }
  } restore{running_on};
  running_on = s;
  work();
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  CUstream_st* s = resolve(stream);
  if (s->capture) s->capture->work.push_back(std::move(work));
  else run_on(s, work);
}

bool is_capturing(cudaStream_t stream) { return resolve(stream)->capture != nullptr; }

long device_synchronization_count() { return device_synchronizations.load(); }

namespace {
std::mutex event_counts_mu;
std::map<std::string, long>& event_counts() {
  static std::map<std::string, long> counts;
  return counts;
}
}  // namespace

void count_event(const char* what) {
  std::lock_guard<std::mutex> lock(event_counts_mu);
  ++event_counts()[what];
}

long event_count(const char* what) {
  std::lock_guard<std::mutex> lock(event_counts_mu);
  auto it = event_counts().find(what);
  return it == event_counts().end() ? 0 : it->second;
}

namespace {
std::mutex injected_mu;
std::map<std::string, cudaError_t>& injected_failures() {
  static std::map<std::string, cudaError_t> failures;
  return failures;
}
}  // namespace

void fail_next_call(const char* function, cudaError_t error) {
  std::lock_guard<std::mutex> lock(injected_mu);
  injected_failures()[function] = error;
}

cudaError_t take_injected_failure(const char* function) {
  std::lock_guard<std::mutex> lock(injected_mu);
  auto it = injected_failures().find(function);
  if (it == injected_failures().end()) return cudaSuccess;
  const cudaError_t e = it->second;
  injected_failures().erase(it);
  return e;
}

std::size_t live_device_bytes() {
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  std::size_t bytes = 0;
  for (const auto& [base, a] : d.live) bytes += a.bytes;
  return bytes;
}

void access(const void* p, std::size_t bytes, bool write, cudaStream_t stream, const char* what) {
  if (bytes == 0 || !p) return;
  CUstream_st* s = running_on ? running_on : resolve(stream);
  RaceDetector& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  d.access(p, bytes, write, *s, what);
}

void join_streams(const cudaStream_t* streams, std::size_t n) {
  std::vector<CUstream_st*> joined_streams;  // resolved before locking: a thread's default
  for (std::size_t i = 0; i < n; ++i)        // stream registers itself on first use
    joined_streams.push_back(resolve(streams[i]));
  RaceDetector& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  Clock joined;
  for (CUstream_st* s : joined_streams) merge_into(joined, s->clock);
  for (CUstream_st* s : joined_streams) {
    merge_into(s->clock, joined);
    d.tick(*s);
  }
}

void fail(const char* what) {
  std::fprintf(stderr, "cudart_emu: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

void check_device_range(const void* p, std::size_t bytes, const char* what) {
  if (inside_allocation(p, bytes)) return;
  char msg[256];
  std::snprintf(msg, sizeof msg, "%s: [%p, +%zu) is not inside one live cudaMalloc allocation",
                what, p, bytes);
  fail(msg);
}

}  // namespace topocoll::emu

CUstream_st::CUstream_st(bool legacy_default, bool blocking_stream)
    : legacy(legacy_default), blocking(blocking_stream) {
  auto& d = topocoll::emu::detector();
  std::lock_guard<std::mutex> lock(d.mu);
  id = d.next_id++;
  d.streams.push_back(this);
}

CUstream_st::~CUstream_st() {
  auto& d = topocoll::emu::detector();
  std::lock_guard<std::mutex> lock(d.mu);
  topocoll::emu::merge_into(d.retired, clock);
  d.streams.erase(std::find(d.streams.begin(), d.streams.end(), this));
}

using topocoll::emu::check_device_range;
using topocoll::emu::detector;
using topocoll::emu::enqueue;
using topocoll::emu::fail_with;
using topocoll::emu::resolve;

namespace {

// The host has seen every stream's work complete.
void synchronize_device() {
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  d.synchronize_device();
}

// The host has seen everything of `clock` complete.
void host_saw(const topocoll::emu::Clock& clock) {
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  topocoll::emu::merge_into(d.host, clock);
}

void host_saw_stream(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);  // before locking (see join_streams)
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  topocoll::emu::merge_into(d.host, s->clock);
}

}  // namespace

extern "C" {

// ---- errors and devices ---------------------------------------------------------------------

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulated)";
    case cudaErrorIllegalState: return "operation not permitted when stream is capturing (emulated)";
    default: return "emulated CUDA error";
  }
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = topocoll::emu::last_error;
  topocoll::emu::last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return topocoll::emu::last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail_with(cudaErrorInvalidValue);
  *count = 8;  // the ordinals a test may use; all of them are this host's memory
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= 8) return fail_with(cudaErrorInvalidDevice);
  topocoll::emu::current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail_with(cudaErrorInvalidValue);
  *device = topocoll::emu::current_device;
  return cudaSuccess;
}

// TOPOCOLL_EMU_COMPUTE_CAPABILITY ("major.minor", default 9.0, an H100's): what every
// emulated GPU of the process reports, and so what the emulated NCCL's refusals follow.
static std::pair<int, int> emulated_compute_capability() {
  static const std::pair<int, int> capability = [] {
    const char* text = std::getenv("TOPOCOLL_EMU_COMPUTE_CAPABILITY");
    if (!text || !*text) return std::pair<int, int>{9, 0};
    int major = 0, minor = 0;
    char tail = 0;
    if (std::sscanf(text, "%d.%d%c", &major, &minor, &tail) == 2 && major > 0 && major < 100 && minor >= 0 &&
        minor < 10)
      return std::pair<int, int>{major, minor};
    std::fprintf(stderr, "cudart_emu WARN TOPOCOLL_EMU_COMPUTE_CAPABILITY=%s is not major.minor (9.0); using 9.0\n",
                 text);
    return std::pair<int, int>{9, 0};
  }();
  return capability;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return fail_with(cudaErrorInvalidValue);
  if (device < 0 || device >= 8) return fail_with(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = emulated_compute_capability().first; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = emulated_compute_capability().second; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;  // an H100 SXM's
    default: return fail_with(cudaErrorInvalidValue);  // not emulated: say so, never guess
  }
}

// One bus per ordinal, as nvidia-smi would list eight GPUs of one host.
cudaError_t cudaDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
  if (!pci_bus_id || len < 13 || device < 0 || device >= 8) return fail_with(cudaErrorInvalidValue);
  std::snprintf(pci_bus_id, std::size_t(len), "0000:%02X:00.0", 0x18 + 0x10 * device);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  ++topocoll::emu::device_synchronizations;
  synchronize_device();
  return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail_with(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p) return fail_with(cudaErrorMemoryAllocation);
  std::memset(p, 0xCD, size);
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  topocoll::emu::Allocation& a = d.live[static_cast<const char*>(p)];
  a.bytes = size;
  a.device = topocoll::emu::current_device;
  *ptr = p;
  return cudaSuccess;
}

// CUDA 11 and later: a pointer the runtime does not know (host memory never registered) is
// no error; it is reported unregistered, with no device pointer.
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (!attributes) return fail_with(cudaErrorInvalidValue);
  *attributes = cudaPointerAttributes{};
  auto& d = detector();
  std::lock_guard<std::mutex> lock(d.mu);
  const char* base = nullptr;
  if (const topocoll::emu::Allocation* a = d.find(ptr, &base)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = a->device;
    attributes->devicePointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  auto& d = detector();
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    auto it = d.live.find(static_cast<const char*>(ptr));
    if (it == d.live.end()) return fail_with(cudaErrorInvalidValue);
    bytes = it->second.bytes;
    d.live.erase(it);  // and its history: cudaFree synchronises the device
    d.synchronize_device();
  }
  ++topocoll::emu::device_synchronizations;
  std::memset(ptr, 0xDD, bytes);  // a use after free reads garbage even before reuse
  std::free(ptr);
  return cudaSuccess;
}

// Stream-ordered allocation: memory of the device's default pool. Fresh memory has no
// history, so the allocation orders nothing (as cudaMalloc here).
// TOPOCOLL_EMU_MALLOC_ASYNC_FAIL=[HOST:]BYTES[/COUNT]: stream-ordered allocations of more
// than BYTES fail with cudaErrorMemoryAllocation (the first COUNT of them; all without
// /COUNT), in every process or (HOST:) only in the one whose NCCL_HOSTID is HOST: a rank
// whose device is short of memory for a while (the interposer's scratch and votes come from
// cudaMallocAsync; the check program's own buffers from cudaMalloc).
struct MallocAsyncFailures {
  std::size_t above = SIZE_MAX;
  bool counted = false;             // only the first `left` fail
  std::atomic<long long> left{0};   // failures still to make, when counted
};
static MallocAsyncFailures& malloc_async_failures() {
  static MallocAsyncFailures f;
  static const bool parsed = [] {
    const char* text = std::getenv("TOPOCOLL_EMU_MALLOC_ASYNC_FAIL");
    if (!text || !*text) return true;
    // [HOST:]BYTES[/COUNT], BYTES and COUNT decimal digits: checked whole in every process,
    // so a typo warns everywhere, not only on the host it names.
    const std::string spec = text;
    const std::size_t colon = spec.find(':');
    const std::string host = colon == std::string::npos ? "" : spec.substr(0, colon);
    const std::string rest = colon == std::string::npos ? spec : spec.substr(colon + 1);
    const std::size_t slash = rest.find('/');
    const std::string bytes = rest.substr(0, slash);
    const std::string count = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const auto digits = [](const std::string& t) {
      return !t.empty() && t.size() <= 18 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if ((colon != std::string::npos && host.empty()) || !digits(bytes) ||
        (slash != std::string::npos && !digits(count))) {
      std::fprintf(stderr, "cudart_emu WARN TOPOCOLL_EMU_MALLOC_ASYNC_FAIL=%s is not [HOST:]BYTES[/COUNT]; ignored\n", text);
      return true;
    }
    const char* mine = std::getenv("NCCL_HOSTID");
    if (!host.empty() && (!mine || host != mine)) return true;
    f.above = std::size_t(std::stoull(bytes));
    if (slash != std::string::npos) {
      f.counted = true;
      f.left = std::stoll(count);
    }
    return true;
  }();
  (void)parsed;
  return f;
}

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t) {
  MallocAsyncFailures& f = malloc_async_failures();
  if (size > f.above && (!f.counted || f.left.fetch_sub(1) > 0)) return fail_with(cudaErrorMemoryAllocation);
  return cudaMalloc(ptr, size);
}

// Stream-ordered free: no device-wide wait. The free is work of `stream`: it counts as a
// write of the whole allocation there, so an access not ordered before it is reported as a
// race, and the memory goes when the stream reaches it.
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (!ptr) return cudaSuccess;
  std::size_t bytes = 0;
  {
    auto& d = detector();
    std::lock_guard<std::mutex> lock(d.mu);
    auto it = d.live.find(static_cast<const char*>(ptr));
    if (it == d.live.end()) return fail_with(cudaErrorInvalidValue);
    bytes = it->second.bytes;
  }
  topocoll::emu::enqueue(stream, [ptr, bytes, stream] {
    topocoll::emu::access(ptr, bytes, true, stream, "cudaFreeAsync");
    auto& d = detector();
    {
      std::lock_guard<std::mutex> lock(d.mu);
      d.live.erase(static_cast<const char*>(ptr));
    }
    std::memset(ptr, 0xDD, bytes);
    std::free(ptr);
  });
  return cudaSuccess;
}

static void check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return;
  if (kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice)
    check_device_range(dst, count, "cudaMemcpy destination");
  if (kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost)
    check_device_range(src, count, "cudaMemcpy source");
}

// Synchronous copies and memsets are work of the legacy default stream (see RaceDetector).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  check_copy(dst, src, count, kind);
  if (count)
    enqueue(cudaStreamLegacy, [=] {
      topocoll::emu::access(src, count, false, cudaStreamLegacy, "cudaMemcpy source");
      topocoll::emu::access(dst, count, true, cudaStreamLegacy, "cudaMemcpy destination");
      std::memmove(dst, src, count);
    });
  // Only a copy into host memory is complete when the call returns.
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault)
    host_saw_stream(cudaStreamLegacy);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  topocoll::emu::count_event("cudaMemcpyAsync");
  check_copy(dst, src, count, kind);
  if (count)
    enqueue(stream, [=] {
      topocoll::emu::access(src, count, false, stream, "cudaMemcpyAsync source");
      topocoll::emu::access(dst, count, true, stream, "cudaMemcpyAsync destination");
      std::memmove(dst, src, count);
    });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t count) {
  if (count) check_device_range(dst, count, "cudaMemset");
  if (count)
    enqueue(cudaStreamLegacy, [=] {
      topocoll::emu::access(dst, count, true, cudaStreamLegacy, "cudaMemset");
      std::memset(dst, value, count);
    });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  if (count) check_device_range(dst, count, "cudaMemsetAsync");
  if (count)
    enqueue(stream, [=] {
      topocoll::emu::access(dst, count, true, stream, "cudaMemsetAsync");
      std::memset(dst, value, count);
    });
  return cudaSuccess;
}

// ---- streams --------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (!stream) return fail_with(cudaErrorInvalidValue);
  *stream = new CUstream_st(false, (flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int) {
  return cudaStreamCreateWithFlags(stream, flags);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(stream) <= 2) return fail_with(cudaErrorInvalidValue);
  if (stream->capture) return fail_with(cudaErrorIllegalState);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  // Synchronising a capturing stream is illegal in CUDA, and it is a bug to do it here too.
  if (resolve(stream)->capture) return fail_with(cudaErrorIllegalState);
  host_saw_stream(stream);
  return cudaSuccess;
}

// Always done here: the caller that sees cudaSuccess has seen the stream's work complete.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (resolve(stream)->capture) return fail_with(cudaErrorIllegalState);
  host_saw_stream(stream);
  return cudaSuccess;
}

// The wait is stream work: under capture it takes effect at each launch, on the launching
// stream, with the event's clock as it is then.
// A host function is work of its stream like any other (the emulation runs a stream's work
// where it is issued, in order).
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (!fn) return fail_with(cudaErrorInvalidValue);
  enqueue(stream, [fn, user_data] { fn(user_data); });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  if (const cudaError_t e = topocoll::emu::take_injected_failure("cudaStreamWaitEvent"); e != cudaSuccess)
    return fail_with(e);
  enqueue(stream, [event] {
    auto& d = detector();
    std::lock_guard<std::mutex> lock(d.mu);
    topocoll::emu::merge_into(topocoll::emu::running_on->clock, event->clock);
  });
  return cudaSuccess;
}

// ---- capture and graphs ---------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  CUstream_st* s = resolve(stream);
  if (s->capture) return fail_with(cudaErrorIllegalState);
  static std::atomic<unsigned long long> next_capture_id{1};
  s->capture = new CUgraph_st;
  s->capture->id = next_capture_id++;
  s->capture->mode = mode;
  s->capture->owner = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(topocoll::emu::captures_mu);
    topocoll::emu::active_captures.push_back(s->capture);
  }
  s->global_capture = mode == cudaStreamCaptureModeGlobal;
  if (s->global_capture) ++topocoll::emu::global_captures;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  CUstream_st* s = resolve(stream);
  if (!graph || !s->capture) return fail_with(cudaErrorIllegalState);
  {
    std::lock_guard<std::mutex> lock(topocoll::emu::captures_mu);
    auto& active = topocoll::emu::active_captures;
    active.erase(std::find(active.begin(), active.end(), s->capture));
  }
  *graph = s->capture;
  s->capture = nullptr;
  if (s->global_capture) --topocoll::emu::global_captures;
  s->global_capture = false;
  if ((*graph)->invalidated) {
    delete *graph;
    *graph = nullptr;
    return fail_with(cudaErrorStreamCaptureInvalidated);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return fail_with(cudaErrorInvalidValue);
  // CUDA refuses to answer for the legacy stream while another stream captures in global
  // mode (the legacy stream would join the capture implicitly), and records the error.
  CUstream_st* s = resolve(stream);
  if (s->legacy && !s->capture && topocoll::emu::global_captures.load() > 0)
    return fail_with(cudaErrorStreamCaptureImplicit);
  *status = s->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

// The capture's id (one capture per stream here: each capturing stream is its own graph);
// the dependency outputs are not emulated. CUDA 13 declares it with edge data; CUDA 12's
// header names the 6-argument cudaStreamGetCaptureInfo_v2 through a macro.
#if CUDART_VERSION >= 13000
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** dependencies, const cudaGraphEdgeData** edge_data,
                                     size_t* num_dependencies) {
  if (edge_data) return fail_with(cudaErrorNotSupported);
#else
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** dependencies, size_t* num_dependencies) {
#endif
  if (dependencies || num_dependencies) return fail_with(cudaErrorNotSupported);
  if (const cudaError_t e = cudaStreamIsCapturing(stream, status); e != cudaSuccess) return e;
  CUstream_st* s = resolve(stream);
  if (id && s->capture) *id = s->capture->id;
  if (graph) *graph = s->capture;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode) return fail_with(cudaErrorInvalidValue);
  std::swap(*mode, topocoll::emu::capture_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return fail_with(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail_with(cudaErrorInvalidValue);
  for (const auto& w : exec->work) enqueue(stream, w);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

// ---- events ---------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  if (const cudaError_t e = topocoll::emu::take_injected_failure("cudaEventCreateWithFlags"); e != cudaSuccess)
    return fail_with(e);
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  if (const cudaError_t e = topocoll::emu::take_injected_failure("cudaEventRecord"); e != cudaSuccess)
    return fail_with(e);
  enqueue(stream, [event] {
    event->when = std::chrono::steady_clock::now();
    event->recorded = true;
    auto& d = detector();
    std::lock_guard<std::mutex> lock(d.mu);
    event->clock = topocoll::emu::running_on->clock;
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  if (topocoll::emu::unsafe_call_prohibited()) return fail_with(cudaErrorStreamCaptureUnsupported);
  host_saw(event->clock);
  return cudaSuccess;
}

// An injected cudaErrorNotReady stands for work still running: as in CUDA, it is no error
// of the thread's (cudaGetLastError does not return it).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  if (const cudaError_t e = topocoll::emu::take_injected_failure("cudaEventQuery"); e != cudaSuccess)
    return e == cudaErrorNotReady ? e : fail_with(e);
  if (topocoll::emu::unsafe_call_prohibited()) return fail_with(cudaErrorStreamCaptureUnsupported);
  host_saw(event->clock);
  return cudaSuccess;
}

// As CUDA: both events recorded and made without cudaEventDisableTiming.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail_with(cudaErrorInvalidValue);
  if (!start->timing || !end->timing || !start->recorded || !end->recorded)
    return fail_with(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

}  // extern "C"
