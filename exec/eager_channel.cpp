#include "exec/eager_channel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "config/warnings.h"
#include "exec/backend.h"
#include "exec/eager_wire.h"
#include "net/socket_calls.h"

namespace topocoll::exec {

namespace {

using eager_wire::kClearToSendMagic;
using eager_wire::kHeaderBytes;
using eager_wire::kHelloBytes;
using eager_wire::kMessageMagic;
// A connection that has not said who it is within this long is a stranger: closed.
constexpr int kHelloDeadlineMs = 5000;
// Unidentified connections kept at once; beyond it the oldest is closed (a flood of
// connections must not exhaust descriptors).
constexpr std::size_t kMaxStrangers = 64;
// Clear-to-sends that arrived before any send of ours awaits them. A receiver announces the
// large receives of one batch and waits for them, and each announcement is taken before we
// send into it, so a real peer is ahead of us by at most one batch's receives from us (a
// step's messages cut into at most 64 pieces each); more is a flood, not a schedule.
constexpr int kMaxEarlyClearToSend = 4096;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

EagerChannel::EagerChannel(int rank, int nranks, const net::SocketAddress& bind, uint32_t mark,
                           int timeout_ms, WarningSink warn)
    : rank_(rank), nranks_(nranks), mark_(mark), timeout_ms_(timeout_ms), warn_(std::move(warn)),
      bind_(bind) {
  const std::string who = "rank " + std::to_string(rank_) + ": eager listener on " + bind.to_string();
  if (auto st = net::open_tcp_socket(bind.family, &listener_); !st.ok())
    throw BackendError(who + ": " + st.message);
  const int one = 1;
  ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage sa{};
  net::SocketAddress any_port = bind;
  any_port.port = 0;
  const unsigned len = any_port.to_sockaddr(&sa);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
    throw BackendError(who + ": bind: " + net::errno_text(errno));
  if (::listen(listener_.get(), 128) != 0)
    throw BackendError(who + ": listen: " + net::errno_text(errno));
  local_.address = net::local_address_of(listener_.get());
  local_.nonce = net::random_u64();
  send_.resize(nranks_);
  recv_.resize(nranks_);
}

EagerChannel::~EagerChannel() = default;

void EagerChannel::set_peers(std::vector<Address> peers) { peers_ = std::move(peers); }

std::string EagerChannel::sending_to(int peer) const {
  return "rank " + std::to_string(peer) +
         (peer < int(peers_.size()) ? " at " + peers_[peer].address.to_string() : "");
}

std::string EagerChannel::received_from(int peer) const {
  return "rank " + std::to_string(peer) + " (eager connection from " + recv_[peer].from.to_string() + ")";
}

void EagerChannel::fail(bool send, int peer, const Message& m, const std::string& why) const {
  throw BackendError("rank " + std::to_string(rank_) + ": " +
                     (send ? "send to " + sending_to(peer) : "receive from " + received_from(peer)) +
                     " (" + std::to_string(m.bytes) + " bytes, eager): " + why);
}

void EagerChannel::open_send_link(int peer) {
  SendLink& link = send_[peer];
  const net::SocketAddress& to = peers_.at(peer).address;
  const std::string what = "rank " + std::to_string(rank_) + ": eager connect to " + sending_to(peer);
  if (auto st = net::open_tcp_socket(to.family, &link.socket); !st.ok())
    throw BackendError(what + ": " + st.message);
  net::set_no_delay(link.socket.get());
  if (mark_ != 0 &&
      ::setsockopt(link.socket.get(), SOL_SOCKET, SO_MARK, &mark_, sizeof mark_) != 0)
    throw BackendError(what + ": SO_MARK " + std::to_string(mark_) + ": " + net::errno_text(errno));
  // Leave from this rank's own address: on a multi-NIC host (or the emulated fabric) the
  // source address picks the route.
  sockaddr_storage sa{};
  net::SocketAddress from = bind_;
  from.port = 0;
  unsigned len = from.to_sockaddr(&sa);
  if (::bind(link.socket.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
    throw BackendError(what + ": bind to " + from.to_string() + ": " + net::errno_text(errno));
  len = to.to_sockaddr(&sa);
  if (::connect(link.socket.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 &&
      errno != EINPROGRESS)
    throw BackendError(what + ": " + net::errno_text(errno));
  eager_wire::Hello hello;
  hello.rank = uint32_t(rank_);
  hello.nonce = peers_[peer].nonce;
  std::memcpy(link.hello, &hello, sizeof hello);
  link.hello_left = kHelloBytes;
}

void EagerChannel::activate(int peer) {
  if (!active_flag_[peer]) {
    active_flag_[peer] = 1;
    active_.push_back(peer);
  }
}

void EagerChannel::post_send(int peer, const void* src, std::size_t bytes) {
  if (active_flag_.empty()) active_flag_.assign(nranks_, 0);
  SendLink& link = send_[peer];
  if (!link.socket.valid()) open_send_link(peer);
  Message& m = link.queue.emplace_back();
  m.data = static_cast<char*>(const_cast<void*>(src));
  m.bytes = bytes;
  m.header[0] = kMessageMagic;
  m.header[1] = uint32_t(bytes);
  ++pending_;
  activate(peer);
  // Out at once: the message is on the wire before the caller posts its receives.
  write_link(peer);
}

void EagerChannel::post_recv(int peer, void* dst, std::size_t bytes) {
  if (active_flag_.empty()) active_flag_.assign(nranks_, 0);
  Message& m = recv_[peer].queue.emplace_back();
  m.data = static_cast<char*>(dst);
  m.bytes = bytes;
  ++pending_;
  activate(peer);
}

void EagerChannel::post_clear_to_send(int peer, std::size_t bytes) {
  if (active_flag_.empty()) active_flag_.assign(nranks_, 0);
  SendLink& link = send_[peer];
  if (!link.socket.valid()) open_send_link(peer);
  Message& m = link.queue.emplace_back();
  m.bytes = 0;
  m.header[0] = kClearToSendMagic;
  m.header[1] = uint32_t(std::min<std::size_t>(bytes, UINT32_MAX));
  ++pending_;
  activate(peer);
  write_link(peer);
}

void EagerChannel::expect_clear_to_send(int peer) {
  if (active_flag_.empty()) active_flag_.assign(nranks_, 0);
  ++recv_[peer].awaited_cts;
  ++awaited_cts_;
  activate(peer);
}

bool EagerChannel::take_clear_to_send(int peer, std::size_t bytes) {
  RecvLink& link = recv_[peer];
  if (link.clear_to_send.empty()) return false;
  const uint32_t announced = link.clear_to_send.front();
  if (announced != uint32_t(std::min<std::size_t>(bytes, UINT32_MAX)))
    throw BackendError("rank " + std::to_string(rank_) + ": send to " + sending_to(peer) + " (" +
                       std::to_string(bytes) + " bytes): rank " + std::to_string(peer) +
                       " posted a receive of " + std::to_string(announced) +
                       " bytes (its clear-to-send came over the eager connection from " +
                       link.from.to_string() + ")");
  link.clear_to_send.pop_front();
  --link.awaited_cts;
  --awaited_cts_;
  return true;
}

bool EagerChannel::wants_read(int peer) const {
  const RecvLink& link = recv_[peer];
  // A data header already read waits for its receive to be posted; its payload is next.
  if (link.header_got == kHeaderBytes && link.header[0] == kMessageMagic && link.queue.empty())
    return false;
  return !link.queue.empty() || int(link.clear_to_send.size()) < link.awaited_cts;
}

bool EagerChannel::write_link(int peer) {
  SendLink& link = send_[peer];
  bool moved = false;
  while (!link.queue.empty()) {
    Message& m = link.queue.front();
    iovec iov[3];
    int n_iov = 0;
    if (link.hello_left > 0)
      iov[n_iov++] = {link.hello + (kHelloBytes - link.hello_left), link.hello_left};
    if (m.done < kHeaderBytes)
      iov[n_iov++] = {reinterpret_cast<char*>(m.header) + m.done, kHeaderBytes - m.done};
    const std::size_t payload_done = m.done > kHeaderBytes ? m.done - kHeaderBytes : 0;
    if (payload_done < m.bytes) iov[n_iov++] = {m.data + payload_done, m.bytes - payload_done};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    const ssize_t n = ::sendmsg(link.socket.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      fail(true, peer, m, net::errno_text(errno));
    }
    std::size_t left = std::size_t(n);
    const std::size_t hello = std::min(left, link.hello_left);
    link.hello_left -= hello;
    left -= hello;
    m.done += left;
    moved = moved || n > 0;
    if (m.done < kHeaderBytes + m.bytes) return moved;
    link.queue.pop_front();
    --pending_;
  }
  return moved;
}

bool EagerChannel::read_link(int peer) {
  RecvLink& link = recv_[peer];
  bool moved = false;
  auto closed = [&](const Message* m) {
    const std::string why = "the eager connection from " + link.from.to_string() + " that claimed rank " +
                            std::to_string(peer) + " closed (the process exited or failed)";
    if (m) fail(false, peer, *m, why);
    throw BackendError("rank " + std::to_string(rank_) + ": waiting for rank " +
                       std::to_string(peer) + ": " + why);
  };
  while (link.socket.valid() && wants_read(peer)) {
    if (link.header_got < kHeaderBytes) {
      // Header first: it says whether a CTS or a data message follows.
      const ssize_t n = ::recv(link.socket.get(), reinterpret_cast<char*>(link.header) + link.header_got,
                               kHeaderBytes - link.header_got, MSG_DONTWAIT);
      if (n == 0) closed(link.queue.empty() ? nullptr : &link.queue.front());
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
        throw BackendError("rank " + std::to_string(rank_) + ": receive from " + received_from(peer) +
                           ": " + net::errno_text(errno));
      }
      link.header_got += std::size_t(n);
      if (link.header_got < kHeaderBytes) return moved;
      if (link.header[0] == kClearToSendMagic) {
        link.header_got = 0;
        // Only a clear-to-send a send of ours awaits is progress: early ones must neither
        // pile up nor hold off the no-progress timeout.
        const int early = int(link.clear_to_send.size()) - link.awaited_cts;
        if (early >= kMaxEarlyClearToSend)
          throw BackendError("rank " + std::to_string(rank_) + ": protocol error from " + received_from(peer) +
                             ": more than " + std::to_string(kMaxEarlyClearToSend) +
                             " clear-to-send frames no send of this rank asked for (a real rank is "
                             "ahead by at most one batch of receives; a flood, or not rank " +
                             std::to_string(peer) + ")");
        moved = moved || early < 0;
        link.clear_to_send.push_back(link.header[1]);
        continue;
      }
      if (link.header[0] != kMessageMagic)
        throw BackendError("rank " + std::to_string(rank_) + ": receive from " + received_from(peer) +
                           ": corrupt stream: header magic " + net::hex32(link.header[0]));
      moved = true;
      link.payload_done = 0;
      if (link.queue.empty()) return moved;  // the payload waits for its receive
    }
    Message& m = link.queue.front();
    if (link.payload_done == 0 && link.header[1] != m.bytes)
      fail(false, peer, m, "rank " + std::to_string(peer) + " sent " +
                               std::to_string(link.header[1]) + " bytes where " +
                               std::to_string(m.bytes) + " were posted");
    while (link.payload_done < m.bytes) {
      const ssize_t n = ::recv(link.socket.get(), m.data + link.payload_done,
                               m.bytes - link.payload_done, MSG_DONTWAIT);
      if (n == 0) closed(&m);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
        fail(false, peer, m, net::errno_text(errno));
      }
      link.payload_done += std::size_t(n);
      moved = true;
    }
    link.queue.pop_front();
    link.header_got = 0;
    link.payload_done = 0;
    --pending_;
  }
  return moved;
}

void EagerChannel::reject(Stranger& s, const std::string& why) {
  ++rejected_;
  const std::string text = "rank " + std::to_string(rank_) + ": closed a connection to the eager port from " +
                           s.from.to_string() + ": " + why + " (" + std::to_string(rejected_) +
                           " rejected so far)";
  if (warn_)
    warn_(text);
  else
    config::warn(text);
  s.socket.reset();
}

// Accepting is not progress: a stream of strangers must not hold off the timeout.
void EagerChannel::accept_strangers() {
  for (;;) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: none waiting. EMFILE and the like: leave it queued, retry on the next pass,
      // after a pause (the listener stays readable: the caller's poll would return at once).
      if (net::is_resource_shortage(errno)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    if (strangers_.size() >= kMaxStrangers) {  // a flood crowds out its own sockets, not a peer's
      const size_t victim = net::socket_to_crowd_out(
          strangers_, [](const Stranger& s) { return s.socket.get(); }, [](const Stranger& s) { return s.got; });
      reject(strangers_[victim], "too many connections had not said who they are");
      strangers_.erase(strangers_.begin() + long(victim));
    }
    Stranger& s = strangers_.emplace_back();
    s.socket = net::FileDescriptor(fd);
    s.from = net::peer_address_of(fd);
    s.deadline_ms = now_ms() + std::min(kHelloDeadlineMs, timeout_ms_);
  }
}

// True when a peer's connection was identified (progress); strangers turned away are not.
bool EagerChannel::read_hellos() {
  bool moved = false;
  std::string dispute;
  const int64_t now = now_ms();
  for (Stranger& s : strangers_) {
    while (s.got < kHelloBytes) {
      const ssize_t n = ::recv(s.socket.get(), s.hello + s.got, kHelloBytes - s.got, MSG_DONTWAIT);
      if (n > 0) {
        s.got += std::size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) reject(s, "it closed after " + std::to_string(s.got) + " of " +
                                std::to_string(kHelloBytes) + " hello bytes");
      else if (errno != EAGAIN && errno != EWOULDBLOCK) reject(s, net::errno_text(errno));
      else if (now > s.deadline_ms) reject(s, "it sent " + std::to_string(s.got) + " of " +
                                                  std::to_string(kHelloBytes) + " hello bytes in time");
      break;
    }
    if (!s.socket.valid() || s.got < kHelloBytes) continue;
    const eager_wire::Hello hello = eager_wire::read_hello(s.hello);
    const uint32_t from = hello.rank;
    if (hello.magic != eager_wire::kHelloMagic)
      reject(s, "not a topocoll eager hello (magic " + net::hex32(hello.magic) + ")");
    else if (hello.version != eager_wire::kVersion)
      reject(s, "eager protocol version " + std::to_string(hello.version) + ", this rank speaks " +
                    std::to_string(eager_wire::kVersion));
    else if (hello.nonce != local_.nonce)
      reject(s, "its hello names another listener (stale or foreign job)");
    else if (from >= uint32_t(nranks_) || int(from) == rank_)
      reject(s, "it claims rank " + std::to_string(from) + " of " + std::to_string(nranks_));
    else if (recv_[from].socket.valid()) {
      // Only someone who learned this listener's nonce can say this: one of the two is not
      // that rank. Refused, and the rank stops rather than trust either.
      if (dispute.empty())
        dispute = "two eager connections claim rank " + std::to_string(from) + ": from " +
                  recv_[from].from.to_string() + " (first) and from " + s.from.to_string() +
                  " (refused); one of them is not rank " + std::to_string(from) +
                  " but a process that learned this job's rendezvous (docs/reliability.md): "
                  "not going on with either";
      reject(s, "it claims rank " + std::to_string(from) + ", already connected from " +
                    recv_[from].from.to_string());
    } else {
      recv_[from].from = s.from;
      recv_[from].socket = std::move(s.socket);
      moved = true;
    }
  }
  std::erase_if(strangers_, [](const Stranger& s) { return !s.socket.valid(); });
  if (!dispute.empty()) throw BackendError("rank " + std::to_string(rank_) + ": " + dispute);
  return moved;
}

bool EagerChannel::progress() {
  if (active_.empty()) return false;
  bool moved = false;
  bool need_accept = !strangers_.empty();
  for (int peer : active_) {
    if (!send_[peer].queue.empty()) moved |= write_link(peer);
    if (wants_read(peer)) {
      if (!recv_[peer].socket.valid()) need_accept = true;
      moved |= read_link(peer);
    }
  }
  if (need_accept) {
    accept_strangers();
    moved |= read_hellos();
    for (int peer : active_)
      if (wants_read(peer) && recv_[peer].socket.valid()) moved |= read_link(peer);
  }
  if (pending_ == 0 && awaited_cts_ == 0) {
    for (int peer : active_) active_flag_[peer] = 0;
    active_.clear();
  }
  return moved;
}

void EagerChannel::wait(int timeout_ms, int also_fd) {
  fds_.clear();
  if (also_fd >= 0) fds_.push_back({also_fd, POLLIN, 0});
  bool need_accept = !strangers_.empty();
  for (int peer : active_) {
    if (!send_[peer].queue.empty()) fds_.push_back({send_[peer].socket.get(), POLLOUT, 0});
    if (wants_read(peer)) {
      if (recv_[peer].socket.valid())
        fds_.push_back({recv_[peer].socket.get(), POLLIN, 0});
      else
        need_accept = true;
    }
  }
  if (need_accept) {
    fds_.push_back({listener_.get(), POLLIN, 0});
    const int64_t now = now_ms();
    for (const Stranger& s : strangers_) {
      fds_.push_back({s.socket.get(), POLLIN, 0});
      timeout_ms = int(std::clamp<int64_t>(s.deadline_ms - now + 1, 0, timeout_ms));
    }
  }
  ::poll(fds_.data(), fds_.size(), timeout_ms);
}

std::vector<std::string> EagerChannel::describe_pending() const {
  std::vector<std::string> out;
  for (int peer : active_) {
    for (const Message& m : send_[peer].queue)
      out.push_back("send to rank " + std::to_string(peer) + " (" + std::to_string(m.bytes) +
                    " bytes, eager" + (m.done ? ", " + std::to_string(m.done) + " moved" : "") + ")");
    const std::string unconnected =
        recv_[peer].socket.valid() ? "" : ", rank " + std::to_string(peer) + " never connected";
    for (const Message& m : recv_[peer].queue)
      out.push_back("receive from rank " + std::to_string(peer) + " (" + std::to_string(m.bytes) +
                    " bytes, eager" + unconnected + ")");
    const int cts = recv_[peer].awaited_cts - int(recv_[peer].clear_to_send.size());
    if (cts > 0)
      out.push_back("clear-to-send from rank " + std::to_string(peer) + " (" + std::to_string(cts) +
                    " large send(s) waiting for rank " + std::to_string(peer) + " to post its receive" +
                    unconnected + ")");
  }
  return out;
}

}  // namespace topocoll::exec
