#include "plugin/interposer/rank_exchange.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "plugin/interposer/device_guard.h"

namespace topocoll::plugin::interposer {
namespace {

struct DeviceSlot {
  int device = -1;  // whose memory and stream
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  bool joined = false;
  bool kept = false;  // a VoteCell's: neither freed nor destroyed here
};

// Opens a slot on `device`, which the caller made current (checked: a device that cannot be
// selected is an error like a failed allocation): its own non-blocking stream (the
// per-thread default stream when none can be created, with *stream_error set: the
// collective still goes out) and `bytes` of device memory allocated on that stream.
// Returns the allocation's error: without memory this rank cannot join.
cudaError_t open_slot(const ExchangeCudaCalls& cuda, int device, std::size_t bytes, DeviceSlot* s,
                      cudaError_t* stream_error) {
  int current = -1;
  cudaError_t e = cuda.get_device(&current);
  if (e == cudaSuccess && current != device) e = cudaErrorInvalidDevice;
  if (e != cudaSuccess) return e;
  s->device = device;
  *stream_error = cuda.stream_create(&s->stream, cudaStreamNonBlocking);
  if (*stream_error != cudaSuccess) {
    // The per-thread default stream waits for the legacy stream's work only, not for every
    // blocking stream as the legacy one would.
    s->stream = cudaStreamPerThread;
    cudaGetLastError();
  }
  e = cuda.malloc_async(&s->buffer, bytes, s->stream);
  if (e != cudaSuccess) s->buffer = nullptr;
  return e;
}

// A VoteCell's memory and stream as the slot (checked like open_slot's device).
cudaError_t use_cell(const ExchangeCudaCalls& cuda, int device, const VoteCell& cell, DeviceSlot* s) {
  int current = -1;
  cudaError_t e = cuda.get_device(&current);
  if (e == cudaSuccess && current != device) e = cudaErrorInvalidDevice;
  if (e != cudaSuccess) return e;
  s->device = device;
  s->buffer = cell.buffer();
  s->stream = cell.stream();
  s->kept = true;
  return cudaSuccess;
}

// Stream-ordered: the free waits for the slot's own work only, never for the whole device
// as cudaFree would (the ready vote runs when scratch grows, on a served call's path).
void close_slot(const ExchangeCudaCalls& cuda, DeviceSlot& s) {
  if (s.kept) return;
  if (s.buffer) cuda.free_async(s.buffer, s.stream);
  if (s.stream && s.stream != cudaStreamPerThread) cuda.stream_destroy(s.stream);
  s.buffer = nullptr;
  s.stream = nullptr;
  cudaGetLastError();
}

// The slots of one exchange or vote, closed when it ends however it ends (an exception from a
// host allocation included: freed behind their own work, on their own streams, each with its
// own device current, as the normal path closes them), and this thread's capture mode given
// back.
struct SlotsInUse {
  const ExchangeCudaCalls& cuda;
  std::vector<DeviceSlot>& slots;
  cudaStreamCaptureMode& mode;
  CurrentDeviceGuard& device_guard;
  ~SlotsInUse() {
    for (DeviceSlot& s : slots) {
      if (s.buffer || s.stream) device_guard.use(s.device);
      close_slot(cuda, s);
    }
    cudaThreadExchangeStreamCaptureMode(&mode);
  }
};

// True when `v`'s communicator is being aborted (ReadyVote::abandon); records it.
bool abandoned_now(ReadyVote& v) {
  if (!v.abandon || !v.abandon->load()) return false;
  v.abandoned = true;
  v.error = "the communicator was aborted, revoked or released while its ready vote waited for its peers";
  return true;
}

// One stream's collective waited for on the host (the exchange's allgather, a vote's
// allreduce), polled so that the wait can end without the collective: an abort from
// another thread (`abandon`), NCCL reporting an asynchronous error on the communicator, or
// the init's time limit. The collective itself stays enqueued (the calls on the
// communicator stay in step with the peers'); only this rank stops waiting for it.
struct StreamWait {
  cudaStream_t stream = nullptr;
  int device = -1;
  ncclComm_t comm = nullptr;
  const std::atomic<bool>* abandon = nullptr;
  WaitLimit limit;
  const char* what = "";  // what waits, for the message
  // Out.
  bool waiting = true;
  cudaError_t result = cudaSuccess;  // the stream's, when it finished
  bool abandoned = false;
  std::string gave_up;               // why it stopped waiting without the result
};

// Polls every wait at once, yielding for the first millisecond (a collective behind no
// pending work is done in microseconds), then every 100 us; NCCL's asynchronous error is
// asked from the first millisecond on, every 10 ms. By the clock, not by counting polls: on
// a loaded machine a thousand yields can take seconds, longer than a short init limit.
// `while_waiting` (when set) runs at every poll while some wait goes on.
void wait_for_streams(const ExchangeCudaCalls& cuda, std::vector<StreamWait>& waits, CurrentDeviceGuard& device_guard,
                      const std::function<void()>& while_waiting) {
  using std::chrono::steady_clock;
  const steady_clock::time_point began = steady_clock::now();
  steady_clock::time_point next_ask = began + std::chrono::milliseconds(1);
  for (;;) {
    const steady_clock::time_point now = steady_clock::now();
    const bool ask_nccl = now >= next_ask;
    if (ask_nccl) next_ask = now + std::chrono::milliseconds(10);
    bool any = false;
    for (StreamWait& w : waits) {
      if (!w.waiting) continue;
      device_guard.use(w.device);
      const cudaError_t e = cuda.stream_query(w.stream);
      if (e != cudaErrorNotReady) {
        w.result = e;
        w.waiting = false;
        continue;
      }
      // Recorded as the thread's last error; cleared, but never an error of the user's.
      if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
      if (w.abandon && w.abandon->load()) {
        w.abandoned = true;
        w.waiting = false;
        continue;
      }
      ncclResult_t async = ncclSuccess;
      if (ask_nccl && pncclCommGetAsyncError(w.comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        w.gave_up = std::string("NCCL reports ") + pncclGetErrorString(async) + " on the communicator while " +
                    w.what + " waited for its peers";
        w.waiting = false;
        continue;
      }
      if (now >= w.limit.at) {
        w.gave_up = std::string(w.what) + " still waited for its peers when " + w.limit.name + " passed (" +
                    w.limit.setting + "=" + std::to_string(w.limit.seconds) + "): " + w.limit.never_comes;
        w.waiting = false;
        continue;
      }
      any = true;
    }
    if (!any) return;
    if (while_waiting) while_waiting();
    if (now - began < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

WaitLimit WaitLimit::after(int64_t seconds) {
  WaitLimit limit;
  if (seconds > 0) {
    limit.at = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    limit.seconds = seconds;
  }
  return limit;
}

WaitLimit WaitLimit::for_a_call(int64_t seconds) {
  WaitLimit limit = after(seconds);
  limit.name = "topocoll's time limit for its votes";
  limit.setting = "TOPOCOLL_VOTE_TIMEOUT_S";
  limit.never_comes = "a peer that never reaches this call (it ended, hung, or waits for work this rank issues "
                      "later) never votes";
  return limit;
}

std::unique_ptr<VoteCell> VoteCell::create(int device) {
  const ExchangeCudaCalls& cuda = exchange_cuda_calls();
  CurrentDeviceGuard device_guard;
  device_guard.use(device);
  std::unique_ptr<VoteCell> cell(new VoteCell);
  cell->device_ = device;
  DeviceSlot s;
  cudaError_t stream_error = cudaSuccess;
  // Relaxed for this thread, as for the exchange: a graph another thread captures in global
  // mode would otherwise make these calls fail (and invalidate that capture).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t e = open_slot(cuda, device, sizeof(int32_t), &s, &stream_error);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess || stream_error != cudaSuccess) {
    const cudaError_t why = e != cudaSuccess ? e : stream_error;
    close_slot(cuda, s);
    cudaGetLastError();
    throw std::runtime_error(std::string("cannot keep device memory and a stream for the votes on the "
                                         "communicator's calls: ") + cudaGetErrorString(why));
  }
  cell->buffer_ = s.buffer;
  cell->stream_ = s.stream;
  return cell;
}

VoteCell::~VoteCell() {
  CurrentDeviceGuard device_guard;
  device_guard.use(device_);
  // Relaxed, as the scratch's release: another thread may be capturing a graph.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  DeviceSlot s;
  s.buffer = buffer_;
  s.stream = stream_;
  close_slot(exchange_cuda_calls(), s);
  cudaThreadExchangeStreamCaptureMode(&mode);
}

ExchangeCudaCalls& exchange_cuda_calls() {
  static ExchangeCudaCalls calls{cudaGetDevice, cudaMallocAsync, cudaFreeAsync, cudaStreamCreateWithFlags,
                                 cudaStreamDestroy, cudaStreamSynchronize, cudaMemcpyAsync,
                                 cudaMemsetAsync, cudaStreamQuery};
  return calls;
}

void exchange_identities(std::span<IdentityExchange> batch) {
  if (batch.empty()) return;
  CurrentDeviceGuard device_guard;
  // Relaxed for this thread: a graph being captured in global mode by another thread would
  // otherwise make the allocations below fail (and invalidate that capture).
  std::vector<DeviceSlot> slots(batch.size());
  const std::size_t rec = sizeof(RankIdentity);
  const ExchangeCudaCalls& cuda = exchange_cuda_calls();
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const SlotsInUse in_use{cuda, slots, mode, device_guard};

  for (std::size_t i = 0; i < batch.size(); ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(x.device);
    cudaError_t stream_error = cudaSuccess;
    cudaError_t e = open_slot(cuda, x.device, rec * std::size_t(x.nranks), &s, &stream_error);
    if (e != cudaSuccess) {
      // The one failure that keeps this rank out: no device memory to gather into.
      x.error = std::string("CUDA error preparing the topocoll identity exchange (") +
                cudaGetErrorString(e) + "); this rank cannot join it";
      cudaGetLastError();
      continue;
    }
    // From here on this rank always joins: a later failure only turns its record into a
    // "cannot serve" one, so every rank falls back together instead of its peers waiting.
    const char* failed = nullptr;
    if (stream_error != cudaSuccess) {
      failed = "cudaStreamCreate";
      e = stream_error;
    }
    // On the exchange's own stream: a cudaMemcpy from pageable memory runs on the legacy
    // stream and may return before its DMA lands, with no order against the non-blocking
    // stream the allgather uses, so the allgather could send stale bytes. `x.mine` lives
    // until the stream is synchronised below.
    char* slot = static_cast<char*>(s.buffer) + rec * std::size_t(x.rank);
    if (!failed) {
      e = cuda.memcpy_async(slot, &x.mine, rec, cudaMemcpyHostToDevice, s.stream);
      if (e != cudaSuccess) {
        failed = "cudaMemcpyAsync";
        cudaGetLastError();
      }
    }
    if (failed) {
      x.prepare_error = std::string(failed) + ": " + cudaGetErrorString(e);
      mark_unserved(x.mine, x.prepare_error.c_str());
      // If even this copy fails, a zeroed slot (wrong magic) still makes every rank fall back.
      if (cuda.memcpy_async(slot, &x.mine, rec, cudaMemcpyHostToDevice, s.stream) != cudaSuccess) {
        cudaGetLastError();
        cuda.memset_async(slot, 0, rec, s.stream);
        cudaGetLastError();
      }
    }
  }

  // What the host needs after joining is allocated before: from the allgather on, a rank
  // out of host memory could no longer finish what its peers finish.
  // Inside NCCL's group nothing allocates: a throw there would leave the group open with
  // collectives queued on slots the unwinding frees.
  std::vector<StreamWait> waits(batch.size());
  std::vector<ncclResult_t> gathered(batch.size(), ncclSuccess);
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (slots[i].buffer) batch[i].all.resize(std::size_t(batch[i].nranks));

  ncclResult_t r = pncclGroupStart();
  for (std::size_t i = 0; i < batch.size() && r == ncclSuccess; ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    // Cannot join without device memory (x.error says so; the caller marks the communicator
    // failed). The peers then wait up to their init limit: only when CUDA fails on a device
    // that holds a communicator NCCL just created.
    if (!s.buffer) continue;
    char* base = static_cast<char*>(s.buffer);
    gathered[i] = pncclAllGather(base + rec * std::size_t(x.rank), base, rec, ncclUint8, x.comm, s.stream);
    s.joined = gathered[i] == ncclSuccess;
  }
  const ncclResult_t er = pncclGroupEnd();
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (gathered[i] != ncclSuccess) batch[i].error = std::string("ncclAllGather: ") + pncclGetErrorString(gathered[i]);

  for (std::size_t i = 0; i < batch.size(); ++i) {
    IdentityExchange& x = batch[i];
    waits[i].stream = slots[i].stream;
    waits[i].device = x.device;
    waits[i].comm = x.comm;
    waits[i].limit = x.limit;
    waits[i].what = "the topocoll init exchange";
    waits[i].waiting = slots[i].joined && er == ncclSuccess && x.error.empty();
    if (waits[i].waiting) x.joined = true;
  }
  wait_for_streams(cuda, waits, device_guard, {});

  for (std::size_t i = 0; i < batch.size(); ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(x.device);
    if (x.joined && !waits[i].gave_up.empty()) {
      // The allgather stays enqueued; its slot is freed behind it, on its own stream.
      x.gave_up = true;
      x.error = waits[i].gave_up;
    } else if (x.joined) {
      cudaError_t e = waits[i].result;
      // Same stream again, then wait: never behind the user's work on the legacy stream.
      if (e == cudaSuccess)
        e = cuda.memcpy_async(x.all.data(), s.buffer, rec * x.all.size(), cudaMemcpyDeviceToHost,
                            s.stream);
      if (e == cudaSuccess) e = cuda.stream_synchronize(s.stream);
      if (e != cudaSuccess) {
        x.error = std::string("CUDA error in the identity exchange: ") + cudaGetErrorString(e);
        x.all.clear();
        cudaGetLastError();
      }
    } else if (x.error.empty()) {
      x.error = std::string("ncclGroupEnd: ") + pncclGetErrorString(er);
    }
    if (!x.joined || !x.error.empty()) x.all.clear();
    close_slot(cuda, s);
  }
}

void agree_ready(std::span<ReadyVote> batch, const std::function<void()>& while_waiting) {
  if (batch.empty()) return;
  CurrentDeviceGuard device_guard;
  std::vector<DeviceSlot> slots(batch.size());
  std::vector<StreamWait> waits(batch.size());  // before joining, as for the exchange
  const ExchangeCudaCalls& cuda = exchange_cuda_calls();
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const SlotsInUse in_use{cuda, slots, mode, device_guard};

  for (std::size_t i = 0; i < batch.size(); ++i) {
    ReadyVote& v = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(v.device);
    cudaError_t stream_error = cudaSuccess;
    const cudaError_t e = v.cell ? use_cell(cuda, v.device, *v.cell, &s)
                                 : open_slot(cuda, v.device, sizeof(int32_t), &s, &stream_error);
    if (e != cudaSuccess) {
      v.error = std::string("CUDA error preparing the topocoll ready vote (") +
                cudaGetErrorString(e) + "); this rank cannot join it";
      cudaGetLastError();
      continue;
    }
    const int32_t vote = v.ready ? 1 : 0;
    // `vote` is pageable and short-lived: waited for before it goes out of scope.
    cudaError_t copied = cuda.memcpy_async(s.buffer, &vote, sizeof vote, cudaMemcpyHostToDevice, s.stream);
    if (copied == cudaSuccess) copied = cuda.stream_synchronize(s.stream);
    if (copied != cudaSuccess) {
      // A zero vote (any bytes of it zero make the minimum 0 or less): every rank falls back.
      cudaGetLastError();
      cuda.memset_async(s.buffer, 0, sizeof vote, s.stream);
      cudaGetLastError();
      v.ready = 0;
      if (v.error.empty()) v.error = std::string("cudaMemcpyAsync: ") + cudaGetErrorString(copied);
    }
  }

  // Nothing allocates inside NCCL's group (as for the exchange).
  std::vector<ncclResult_t> reduced(batch.size(), ncclSuccess);
  std::vector<char> aborted(batch.size(), 0);
  ncclResult_t r = pncclGroupStart();
  for (std::size_t i = 0; i < batch.size() && r == ncclSuccess; ++i) {
    if (!slots[i].buffer) continue;
    if (batch[i].abandon && batch[i].abandon->load()) {
      aborted[i] = 1;
      continue;
    }
    reduced[i] = pncclAllReduce(slots[i].buffer, slots[i].buffer, 1, ncclInt32, ncclMin, batch[i].comm,
                                slots[i].stream);
    slots[i].joined = reduced[i] == ncclSuccess;
  }
  const ncclResult_t er = pncclGroupEnd();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (aborted[i]) abandoned_now(batch[i]);
    if (reduced[i] != ncclSuccess) batch[i].error = std::string("ncclAllReduce: ") + pncclGetErrorString(reduced[i]);
  }

  for (std::size_t i = 0; i < batch.size(); ++i) {
    const ReadyVote& v = batch[i];
    waits[i].stream = slots[i].stream;
    waits[i].device = v.device;
    waits[i].comm = v.comm;
    waits[i].abandon = v.abandon;
    waits[i].limit = v.limit;
    waits[i].what = v.what;
    waits[i].waiting = slots[i].joined && er == ncclSuccess;
    batch[i].joined = waits[i].waiting;
  }
  wait_for_streams(cuda, waits, device_guard, while_waiting);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    ReadyVote& v = batch[i];
    if (waits[i].abandoned) {
      abandoned_now(v);  // the flag stays set once seen
    } else if (!waits[i].gave_up.empty()) {
      v.gave_up = true;
      v.error = waits[i].gave_up;
    }
  }

  for (std::size_t i = 0; i < batch.size(); ++i) {
    ReadyVote& v = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(v.device);
    if (v.abandoned || v.gave_up) {
      // Nothing read back: the slot is freed after the allreduce on its own stream, which
      // NCCL's abort ends.
    } else if (s.joined && er == ncclSuccess) {
      int32_t min = 0;
      cudaError_t e = waits[i].result;
      if (e == cudaSuccess)
        e = cuda.memcpy_async(&min, s.buffer, sizeof min, cudaMemcpyDeviceToHost, s.stream);
      if (e == cudaSuccess) e = cuda.stream_synchronize(s.stream);
      if (e != cudaSuccess) {
        if (v.error.empty()) v.error = std::string("CUDA error in the ready vote: ") + cudaGetErrorString(e);
        cudaGetLastError();
      }
      v.all_ready = e == cudaSuccess && min == 1 && v.ready;
      v.known = e == cudaSuccess || !v.ready;
      // Stopped before the result was read (release_fence.h): a revoke ends the allreduce's
      // kernel early, leaving this rank's own vote in the buffer, so the result is not its
      // peers'; and a destroy past its bound frees the communicator next.
      if (abandoned_now(v)) v.all_ready = v.known = false;
    } else if (v.error.empty() && s.buffer) {
      v.error = std::string("ncclGroupEnd: ") + pncclGetErrorString(er);
    }
    close_slot(cuda, s);
  }
}

}  // namespace topocoll::plugin::interposer
