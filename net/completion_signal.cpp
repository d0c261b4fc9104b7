#include "net/completion_signal.h"

namespace topocoll::net {

uint64_t CompletionSignal::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void CompletionSignal::notify() {
  {
    std::lock_guard lock(mutex_);
    ++generation_;
  }
  changed_.notify_all();
}

void CompletionSignal::wait_for(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return generation_ != seen; });
}

CompletionSignal& completion_signal() {
  static CompletionSignal signal;
  return signal;
}

}  // namespace topocoll::net
