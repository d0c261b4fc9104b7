#include "fabric/fabric_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "fabric/fabric_record.h"
#include "fabric/system_command.h"

namespace topocoll::fabric {

namespace {

int open_lock_file(const std::string& path) {
  make_state_dir();
  // O_NOFOLLOW: a link planted under the lock's name is refused, never written through.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw FabricError("cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

// "up" / "down" and its pid, as the exclusive holder wrote them (shared holders write nothing).
std::pair<std::string, long> exclusive_holder(int fd) {
  char text[128] = {};
  [[maybe_unused]] const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::istringstream holder(text);
  long pid = 0;
  std::string verb;
  holder >> pid >> verb;
  return {verb.empty() ? std::string("up") : verb, pid};
}

// flock(fd, operation) retried for up to kEntryWaitMs while another holder has it: 0 once
// taken, else the errno of the last try.
int flock_waiting(int fd, int operation) {
  for (int waited_ms = 0;; waited_ms += 10) {
    if (::flock(fd, operation | LOCK_NB) == 0) return 0;
    const int error = errno;
    if (error != EWOULDBLOCK || waited_ms >= kEntryWaitMs) return error;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

FabricLock::FabricLock(const std::string& name, const std::string& command) {
  const std::string path = fabric_file_path(name, ".lock");
  fd_ = open_lock_file(path);
  if (const int error = flock_waiting(fd_, LOCK_EX); error != 0) {
    const auto [verb, pid] = exclusive_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) throw FabricError("cannot lock " + path + ": " + std::strerror(error));
    throw FabricError("another `fabric " + verb + "` of this name is running" +
                      (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") +
                      ", or a process held its namespaces' entry for over " + std::to_string(kEntryWaitMs / 1000) +
                      " s: wait for it to end, or end it");
  }
  // Who holds it, for the next one's message.
  const std::string me = std::to_string(::getpid()) + " " + command + "\n";
  if (::ftruncate(fd_, 0) == 0) [[maybe_unused]] const ssize_t n = ::pwrite(fd_, me.data(), me.size(), 0);
}

FabricLock::~FabricLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

FabricEntryLock::FabricEntryLock(const std::string& name) {
  const std::string path = fabric_file_path(name, ".lock");
  fd_ = open_lock_file(path);
  // A fault (degrade, cut, swap, restore) holds the lock for a moment: waited out, as up and
  // down wait for entering processes. An up or a down of the fabric is refused after that.
  const int error = flock_waiting(fd_, LOCK_SH);
  if (error == 0) return;
  const auto [verb, pid] = exclusive_holder(fd_);
  ::close(fd_);
  fd_ = -1;
  if (error != EWOULDBLOCK) throw FabricError("cannot lock " + path + ": " + std::strerror(error));
  throw FabricError("`fabric " + verb + "` of fabric " + name + " is running" +
                    (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") + ": its namespaces cannot be entered now");
}

FabricEntryLock::~FabricEntryLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace topocoll::fabric
