// LocalOpWorker: one thread that runs a host backend's overlapped local ops (reduce, copy,
// finalize of a pipelined round, exec/pipeline.h) in submission order, while the caller's
// thread moves the next round's bytes. Started at the first submit; join() waits until
// everything submitted has run and rethrows the first error any of it threw.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace topocoll::exec {

class LocalOpWorker {
 public:
  LocalOpWorker() = default;
  LocalOpWorker(const LocalOpWorker&) = delete;
  LocalOpWorker& operator=(const LocalOpWorker&) = delete;
  ~LocalOpWorker();

  void submit(std::function<void()> work);
  void join();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace topocoll::exec
