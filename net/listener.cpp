// Listener: binds, publishes a Handle, and assembles incoming connections from their
// sockets' hellos (several sockets per connection, grouped by connection id).
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "net/connection.h"
#include "net/socket_calls.h"
#include "net/socket_transport.h"
#include "net/wire_format.h"

namespace topocoll::net {


struct Listener::State {
  // A socket whose hello has not fully arrived.
  struct Arriving {
    FileDescriptor socket;
    SocketAddress peer;
    Hello hello{};
    size_t received = 0;
    Clock::time_point deadline;
  };
  // A connection some of whose sockets have arrived.
  struct Assembling {
    uint64_t id = 0;
    uint64_t cookie = 0;
    uint64_t chunk_bytes = 0;
    uint32_t min_stripe_bytes = 0;
    SocketAddress peer;
    std::vector<FileDescriptor> sockets;
    int arrived = 0;
    Clock::time_point deadline;
  };

  FileDescriptor socket;
  TransportOptions options;
  std::vector<Arriving> arriving;
  std::vector<Assembling> assembling;
  std::optional<Clock::time_point> idle_since;  // first accept() call that found nothing
};

NetStatus Listener::open(const SocketAddress& bind_address, const TransportOptions& raw_options,
                         std::unique_ptr<Listener>* out, uint64_t user_data) {
  if (!out) return NetStatus::error(NetCode::InvalidArgument, "listen: null output pointer");
  out->reset();
  if (!bind_address.is_set())
    return NetStatus::error(NetCode::InvalidArgument, "listen: no local address given");
  try {
    std::unique_ptr<Listener> l(new Listener());
    l->state_ = std::make_unique<State>();
    l->state_->options = raw_options.normalized();
    if (auto s = open_tcp_socket(bind_address.family, &l->state_->socket); !s.ok()) return s;
    const int fd = l->state_->socket.get();
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss;
    unsigned len = bind_address.to_sockaddr(&ss);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
      return NetStatus::error(NetCode::SystemError, "listen: cannot bind " + bind_address.to_string() +
                                                        ": " + errno_text(errno));
    if (::listen(fd, 1024) != 0)
      return NetStatus::error(NetCode::SystemError, "listen() on " + bind_address.to_string() +
                                                        " failed: " + errno_text(errno));
    l->address_ = local_address_of(fd);
    Handle& h = l->handle_;
    h.magic = kHandleMagic;
    h.version = kProtocolVersion;
    h.family = uint16_t(l->address_.family);
    h.port = l->address_.port;
    h.sockets = uint16_t(l->state_->options.sockets_per_conn);
    std::memcpy(h.address, l->address_.bytes, sizeof h.address);
    h.listener_nonce = random_u64();
    h.user_data = user_data;
    *out = std::move(l);
    return {};
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("listen: ") + e.what());
  }
}

Listener::~Listener() = default;

