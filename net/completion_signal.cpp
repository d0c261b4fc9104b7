#include "net/completion_signal.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <new>

namespace topocoll::net {

uint64_t CompletionSignal::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void CompletionSignal::notify() {
  int fd;
  {
    std::lock_guard lock(mutex_);
    ++generation_;
    fd = event_fd_;
  }
  changed_.notify_all();
  if (fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof one);  // a full counter still wakes
  }
}

int CompletionSignal::poll_descriptor() {
  std::lock_guard lock(mutex_);
  if (!event_fd_tried_) {
    event_fd_tried_ = true;
    event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  return event_fd_;
}

void CompletionSignal::drain() {
  int fd;
  {
    std::lock_guard lock(mutex_);
    fd = event_fd_;
  }
  uint64_t counter;
  if (fd >= 0) [[maybe_unused]] ssize_t n = ::read(fd, &counter, sizeof counter);
}

void CompletionSignal::wait_for(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return generation_ != seen; });
}

CompletionSignal& completion_signal() {
  // Never destroyed: progress threads still running while exit() runs the static
  // destructors (a process that never closed its connections; NCCL's proxy threads) notify
  // it. In static storage, so nothing is allocated for it per load of the library.
  alignas(CompletionSignal) static unsigned char storage[sizeof(CompletionSignal)];
  static CompletionSignal* signal = new (storage) CompletionSignal();
  return *signal;
}

}  // namespace topocoll::net
