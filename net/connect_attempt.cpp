#include "net/connect_attempt.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/connection.h"

namespace topocoll::net {

NetStatus ConnectAttempt::start(const Handle& handle, const SocketAddress* local_bind,
                                const TransportOptions& raw_options, uint64_t cookie,
                                std::unique_ptr<ConnectAttempt>* out) {
  if (!out) return NetStatus::error(NetCode::InvalidArgument, "connect: null output pointer");
  out->reset();
  Handle checked;
  if (auto s = decode_handle(&handle, sizeof handle, &checked); !s.ok()) return s;
  std::unique_ptr<ConnectAttempt> a(new ConnectAttempt());
  a->options_ = raw_options.normalized();
  a->peer_ = handle_address(handle);
  if (local_bind && local_bind->is_set()) {
    if (local_bind->family != a->peer_.family)
      return NetStatus::error(NetCode::InvalidArgument, "local address " + local_bind->ip_string() +
                                                            " and peer " + a->peer_.to_string() +
                                                            " are of different address families");
    a->local_bind_ = *local_bind;
    a->local_bind_.port = 0;
  }
  const auto now = Clock::now();
  a->deadline_ = now + std::chrono::milliseconds(a->options_.timeout_ms);
  Hello& h = a->hello_;
  h.version = kProtocolVersion;
  h.sockets = handle.sockets;
  h.listener_nonce = handle.listener_nonce;
  h.connection_id = random_u64();
  h.cookie = cookie;
  h.chunk_bytes = a->options_.chunk_bytes;
  h.min_stripe_bytes = uint32_t(std::min<size_t>(a->options_.min_stripe_bytes, a->options_.chunk_bytes));
  a->lanes_.resize(handle.sockets);
  for (size_t i = 0; i < a->lanes_.size(); ++i)
    if (auto s = a->open_lane(i); !s.ok()) return s;
  *out = std::move(a);
  return {};
}

// A fresh non-blocking socket and its connect(); EINPROGRESS is the normal outcome.
NetStatus ConnectAttempt::open_lane(size_t i) {
  Lane& lane = lanes_[i];
  const int tries = lane.tries;
  lane = Lane{};
  lane.tries = tries;
  if (auto s = open_tcp_socket(peer_.family, &lane.socket); !s.ok()) return s;
  const int fd = lane.socket.get();
  const uint32_t mark = options_.lane_marks.empty() ? 0 : options_.lane_marks[i % options_.lane_marks.size()];
  if (mark != 0 && ::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0)
    return NetStatus::error(NetCode::ConnectFailed, "cannot mark a socket to " + peer_.to_string() + " with " +
                                                        std::to_string(mark) +
                                                        " (TOPOCOLL_NET_LANE_MARKS needs CAP_NET_ADMIN): " +
                                                        errno_text(errno));
  if (local_bind_.is_set())
    if (const int e = bind_local(fd, local_bind_); e != 0)
      return NetStatus::error(NetCode::ConnectFailed, "cannot bind local address " + local_bind_.ip_string() +
                                                          " to reach " + peer_.to_string() + ": " + errno_text(e));
  if (auto s = set_no_delay(fd); !s.ok()) return s;
  sockaddr_storage ss;
  unsigned len = peer_.to_sockaddr(&ss);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    lane.connected = true;
  } else if (errno != EINPROGRESS && errno != EINTR) {
    const int err = errno;
    if (retry_later(lane, err, Clock::now())) return {};
    if (is_retryable_connect_error(err)) return timed_out(err);
    return NetStatus::error(NetCode::ConnectFailed, "connect to " + peer_.to_string() + " failed: " + errno_text(err));
  }
  return {};
}

NetStatus ConnectAttempt::timed_out(int err) const {
  return NetStatus::error(NetCode::Timeout,
                          "connect to " + peer_.to_string() + " did not complete within " +
                              std::to_string(options_.timeout_ms) + " ms (" +
                              (err != 0 ? "retried after: " + errno_text(err)
                                        : std::string("the listener's backlog is full, or the host does not answer")) +
                              ")");
}

bool ConnectAttempt::retry_later(Lane& lane, int err, Clock::time_point now) {
  if (!is_retryable_connect_error(err) || now >= deadline_) return false;
  last_error_ = err;
  lane.socket = FileDescriptor();
  lane.retry_at = now + connect_retry_delay(lane.tries++);
  return true;
}

NetStatus ConnectAttempt::advance(std::unique_ptr<SendComm>* out) {
  if (!out) return NetStatus::error(NetCode::InvalidArgument, "connect: null output pointer");
  out->reset();
  const auto now = Clock::now();
  bool all_sent = true;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = lanes_[i];
    if (!lane.socket.valid()) {  // refused or unreachable earlier: retry when due
      all_sent = false;
      if (now >= lane.retry_at)
        if (auto s = open_lane(i); !s.ok()) return s;
      continue;
    }
    if (!lane.connected) {
      pollfd p{lane.socket.get(), POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) {
        all_sent = false;
        continue;
      }
      int err = connect_error(lane.socket.get());
      // Connected to itself: retrying a local port nobody listens on any more (a stale
      // handle), Linux can complete a TCP simultaneous open of the socket with itself, and
      // the hello and every message would go nowhere. Refused, as it is.
      if (err == 0 && connected_to_itself(lane.socket.get())) err = ECONNREFUSED;
      if (err != 0 && retry_later(lane, err, now)) {
        all_sent = false;
        continue;
      }
      if (err != 0 && is_retryable_connect_error(err)) return timed_out(err);
      if (err != 0)
        return NetStatus::error(NetCode::ConnectFailed, "connect to " + peer_.to_string() + " failed: " + errno_text(err));
      lane.connected = true;
    }
    Hello h = hello_;
    h.socket_index = uint16_t(i);
    while (lane.hello_sent < sizeof h) {
      const ssize_t n = ::send(lane.socket.get(), reinterpret_cast<const char*>(&h) + lane.hello_sent,
                               sizeof h - lane.hello_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        lane.hello_sent += size_t(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        const int err = errno;
        return NetStatus::error(is_peer_or_path_error(err) ? NetCode::PeerClosed : NetCode::ConnectFailed,
                                "the handshake to " + peer_.to_string() + " failed: " + errno_text(err));
      }
    }
    all_sent = all_sent && lane.hello_sent == sizeof h;
  }
  if (!all_sent) {
    if (now > deadline_) return timed_out(last_error_);
    return {};
  }
  try {
    std::vector<FileDescriptor> sockets;
    for (auto& lane : lanes_) sockets.push_back(std::move(lane.socket));
    SocketAddress local = local_address_of(sockets[0].get());
    auto connection = std::make_unique<Connection>(Connection::Direction::Send, std::move(sockets),
                                                   options_.chunk_bytes, hello_.min_stripe_bytes,
                                                   options_.threads_per_conn, local, peer_,
                                                   std::chrono::milliseconds(options_.stall_timeout_ms),
                                                   options_.caller_polls,
                                                   std::chrono::milliseconds(options_.idle_poll_ms));
    if (auto s = connection->start(); !s.ok()) return s;
    out->reset(new SendComm(std::move(connection)));
    return {};
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("connect: ") + e.what());
  }
}

}  // namespace topocoll::net
