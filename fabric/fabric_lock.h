// Who is changing a fabric now. `up` holds the lock of its fabric's name from its first check
// to its last namespace, and `down` takes it too, so two `up`s of one name, or a `down` in
// the middle of an `up`, cannot interleave: the second is told who runs. An flock on
// $TOPOCOLL_FABRIC_STATE_DIR/<name>.lock, which the kernel drops when its holder exits (kill
// -9 too), so a crashed `up` never leaves its name locked.
#pragma once

#include <string>

namespace topocoll::fabric {

class FabricLock {
 public:
  // Takes the lock of fabric `name` for `command` ("up", "down"). Throws FabricError
  // ("another `fabric up` of this name is running (pid 123)") when another process holds it.
  FabricLock(const std::string& name, const std::string& command);
  ~FabricLock();
  FabricLock(const FabricLock&) = delete;
  FabricLock& operator=(const FabricLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace topocoll::fabric
