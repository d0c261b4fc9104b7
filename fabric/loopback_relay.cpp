#include "fabric/loopback_relay.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <set>

#include "fabric/system_command.h"
#include "net/file_descriptor.h"
#include "net/network_namespace.h"
#include "net/socket_calls.h"

namespace topocoll::fabric {
namespace {

using net::FileDescriptor;
using net::SocketAddress;

constexpr size_t kBufferLimit = 1 << 20;  // per direction; PMIx messages are far smaller

// One relayed connection: `inside` accepted in the namespace, `outside` to the machine's port.
struct Pair {
  FileDescriptor inside, outside;
  std::string to_inside, to_outside;
  bool inside_done = false, outside_done = false;  // their end sent EOF
  bool inside_shut = false, outside_shut = false;  // we passed the EOF on
};

// Reads what `from` holds into `buffer`; false at EOF or on an error.
bool pull(int from, std::string& buffer) {
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::recv(from, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer.append(chunk, size_t(n));
      if (buffer.size() >= kBufferLimit) return true;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

// Writes as much of `buffer` as `to` takes; false on an error.
bool push(int to, std::string& buffer) {
  while (!buffer.empty()) {
    const ssize_t n = ::send(to, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (n > 0) {
      buffer.erase(0, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  return true;
}

FileDescriptor connect_outside(const SocketAddress& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  FileDescriptor out(fd);
  sockaddr_storage storage {};
  const unsigned length = address.to_sockaddr(&storage);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) return {};
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return out;
}

// Closes every descriptor but stdin/out/err and `keep`: the relay must not hold the rank's
// pipes (mpirun waits for their end) or anything else of its parent's.
void close_others(const std::set<int>& keep) {
  std::vector<int> open;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') open.push_back(std::atoi(e->d_name));
    ::closedir(d);
  }
  for (int fd : open)
    if (fd > 2 && !keep.count(fd)) ::close(fd);
}

// The relay process: listeners made inside the namespace, then forwarding until `owner` ends.
[[noreturn]] void run_relay(const std::string& netns_path, const std::vector<SocketAddress>& addresses, pid_t owner,
                            int ready) {
  auto fail = [&](const std::string& why) {
    (void)!::write(ready, why.data(), why.size());
    _exit(1);
  };
  const int owner_fd = int(::syscall(SYS_pidfd_open, owner, 0));
  if (owner_fd < 0) fail("pidfd_open: " + net::errno_text(errno) + " (Linux 5.3 or later is needed)");
  std::vector<FileDescriptor> listeners;
  try {
    const net::ThreadNetnsScope inside(netns_path);
    for (const SocketAddress& a : addresses) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) fail("socket: " + net::errno_text(errno));
      listeners.emplace_back(fd);
      // Several ranks of one emulated host relay the same port: each may take a connection.
      const int on = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
      const char* failed = nullptr;
      if (const int err = net::bind_and_listen(fd, a, 64, &failed); err != 0)
        fail("cannot listen on " + a.to_string() + " inside " + netns_path + " (" + std::string(failed) +
             ": " + net::errno_text(err) + ")");
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  std::set<int> keep = {owner_fd};
  for (const auto& l : listeners) keep.insert(l.get());
  close_others(keep);  // `ready` among them: the caller's wait ends here, listeners made
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd : {0, 1, 2}) ::dup2(null, fd);
  if (null > 2) ::close(null);

  std::list<Pair> pairs;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({owner_fd, POLLIN, 0});
    for (const auto& l : listeners) fds.push_back({l.get(), POLLIN, 0});
    for (auto& p : pairs) {
      short in_events = 0, out_events = 0;
      if (!p.inside_done && p.to_outside.size() < kBufferLimit) in_events |= POLLIN;
      if (!p.outside_done && p.to_inside.size() < kBufferLimit) out_events |= POLLIN;
      if (!p.to_inside.empty()) in_events |= POLLOUT;
      if (!p.to_outside.empty()) out_events |= POLLOUT;
      fds.push_back({p.inside.get(), in_events, 0});
      fds.push_back({p.outside.get(), out_events, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) _exit(1);
    if (fds[0].revents) _exit(0);  // the rank's program has ended
    for (size_t i = 0; i < listeners.size(); ++i) {
      if (!fds[1 + i].revents) continue;
      SocketAddress peer;
      FileDescriptor accepted = net::accept_connection(listeners[i].get(), &peer);
      if (!accepted.valid()) continue;
      FileDescriptor outside = connect_outside(addresses[i]);
      if (!outside.valid()) continue;  // refused here: the client sees its connection end
      Pair p;
      p.inside = std::move(accepted);
      p.outside = std::move(outside);
      pairs.push_back(std::move(p));
    }
    size_t index = 1 + listeners.size();
    for (auto it = pairs.begin(); it != pairs.end(); index += 2) {
      Pair& p = *it;
      const short in_ready = index < fds.size() ? fds[index].revents : 0;
      const short out_ready = index + 1 < fds.size() ? fds[index + 1].revents : 0;
      bool broken = false;
      if ((in_ready & (POLLIN | POLLHUP | POLLERR)) && !p.inside_done) p.inside_done = !pull(p.inside.get(), p.to_outside);
      if ((out_ready & (POLLIN | POLLHUP | POLLERR)) && !p.outside_done)
        p.outside_done = !pull(p.outside.get(), p.to_inside);
      broken |= !push(p.outside.get(), p.to_outside);
      broken |= !push(p.inside.get(), p.to_inside);
      // An end that finished sending: pass its EOF on once its bytes are through.
      if (p.inside_done && p.to_outside.empty() && !p.outside_shut) {
        ::shutdown(p.outside.get(), SHUT_WR);
        p.outside_shut = true;
      }
      if (p.outside_done && p.to_inside.empty() && !p.inside_shut) {
        ::shutdown(p.inside.get(), SHUT_WR);
        p.inside_shut = true;
      }
      if (broken || (p.inside_shut && p.outside_shut)) it = pairs.erase(it);
      else ++it;
    }
  }
}

}  // namespace

std::vector<SocketAddress> launcher_loopback_addresses(const std::vector<std::string>& environment) {
  std::vector<SocketAddress> out;
  std::set<std::string> seen;
  for (const std::string& kv : environment) {
    if (kv.rfind("PMIX_SERVER_URI", 0) != 0) continue;
    const std::string value = kv.substr(kv.find('=') + 1);
    for (size_t at = value.find("tcp4://"); at != std::string::npos; at = value.find("tcp4://", at + 1)) {
      const size_t start = at + 7;
      const size_t end = value.find_first_of(";,", start);
      const std::string host_port = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
      const size_t colon = host_port.rfind(':');
      if (colon == std::string::npos) continue;
      const std::string ip = host_port.substr(0, colon), port = host_port.substr(colon + 1);
      if (ip.rfind("127.", 0) != 0 || port.empty() || port.size() > 5 ||
          port.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const long number = std::stol(port);
      const auto address = SocketAddress::parse(ip, uint16_t(number));
      if (number < 1 || number > 65535 || !address) continue;
      if (seen.insert(address->to_string()).second) out.push_back(*address);
    }
  }
  return out;
}

void start_loopback_relay(const std::string& netns_path, const std::vector<SocketAddress>& addresses, pid_t owner) {
  if (addresses.empty()) return;
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) throw FabricError("pipe: " + net::errno_text(errno));
  const pid_t middle = ::fork();
  if (middle < 0) {
    ::close(ready[0]), ::close(ready[1]);
    throw FabricError("fork: " + net::errno_text(errno));
  }
  if (middle == 0) {
    // Twice: the relay's parent exits at once, so the program exec'd here never sees a
    // child it did not start.
    ::close(ready[0]);
    ::setsid();
    const pid_t relay = ::fork();
    if (relay == 0) run_relay(netns_path, addresses, owner, ready[1]);
    if (relay < 0) {
      const std::string why = "fork: " + net::errno_text(errno);
      (void)!::write(ready[1], why.data(), why.size());
    }
    _exit(0);
  }
  ::close(ready[1]);
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  std::string why;
  char buffer[512];
  for (ssize_t n; (n = ::read(ready[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    why.append(buffer, size_t(n));
  }
  ::close(ready[0]);
  if (!why.empty()) throw FabricError("relaying the launcher's loopback ports into the rank's namespace: " + why);
}

}  // namespace topocoll::fabric
