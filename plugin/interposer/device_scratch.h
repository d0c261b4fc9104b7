// Device scratch of one communicator: grown on demand, freed with the communicator
// (destroy/abort). Memory comes from CUDA's stream-ordered allocator on a stream of the
// scratch's own, and goes back the same way once every recorded use has finished
// (cudaFreeAsync after waiting for the uses' events): no free ever waits for the whole
// device, so an abort returns while another communicator's kernel is stuck (NCCL's promise
// for ncclCommAbort). A grown-out eager buffer is freed that way at once; a grown-out
// captured buffer is kept until the communicator goes, since a CUDA graph captured earlier
// may still be replayed on it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace topocoll::plugin::interposer {

class DeviceScratch {
 public:
  explicit DeviceScratch(int device) : device_(device) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` of device memory on the communicator's device (the caller has made it
  // current). Allocation is allowed while a stream is being captured (relaxed capture mode
  // for the one cudaMalloc, as CUDA graph-aware allocators do). Null on allocation failure.
  // Calls being captured into a CUDA graph (`captured`) get a region of their own, never
  // handed to eager calls: no event can order a graph replayed later against eager calls
  // (an event recorded outside a capture cannot be waited on inside it), so sharing one
  // buffer would let a replay and an eager call on another stream race on it. Graphs
  // replayed concurrently on one communicator still share the captured region.
  void* reserve(std::size_t bytes, bool captured = false);
  std::size_t capacity() const { return eager_.capacity; }
  // Whether reserve(bytes, captured) is served without allocating.
  bool fits(std::size_t bytes, bool captured = false) const {
    return bytes <= (captured ? captured_ : eager_).capacity;
  }

  // The eager capacity every rank of the communicator is known to hold, raised only by a
  // growth vote every rank won (agree, batch_scratch.cpp). Whether a batch votes follows it,
  // never this rank's own capacity: a vote lost to a peer that could not allocate may have
  // grown this rank alone, and had it then skipped the next vote that peer runs, the two
  // would issue different collectives. Every rank's capacity is at least this (both grow
  // by grown_capacity from a capacity at least the agreed one).
  bool agreed_fits(std::size_t bytes) const { return bytes <= agreed_; }
  void agree(std::size_t bytes) { agreed_ = grown_capacity(agreed_, bytes); }

  // What a region of `capacity` bytes grows to for `bytes`: doubled from 1 MiB until it holds
  // them.
  static std::size_t grown_capacity(std::size_t capacity, std::size_t bytes) {
    if (bytes <= capacity) return capacity;
    std::size_t grown = capacity ? capacity : std::size_t(1) << 20;
    while (grown < bytes) grown *= 2;
    return grown;
  }

  // Orders a call on `stream` after every use of the scratch by the previous batch (the
  // calls of one run), on whichever streams. Skipped while `stream` is being captured (an event
  // recorded outside the capture cannot be waited on inside it): use one stream per
  // communicator in a graph.
  void order_after_previous(cudaStream_t stream);
  // After a batch: the streams its calls on this communicator ran on. One event per stream,
  // not one for the last stream only: a group may run calls of one communicator on streams
  // A and B, and the next call on stream C must wait for both before reusing their regions.
  void mark_used(const std::vector<cudaStream_t>& streams);

 private:
  struct Use {
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
  };

  struct Region {
    void* buffer = nullptr;
    std::size_t capacity = 0;
  };

  // Frees `buffer` once the previous batch's uses are done, on alloc_stream_.
  void release_after_uses(void* buffer);

  int device_;
  cudaStream_t alloc_stream_ = nullptr;  // non-blocking; created with the first buffer
  Region eager_;
  Region captured_;
  std::size_t agreed_ = 0;
  std::vector<void*> retired_;
  std::vector<Use> last_uses_;        // the previous batch's streams, each with its event
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace topocoll::plugin::interposer
