#include "net/network_namespace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace topocoll::net {

std::string netns_path(const std::string& name) { return "/run/netns/" + name; }

bool netns_exists(const std::string& name) {
  struct stat st{};
  return ::stat(netns_path(name).c_str(), &st) == 0;
}

std::vector<std::string> netns_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/run/netns");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  ::closedir(d);
  return out;
}

ThreadNetnsScope::ThreadNetnsScope(const std::string& path) {
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original_ < 0)
    throw std::runtime_error("cannot open this thread's network namespace: " + std::string(std::strerror(errno)));
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int open_error = errno;
  const int rc = target >= 0 ? ::setns(target, CLONE_NEWNET) : -1;
  const int err = target >= 0 ? errno : open_error;
  if (target >= 0) ::close(target);
  if (rc != 0) {
    ::close(original_);
    throw std::runtime_error("cannot enter network namespace " + path + ": " + std::strerror(err));
  }
}

ThreadNetnsScope::~ThreadNetnsScope() {
  // A thread that cannot go back would go on inside the namespace, its sockets there (a
  // relay connecting to itself until no descriptor is left): nothing sane continues.
  if (::setns(original_, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "topocoll: cannot return this thread to its network namespace: %s\n", std::strerror(errno));
    std::abort();
  }
  ::close(original_);
}

}  // namespace topocoll::net
