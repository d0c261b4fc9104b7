// decode_handle, connect() and the SendComm / RecvComm faces over Connection.
#include "net/socket_transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "net/connection.h"
#include "net/socket_calls.h"
#include "net/wire_format.h"

namespace topocoll::net {

namespace {
NetStatus check_handle(const Handle& h) {
  if (h.magic != kHandleMagic)
    return NetStatus::error(NetCode::BadHandle, "foreign or corrupt connection handle: magic " +
                                                    hex32(h.magic) + ", expected " + hex32(kHandleMagic));
  if (h.version != kProtocolVersion)
    return NetStatus::error(NetCode::VersionMismatch,
                            "connection handle has protocol version " + std::to_string(h.version) +
                                ", this side speaks version " + std::to_string(kProtocolVersion));
  if (h.family != AF_INET && h.family != AF_INET6)
    return NetStatus::error(NetCode::BadHandle, "connection handle has address family " +
                                                    std::to_string(h.family) + " (not IPv4/IPv6)");
  if (h.port == 0 || h.sockets == 0 || h.sockets > 16)
    return NetStatus::error(NetCode::BadHandle, "connection handle has port " + std::to_string(h.port) +
                                                    " and " + std::to_string(h.sockets) +
                                                    " sockets per connection (expected a port and 1..16 sockets)");
  return {};
}

// Opens one socket of a connection: bind (plane routing), connect within the deadline.
// A connect refused or unreachable for now is retried for a second only: topocoll's engine
// connects once its bootstrap says every listener is up, so a refusal past that is a dead
// peer, and the bootstrap's own report follows. (NCCL's net plugin retries until the
// timeout, as NCCL's Socket transport does: net/connect_attempt.h.)
NetStatus connect_one(const SocketAddress& peer, const SocketAddress* local_bind, uint32_t mark,
                      Clock::time_point deadline, FileDescriptor* out) {
  const auto retry_until = std::min(deadline, Clock::now() + std::chrono::seconds(1));
  for (int tries = 0;; ++tries) {
    FileDescriptor fd;
    if (auto s = open_tcp_socket(peer.family, &fd); !s.ok()) return s;
    if (mark != 0 && ::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0)
      return NetStatus::error(NetCode::ConnectFailed,
                              "cannot mark a socket to " + peer.to_string() + " with " +
                                  std::to_string(mark) + " (TOPOCOLL_NET_LANE_MARKS needs CAP_NET_ADMIN): " +
                                  errno_text(errno));
    if (local_bind && local_bind->is_set()) {
      SocketAddress bind_to = *local_bind;
      bind_to.port = 0;
      sockaddr_storage ss;
      unsigned len = bind_to.to_sockaddr(&ss);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
        return NetStatus::error(NetCode::ConnectFailed, "cannot bind local address " + bind_to.ip_string() +
                                                            " to reach " + peer.to_string() + ": " +
                                                            errno_text(errno));
    }
    sockaddr_storage ss;
    unsigned len = peer.to_sockaddr(&ss);
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        pollfd p{fd.get(), POLLOUT, 0};
        int rc;
        do {
          rc = ::poll(&p, 1, remaining_ms(deadline));
        } while (rc < 0 && errno == EINTR);
        if (rc == 0)
          return NetStatus::error(NetCode::Timeout, "connect to " + peer.to_string() + " timed out");
        socklen_t elen = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
      }
    }
    if (err == 0) {
      *out = std::move(fd);
      return {};
    }
    if (is_retryable_connect_error(err) && Clock::now() + connect_retry_delay(tries) < retry_until) {
      std::this_thread::sleep_for(connect_retry_delay(tries));
      continue;
    }
    return NetStatus::error(err == ETIMEDOUT ? NetCode::Timeout : NetCode::ConnectFailed,
                            "connect to " + peer.to_string() + " failed: " + errno_text(err));
  }
}
}  // namespace

NetStatus decode_handle(const void* bytes, size_t size, Handle* out) {
  if (!bytes || !out) return NetStatus::error(NetCode::InvalidArgument, "decode_handle: null pointer");
  if (size < sizeof(Handle))
    return NetStatus::error(NetCode::BadHandle, "connection handle of " + std::to_string(size) +
                                                    " bytes is too short (need " +
                                                    std::to_string(sizeof(Handle)) + ")");
  std::memcpy(out, bytes, sizeof(Handle));
  return check_handle(*out);
}

