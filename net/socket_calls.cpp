#include "net/socket_calls.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace topocoll::net {

std::string errno_text(int e) {
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

uint64_t random_u64() {
  static thread_local std::mt19937_64 engine{[] {
    std::random_device device;
    return (uint64_t(device()) << 32) ^ device() ^
           uint64_t(Clock::now().time_since_epoch().count());
  }()};
  return engine();
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<long long>(left, 0, 1 << 30));
}

NetStatus open_tcp_socket(int family, FileDescriptor* out) {
  FileDescriptor fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return NetStatus::error(NetCode::SystemError, "socket() failed: " + errno_text(errno));
  *out = std::move(fd);
  return {};
}

NetStatus set_no_delay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return NetStatus::error(NetCode::SystemError, "setsockopt(TCP_NODELAY) failed: " + errno_text(errno));
  return {};
}

SocketAddress local_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

SocketAddress peer_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

NetStatus send_all(int fd, const void* data, size_t size, Clock::time_point deadline,
                   const std::string& what) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, p + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return NetStatus::error(NetCode::PeerClosed, "sending " + what + " failed: " + errno_text(errno));
    int left = remaining_ms(deadline);
    if (left == 0) return NetStatus::error(NetCode::Timeout, "sending " + what + " timed out");
    pollfd p1{fd, POLLOUT, 0};
    ::poll(&p1, 1, left);
  }
  return {};
}

}  // namespace topocoll::net