NetStatus Listener::accept(std::unique_ptr<RecvComm>* out, int wait_ms) {
  if (!out) return NetStatus::error(NetCode::InvalidArgument, "accept: null output pointer");
  out->reset();
  State& st = *state_;
  const auto timeout = std::chrono::milliseconds(st.options.timeout_ms);
  const auto wait_deadline = Clock::now() + std::chrono::milliseconds(std::max(wait_ms, 0));
  try {
    for (;;) {
      const auto now = Clock::now();
      // 1. Take every socket waiting in the backlog.
      for (;;) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = ::accept4(st.socket.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          return NetStatus::error(NetCode::SystemError, "accept on " + address_.to_string() +
                                                            " failed: " + errno_text(errno));
        }
        State::Arriving a;
        a.socket = FileDescriptor(fd);
        a.peer = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
        a.deadline = now + timeout;
        st.arriving.push_back(std::move(a));
      }
      // 2. Read hellos; file each complete one under its connection.
      for (size_t i = 0; i < st.arriving.size();) {
        auto& a = st.arriving[i];
        char* base = reinterpret_cast<char*>(&a.hello);
        ssize_t n = ::recv(a.socket.get(), base + a.received, sizeof(Hello) - a.received, MSG_DONTWAIT);
        if (n > 0) a.received += size_t(n);
        const bool closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        if (closed) {  // the connecting side went away before its handshake; nothing to return
          st.arriving.erase(st.arriving.begin() + long(i));
          continue;
        }
        if (a.received < sizeof(Hello)) {
          if (now > a.deadline) {
            std::string peer = a.peer.to_string();
            st.arriving.erase(st.arriving.begin() + long(i));
            return NetStatus::error(NetCode::Timeout, "handshake from " + peer + " on " +
                                                          address_.to_string() + " timed out");
          }
          ++i;
          continue;
        }
        State::Arriving done = std::move(a);
        st.arriving.erase(st.arriving.begin() + long(i));
        const Hello& h = done.hello;
        const std::string from = "connection from " + done.peer.to_string() + " to " + address_.to_string();
        if (h.magic != kHelloMagic)
          return NetStatus::error(NetCode::BadHandle, from + " is not a topocoll transport (magic " +
                                                          hex32(h.magic) + ", expected " + hex32(kHelloMagic) + ")");
        if (h.version != kProtocolVersion)
          return NetStatus::error(NetCode::VersionMismatch,
                                  from + " speaks protocol version " + std::to_string(h.version) +
                                      ", this side version " + std::to_string(kProtocolVersion));
        if (h.listener_nonce != handle_.listener_nonce)
          return NetStatus::error(NetCode::BadHandle, from + " carries the handle of another listener");
        if (h.sockets != handle_.sockets || h.socket_index >= h.sockets || h.chunk_bytes < 4096 ||
            h.chunk_bytes > (uint64_t(64) << 20) || h.min_stripe_bytes < 1 || h.min_stripe_bytes > h.chunk_bytes)
          return NetStatus::error(NetCode::BadHandle,
                                  from + " has an inconsistent handshake (socket " + std::to_string(h.socket_index) +
                                      " of " + std::to_string(h.sockets) + ", chunk " + std::to_string(h.chunk_bytes) + ")");
        auto it = std::find_if(st.assembling.begin(), st.assembling.end(),
                               [&](const State::Assembling& c) { return c.id == h.connection_id; });
        if (it == st.assembling.end()) {
          State::Assembling c;
          c.id = h.connection_id;
          c.cookie = h.cookie;
          c.chunk_bytes = h.chunk_bytes;
          c.min_stripe_bytes = h.min_stripe_bytes;
          c.peer = done.peer;
          c.sockets.resize(h.sockets);
          c.deadline = now + timeout;
          st.assembling.push_back(std::move(c));
          it = st.assembling.end() - 1;
        }
        if (it->sockets[h.socket_index].valid())
          return NetStatus::error(NetCode::BadHandle, from + " sent socket " + std::to_string(h.socket_index) + " twice");
        it->sockets[h.socket_index] = std::move(done.socket);
        if (++it->arrived == int(it->sockets.size())) {
          State::Assembling c = std::move(*it);
          st.assembling.erase(it);
          for (auto& s : c.sockets)
            if (auto r = set_no_delay(s.get()); !r.ok()) return r;
          SocketAddress local = local_address_of(c.sockets[0].get());
          auto connection = std::make_unique<Connection>(Connection::Direction::Recv, std::move(c.sockets),
                                                         size_t(c.chunk_bytes), c.min_stripe_bytes,
                                                         st.options.threads_per_conn,
                                                         local, c.peer);
          if (auto r = connection->start(); !r.ok()) return r;
          out->reset(new RecvComm(std::move(connection), c.cookie));
          st.idle_since.reset();
          return {};
        }
      }
      // 3. Connections whose remaining sockets never came.
      for (auto& c : st.assembling) {
        if (now > c.deadline) {
          std::string msg = "connection from " + c.peer.to_string() + " to " + address_.to_string() +
                            ": only " + std::to_string(c.arrived) + " of " + std::to_string(c.sockets.size()) +
                            " sockets arrived within " + std::to_string(st.options.timeout_ms) + " ms";
          st.assembling.erase(st.assembling.begin() + (&c - st.assembling.data()));
          return NetStatus::error(NetCode::Timeout, msg);
        }
      }
      int left = remaining_ms(wait_deadline);
      if (left == 0) break;
      std::vector<pollfd> fds{{st.socket.get(), POLLIN, 0}};
      for (auto& a : st.arriving) fds.push_back({a.socket.get(), POLLIN, 0});
      ::poll(fds.data(), fds.size(), std::min(left, 1000));
    }
    const auto now = Clock::now();
    if (!st.idle_since) st.idle_since = now;
    if (st.arriving.empty() && st.assembling.empty() && now - *st.idle_since > timeout)
      return NetStatus::error(NetCode::Timeout, "no connection arrived on " + address_.to_string() +
                                                    " within " + std::to_string(st.options.timeout_ms) + " ms");
    return {};
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("accept: ") + e.what());
  }
}

}  // namespace topocoll::net
