// Wakes whoever waits for a request of this process to finish (the host backend's
// wait_all) when a progress thread finishes one, so waiting costs no CPU: without it the
// waiter must poll test(), and a few processes polling on a small machine take the cores
// the progress threads and the kernel need to move the bytes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace topocoll::net {

class CompletionSignal {
 public:
  // A counter that changes whenever a request finishes or a connection fails.
  uint64_t generation() const;
  void notify();
  // Returns once the generation differs from `seen` or the timeout passed.
  void wait_for(uint64_t seen, std::chrono::milliseconds timeout);
  // An eventfd that becomes readable on every notify(), for a waiter that must also poll
  // sockets of its own (the host transport's eager channel). Created on first use; -1 when
  // no eventfd can be made (callers then poll with a short timeout). drain() resets it.
  int poll_descriptor();
  void drain();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t generation_ = 0;
  int event_fd_ = -1;  // guarded by mutex_ when created; written without it
  bool event_fd_tried_ = false;
};

// The process's one signal (every connection notifies it).
CompletionSignal& completion_signal();

}  // namespace topocoll::net
