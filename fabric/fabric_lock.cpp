#include "fabric/fabric_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "fabric/fabric_record.h"
#include "fabric/system_command.h"

namespace topocoll::fabric {

FabricLock::FabricLock(const std::string& name, const std::string& command) {
  const std::string path = fabric_file_path(name, ".lock");
  make_state_dir();
  // O_NOFOLLOW: a link planted under the lock's name is refused, never written through.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw FabricError("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char text[128] = {};
    [[maybe_unused]] const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) throw FabricError("cannot lock " + path + ": " + std::strerror(error));
    std::istringstream holder(text);
    long pid = 0;
    std::string verb;
    holder >> pid >> verb;
    throw FabricError("another `fabric " + (verb.empty() ? std::string("up") : verb) +
                      "` of this name is running" + (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") +
                      ": wait for it to end, or end it");
  }
  // Who holds it, for the next one's message.
  const std::string me = std::to_string(::getpid()) + " " + command + "\n";
  if (::ftruncate(fd_, 0) == 0) [[maybe_unused]] const ssize_t n = ::pwrite(fd_, me.data(), me.size(), 0);
}

FabricLock::~FabricLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

}  // namespace topocoll::fabric