SocketAddress handle_address(const Handle& handle) {
  SocketAddress a;
  a.family = handle.family;
  std::memcpy(a.bytes, handle.address, sizeof a.bytes);
  a.port = handle.port;
  return a;
}

NetStatus connect(const Handle& handle, const SocketAddress* local_bind,
                  const TransportOptions& raw_options, uint64_t cookie,
                  std::unique_ptr<SendComm>* out) {
  if (!out) return NetStatus::error(NetCode::InvalidArgument, "connect: null output pointer");
  out->reset();
  if (auto s = check_handle(handle); !s.ok()) return s;
  const TransportOptions options = raw_options.normalized();
  const SocketAddress peer = handle_address(handle);
  if (local_bind && local_bind->is_set() && local_bind->family != peer.family)
    return NetStatus::error(NetCode::InvalidArgument, "local address " + local_bind->ip_string() +
                                                          " and peer " + peer.to_string() +
                                                          " are of different address families");
  try {
    const auto deadline = Clock::now() + std::chrono::milliseconds(options.timeout_ms);
    Hello hello;
    hello.version = kProtocolVersion;
    hello.sockets = handle.sockets;
    hello.listener_nonce = handle.listener_nonce;
    hello.connection_id = random_u64();
    hello.cookie = cookie;
    hello.chunk_bytes = options.chunk_bytes;
    hello.min_stripe_bytes = uint32_t(std::min<size_t>(options.min_stripe_bytes, options.chunk_bytes));
    std::vector<FileDescriptor> sockets(handle.sockets);
    for (uint16_t i = 0; i < handle.sockets; ++i) {
      const uint32_t mark =
          options.lane_marks.empty() ? 0 : options.lane_marks[i % options.lane_marks.size()];
      if (auto s = connect_one(peer, local_bind, mark, deadline, &sockets[i]); !s.ok()) return s;
      if (auto s = set_no_delay(sockets[i].get()); !s.ok()) return s;
      hello.socket_index = i;
      if (auto s = send_all(sockets[i].get(), &hello, sizeof hello, deadline,
                            "the handshake to " + peer.to_string());
          !s.ok())
        return s;
    }
    SocketAddress local = local_address_of(sockets[0].get());
    auto connection = std::make_unique<Connection>(Connection::Direction::Send, std::move(sockets),
                                                   options.chunk_bytes, hello.min_stripe_bytes,
                                                   options.threads_per_conn,
                                                   local, peer, std::chrono::milliseconds(options.stall_timeout_ms),
                                                   options.caller_polls,
                                                   std::chrono::milliseconds(options.idle_poll_ms));
    if (auto s = connection->start(); !s.ok()) return s;
    out->reset(new SendComm(std::move(connection)));
    return {};
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("connect: ") + e.what());
  }
}

SendComm::SendComm(std::unique_ptr<Connection> c) : connection_(std::move(c)) {}
SendComm::~SendComm() = default;
NetStatus SendComm::isend(const void* data, size_t size, int tag, Request** request) {
  try {
    return connection_->post_send(data, size, tag, request);
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("isend: ") + e.what());
  }
}
NetStatus SendComm::test(Request* request, bool* done, size_t* size) {
  return connection_->test(request, done, size);
}
const SocketAddress& SendComm::local_address() const { return connection_->local_address(); }
const SocketAddress& SendComm::peer_address() const { return connection_->peer_address(); }

RecvComm::RecvComm(std::unique_ptr<Connection> c, uint64_t cookie)
    : connection_(std::move(c)), cookie_(cookie) {}
RecvComm::~RecvComm() = default;
NetStatus RecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                          Request** request) {
  try {
    return connection_->post_recv(n, data, sizes, tags, request);
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("irecv: ") + e.what());
  }
}
NetStatus RecvComm::test(Request* request, bool* done, size_t* sizes) {
  return connection_->test(request, done, sizes);
}
const SocketAddress& RecvComm::peer_address() const { return connection_->peer_address(); }
uint64_t RecvComm::peer_cookie() const { return cookie_; }

}  // namespace topocoll::net
