// Who is changing a fabric now. `up` holds the lock of its fabric's name from its first check
// to its last namespace, and `down` takes it too, so two `up`s of one name, or a `down` in
// the middle of an `up`, cannot interleave: the second is told who runs. An flock on
// $TOPOCOLL_FABRIC_STATE_DIR/<name>.lock, which the kernel drops when its holder exits (kill
// -9 too), so a crashed `up` never leaves its name locked.
//
// A process entering one of the fabric's namespaces (`fabric exec`, `rank-exec`) holds the
// same lock shared, from before it opens the namespace until it runs inside: `down` ends the
// processes in a namespace before deleting it, and one that had opened it but not yet entered
// would otherwise run on in a namespace no name reaches and no `down` ends.
#pragma once

#include <string>

namespace topocoll::fabric {

class FabricLock {
 public:
  // Takes the lock of fabric `name` for `command` ("up", "down"), waiting up to kEntryWaitMs
  // for processes entering its namespaces. Throws FabricError ("another `fabric up` of this
  // name is running (pid 123)") when another process holds it.
  FabricLock(const std::string& name, const std::string& command);
  ~FabricLock();
  FabricLock(const FabricLock&) = delete;
  FabricLock& operator=(const FabricLock&) = delete;

 private:
  int fd_ = -1;
};

// Entering processes hold the lock for milliseconds; an exclusive taker waits this long.
constexpr int kEntryWaitMs = 3000;

// The shared hold of an entering process. Opened close-on-exec: a successful exec into the
// program that now runs inside the namespace releases it, as does the destructor.
class FabricEntryLock {
 public:
  // Waits up to kEntryWaitMs for a verb holding the fabric (a fault's); throws FabricError
  // ("`fabric down` of fabric X is running: ...") when it still holds it then.
  explicit FabricEntryLock(const std::string& name);
  ~FabricEntryLock();
  FabricEntryLock(const FabricEntryLock&) = delete;
  FabricEntryLock& operator=(const FabricEntryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace topocoll::fabric
