// Listener: binds, publishes a Handle, and assembles incoming connections from their
// sockets' hellos (several sockets per connection, grouped by connection id).
//
// A socket whose hello is not ours (a port scanner, a misdirected client, another release,
// the handle of another listener) or never arrives is a stray: it is closed and counted
// with a WARN naming its address, and accepting goes on; it never fails the caller's job.
// At most kMaxArrivingSockets wait for their hello at once (a flood crowds out its own
// oldest sockets, not descriptors), each for at most kHelloDeadline.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "config/warnings.h"
#include "net/connection.h"
#include "net/hello_check.h"
#include "net/socket_calls.h"
#include "net/socket_transport.h"
#include "net/wire_format.h"

namespace topocoll::net {

namespace {
constexpr size_t kMaxArrivingSockets = 256;
// A real peer sends its hello right after connecting; a socket silent this long is a stray.
constexpr std::chrono::milliseconds kHelloDeadline{10000};
// Strays warned one by one; past these, every kStrayWarnEvery-th one is a summary.
constexpr uint64_t kStraysWarnedEach = 10, kStrayWarnEvery = 1000;
// accept4 failing this many times in a row with a connection's pending network error fails
// the listener: NCCL_SOCKET_RETRY_CNT's default, NCCL's bound on the same retries.
constexpr int kFailedAcceptsInARow = 34;
}  // namespace

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
  uint64_t strays = 0;
  int failed_accepts = 0;  // accept4 failures in a row with a connection's pending network error

  void close_stray(const SocketAddress& peer, const SocketAddress& local, const std::string& why) {
    close_stray(peer.to_string(), local, why);
  }
  void close_stray(const std::string& peer, const SocketAddress& local, const std::string& why) {
    ++strays;
    if (strays <= kStraysWarnedEach || strays % kStrayWarnEvery == 0)
      config::warn("closed a stray connection from " + peer + " to " + local.to_string() + ": " +
                   why + " (" + std::to_string(strays) + " stray connection" + (strays == 1 ? "" : "s") +
                   " so far; still accepting)");
  }
};

uint64_t Listener::stray_connections() const { return state_->strays; }

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
    const char* failed_call = "";
    if (const int e = bind_and_listen(fd, bind_address, 1024, &failed_call); e != 0)
      return NetStatus::error(NetCode::SystemError,
                              std::string(failed_call) == "bind"
                                  ? "listen: cannot bind " + bind_address.to_string() + ": " + errno_text(e)
                                  : "listen() on " + bind_address.to_string() + " failed: " + errno_text(e));
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
  const auto idle_timeout = std::chrono::milliseconds(st.options.accept_idle_timeout_ms);
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
          const int err = errno;
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) break;
          // A connection that failed before it was taken (Linux reports its network error
          // through accept): a stray, not the listener's failure, as in NCCL's Socket transport
          // (misc/socket.cc socketTryAccept), up to as many in a row as NCCL retries.
          if (is_pending_network_error(err) && ++st.failed_accepts < kFailedAcceptsInARow) {
            st.close_stray("a peer", address_, "it failed before it was accepted: " + errno_text(err));
            continue;
          }
          return NetStatus::error(NetCode::SystemError, "accept on " + address_.to_string() + " failed" +
                                                            (st.failed_accepts >= kFailedAcceptsInARow
                                                                 ? " " + std::to_string(st.failed_accepts) + " times in a row"
                                                                 : std::string()) +
                                                            ": " + errno_text(err));
        }
        st.failed_accepts = 0;
        if (st.arriving.size() >= kMaxArrivingSockets) {
          // Crowded: the oldest socket that has sent nothing goes, not the real peer's.
          const size_t victim = socket_to_crowd_out(
              st.arriving, [](const State::Arriving& a) { return a.socket.get(); },
              [](const State::Arriving& a) { return a.received; });
          st.close_stray(st.arriving[victim].peer, address_,
                         "crowded out by " + std::to_string(kMaxArrivingSockets) +
                             " other connections before its handshake arrived");
          st.arriving.erase(st.arriving.begin() + long(victim));
        }
        State::Arriving a;
        a.socket = FileDescriptor(fd);
        a.peer = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
        a.deadline = now + std::min<Clock::duration>(timeout, kHelloDeadline);
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
          // Its first bytes already say whether it speaks this protocol (a probe sending an
          // HTTP request): turned away now, not after holding a slot until the deadline.
          if (a.received >= sizeof a.hello.magic && a.hello.magic != kHelloMagic) {
            st.close_stray(a.peer, address_, hello_problem(a.hello, handle_));
            st.arriving.erase(st.arriving.begin() + long(i));
            continue;
          }
          if (now > a.deadline) {
            st.close_stray(a.peer, address_,
                           "sent " + std::to_string(a.received) + " of " + std::to_string(sizeof(Hello)) +
                               " handshake bytes within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::min<Clock::duration>(timeout, kHelloDeadline))
                                                  .count()) +
                               " ms");
            st.arriving.erase(st.arriving.begin() + long(i));
            continue;
          }
          ++i;
          continue;
        }
        State::Arriving done = std::move(a);
        st.arriving.erase(st.arriving.begin() + long(i));
        const Hello& h = done.hello;
        if (std::string why = hello_problem(h, handle_); !why.empty()) {
          st.close_stray(done.peer, address_, why);
          continue;
        }
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
        if (it->sockets[h.socket_index].valid()) {
          st.close_stray(done.peer, address_, "socket " + std::to_string(h.socket_index) +
                                                  " of connection " + std::to_string(h.connection_id) +
                                                  " arrived twice");
          continue;
        }
        it->sockets[h.socket_index] = std::move(done.socket);
        if (++it->arrived == int(it->sockets.size())) {
          State::Assembling c = std::move(*it);
          st.assembling.erase(it);
          for (auto& s : c.sockets)
            if (auto r = set_no_delay(s.get()); !r.ok())
              return NetStatus::error(r.code, "connection from " + c.peer.to_string() + ": " + r.message,
                                      r.error_number);
          SocketAddress local = local_address_of(c.sockets[0].get());
          auto connection = std::make_unique<Connection>(Connection::Direction::Recv, std::move(c.sockets),
                                                         size_t(c.chunk_bytes), c.min_stripe_bytes,
                                                         st.options.threads_per_conn,
                                                         local, c.peer,
                                                         std::chrono::milliseconds(st.options.stall_timeout_ms),
                                                         st.options.caller_polls,
                                                         std::chrono::milliseconds(st.options.idle_poll_ms));
          if (auto r = connection->start(); !r.ok())
            return NetStatus::error(r.code, "connection from " + c.peer.to_string() + ": " + r.message,
                                    r.error_number);
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
    if (st.options.accept_idle_timeout_ms > 0 && st.arriving.empty() && st.assembling.empty() &&
        now - *st.idle_since > idle_timeout)
      return NetStatus::error(NetCode::Timeout, "no connection arrived on " + address_.to_string() + " within " +
                                                    std::to_string(st.options.accept_idle_timeout_ms) + " ms");
    return {};
  } catch (const std::exception& e) {
    return NetStatus::error(NetCode::SystemError, std::string("accept: ") + e.what());
  }
}

}  // namespace topocoll::net
