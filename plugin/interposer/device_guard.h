// Makes a communicator's CUDA device current for topocoll's allocations and launches, and
// gives the calling thread its previous device back afterwards, without ever creating a CUDA
// context the thread did not have. A thread that never touched CUDA (PyTorch's watchdog
// calling ncclCommAbort) reports device 0; "restoring" 0 would create a primary context on
// GPU 0 in every rank's process (hundreds of MiB each on one GPU). Such a thread is left on
// the communicator's device instead.
#pragma once

namespace topocoll::plugin::interposer {

class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard();
  ~CurrentDeviceGuard();
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

  // Makes `device` current (nothing when it already is, or when device < 0).
  void use(int device);

 private:
  int previous_ = -1;
  bool had_context_ = false;
  bool changed_ = false;
};

}  // namespace topocoll::plugin::interposer
