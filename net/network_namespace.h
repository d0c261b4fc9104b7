// Named network namespaces (iproute2 keeps them in /run/netns/<name>): where the emulated
// fabric's hosts and routers live, and where a launcher puts a rank or a rendezvous.
#pragma once

#include <string>
#include <vector>

namespace topocoll::net {

std::string netns_path(const std::string& name);
bool netns_exists(const std::string& name);
// Names of the namespaces that start with `prefix`.
std::vector<std::string> netns_with_prefix(const std::string& prefix);

// Moves the calling thread into the network namespace at `path` until destroyed; sockets
// made meanwhile stay in it. Throws std::runtime_error naming the namespace when it cannot
// (root, or CAP_SYS_ADMIN, is needed).
class ThreadNetnsScope {
 public:
  explicit ThreadNetnsScope(const std::string& path);
  ~ThreadNetnsScope();
  ThreadNetnsScope(const ThreadNetnsScope&) = delete;
  ThreadNetnsScope& operator=(const ThreadNetnsScope&) = delete;

 private:
  int original_ = -1;
};

}  // namespace topocoll::net
