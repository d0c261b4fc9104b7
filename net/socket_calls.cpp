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
  std::string text = std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
  // A wide all-to-all opens a connection per peer and channel, each holding
  // TOPOCOLL_NET_SOCKETS_PER_CONN sockets; name the limit and the knob.
  if (e == EMFILE)
    text += ": this process reached its open-file limit (ulimit -n); each connection holds "
            "TOPOCOLL_NET_SOCKETS_PER_CONN sockets (`topocoll env` shows the value): raise the limit or lower that";
  else if (e == ENFILE)
    text += ": the system-wide open-file limit (fs.file-max) is reached; each connection holds "
            "TOPOCOLL_NET_SOCKETS_PER_CONN sockets (`topocoll env` shows the value)";
  return text;
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
  if (!fd.valid()) {
    const int e = errno;
    return NetStatus::error(NetCode::SystemError, "socket() failed: " + errno_text(e), e);
  }
  *out = std::move(fd);
  return {};
}

NetStatus set_no_delay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    const int e = errno;
    return NetStatus::error(NetCode::SystemError, "setsockopt(TCP_NODELAY) failed: " + errno_text(e), e);
  }
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

int bind_and_listen(int fd, const SocketAddress& address, int backlog, const char** failed_call) {
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss;
  const unsigned len = address.to_sockaddr(&ss);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (failed_call) *failed_call = "bind";
    return errno;
  }
  if (::listen(fd, backlog) != 0) {
    if (failed_call) *failed_call = "listen";
    return errno;
  }
  return 0;
}

int bind_local(int fd, const SocketAddress& address) {
  sockaddr_storage ss;
  const unsigned len = address.to_sockaddr(&ss);
  return ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 ? 0 : errno;
}

int start_connect(int fd, const SocketAddress& peer) {
  sockaddr_storage ss;
  const unsigned len = peer.to_sockaddr(&ss);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 || errno == EINPROGRESS) return 0;
  return errno;
}

int connect_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

bool is_pending_network_error(int e) {
  return e == ECONNABORTED || e == ENETDOWN || e == EPROTO || e == ENOPROTOOPT || e == EHOSTDOWN || e == ENONET ||
         e == EHOSTUNREACH || e == EOPNOTSUPP || e == ENETUNREACH;
}

bool is_retryable_connect_error(int e) {
  return e == ECONNREFUSED || e == EHOSTUNREACH || e == ETIMEDOUT || e == EAGAIN || e == EINTR;
}

bool is_peer_or_path_error(int e) {
  return e == ECONNRESET || e == EPIPE || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH ||
         e == ENETDOWN || e == ENETRESET || e == ECONNABORTED || e == ENOTCONN || e == EHOSTDOWN ||
         e == ECONNREFUSED || e == ENONET;
}

std::chrono::milliseconds connect_retry_delay(int tries) {
  return std::min(std::chrono::milliseconds(10 << std::clamp(tries, 0, 6)), std::chrono::milliseconds(500));
}

FileDescriptor accept_connection(int listen_fd, SocketAddress* peer, int* error) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd_number;
  do {
    fd_number = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd_number < 0 && errno == EINTR);
  const int err = fd_number < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? errno : 0;
  FileDescriptor fd(fd_number);
  if (error) *error = err;
  if (fd.valid() && peer) *peer = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
  return fd;
}

bool connected_to_itself(int fd) {
  const SocketAddress local = local_address_of(fd), peer = peer_address_of(fd);
  return local.is_set() && peer.is_set() && local.to_string() == peer.to_string();
}

bool is_resource_shortage(int e) { return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM; }

bool has_sent_nothing(int fd, size_t received) {
  if (received > 0) return false;
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const int left = remaining_ms(deadline);
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    // In slices of at most a second, so a deadline far off is still re-read.
    const int r = ::poll(&p, 1, std::min(left, 1000));
    if (r > 0) return r;
    if (r < 0 && errno != EINTR) return -1;
  }
}

bool receive_available(int fd, std::string& inbox) {
  char buf[65536];
  // At most this much a call: a peer that keeps the socket full must not hold the caller (a
  // root serving every rank in one loop) in one read for ever.
  constexpr size_t kMaxPerCall = size_t(4) << 20;
  for (size_t taken = 0;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      inbox.append(buf, size_t(r));
      taken += size_t(r);
      if (size_t(r) < sizeof buf || taken >= kMaxPerCall) return true;
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

int send_fully(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, p + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    int left = remaining_ms(deadline);
    if (left == 0) return kDeadlinePassed;
    pollfd p1{fd, POLLOUT, 0};
    ::poll(&p1, 1, left);
  }
  return 0;
}

NetStatus send_all(int fd, const void* data, size_t size, Clock::time_point deadline,
                   const std::string& what) {
  const int result = send_fully(fd, data, size, deadline);
  if (result == kDeadlinePassed) return NetStatus::error(NetCode::Timeout, "sending " + what + " timed out");
  if (result != 0)
    return NetStatus::error(NetCode::PeerClosed, "sending " + what + " failed: " + errno_text(result));
  return {};
}

}  // namespace topocoll::net
