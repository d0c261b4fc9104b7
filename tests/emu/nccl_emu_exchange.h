// One NCCL operation as the emulation runs it: the messages it sends, the messages it
// receives, and what it does once all have arrived. post() never waits on a peer (sends are
// eager), so running every op's post() before any op's complete() cannot deadlock for any
// set of ops whose sends and receives match: that is how a group runs.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "tests/emu/emu_runtime.h"
#include "tests/emu/nccl_emu_comm.h"

namespace topocoll::emu {

class Exchange {
 public:
  Exchange(std::string what, const ncclComm* comm, Channel channel)
      : what_(std::move(what)), comm_(comm), channel_(channel) {}
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const std::string& what() const { return what_; }
  const ncclComm* comm() const { return comm_; }

  // `data` is read when the op posts (at each replay under graph capture), not now.
  void send(int peer, const void* data, std::size_t bytes) { sends_.push_back({peer, data, bytes}); }
  void receive(int peer, void* into, std::size_t bytes) { receives_.push_back({peer, into, bytes}); }
  // Storage the op owns for as long as it exists (across graph replays).
  std::byte* scratch(std::size_t bytes) { return scratch_.emplace_back(bytes).data(); }
  // Device bytes the op writes other than through receive() (a reduction's destination):
  // declared to the stream-ordering race detector with the op's buffers (declare_accesses).
  void writes(void* into, std::size_t bytes) { writes_.push_back({-1, into, bytes}); }
  // Declares every device byte the op reads (sends) and writes (receives, writes()) as work
  // of `stream` (see topocoll::emu::access). Called when the op runs.
  void declare_accesses(cudaStream_t stream) const {
    for (const Outgoing& m : sends_) access(m.data, m.bytes, false, stream, what_.c_str());
    for (const Incoming& m : receives_) access(m.into, m.bytes, true, stream, what_.c_str());
    for (const Incoming& m : writes_) access(m.into, m.bytes, true, stream, what_.c_str());
  }
  // Runs after every receive has arrived: local reductions, publishing a new communicator.
  void then(std::function<void()> finish) { finish_ = std::move(finish); }

  void post() const {
    for (const Outgoing& m : sends_) send_to(*comm_, m.peer, channel_, m.data, m.bytes);
  }
  void complete() const {
    for (const Incoming& m : receives_) receive_from(*comm_, m.peer, channel_, m.into, m.bytes);
    if (finish_) finish_();
  }

 private:
  struct Outgoing {
    int peer;
    const void* data;
    std::size_t bytes;
  };
  struct Incoming {
    int peer;
    void* into;
    std::size_t bytes;
  };
  std::string what_;
  const ncclComm* comm_;
  Channel channel_;
  std::vector<Outgoing> sends_;
  std::vector<Incoming> receives_;
  std::vector<Incoming> writes_;
  std::deque<std::vector<std::byte>> scratch_;
  std::function<void()> finish_;
};

}  // namespace topocoll::emu
