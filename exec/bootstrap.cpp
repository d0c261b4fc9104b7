#include "exec/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <thread>

#include "config/warnings.h"
#include "exec/bootstrap_wire.h"
#include "net/host_resolution.h"
#include "net/socket_calls.h"

namespace topocoll::exec {

namespace {

namespace wire = bootstrap_wire;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kHeartbeatInterval{1000};
// A socket on the bootstrap port must say its hello this soon, or it is a stray.
constexpr milliseconds kHelloDeadline{2000};
constexpr size_t kMaxJoining = 1024;  // sockets waiting for their hello at once
// How long a failing root tries to tell the ranks why, all of them together.
constexpr milliseconds kTellingLimit{1000};

long long ms_of(milliseconds d) { return (long long)d.count(); }

// net::wait_ready in the bootstrap's words: false on timeout; throws on a poll error.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  const int ready = net::wait_ready(fd, events, deadline);
  if (ready < 0) throw std::runtime_error(std::string("bootstrap poll: ") + std::strerror(errno));
  return ready > 0;
}

// net::send_fully in the bootstrap's words.
void write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const int result = net::send_fully(fd, data, n, deadline);
  if (result == net::kDeadlinePassed) throw std::runtime_error("bootstrap send timed out");
  if (result != 0) throw std::runtime_error(std::string("bootstrap send: ") + std::strerror(result));
}
void write_all(int fd, const std::string& s, Clock::time_point deadline) {
  write_all(fd, s.data(), s.size(), deadline);
}

std::vector<net::SocketAddress> resolve(const BootstrapAddress& a, bool passive) {
  std::vector<net::SocketAddress> addresses;
  if (const net::NetStatus s = net::resolve_host(a.host, a.port, passive, &addresses); !s.ok())
    throw std::runtime_error("bootstrap: cannot resolve '" + a.host + "': " + s.message);
  return addresses;
}

}  // namespace

BootstrapAddress BootstrapAddress::parse(const std::string& text) {
  BootstrapAddress a;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument("bootstrap address '" + text + "': expected [addr]:port");
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("bootstrap address '" + text + "': expected host:port");
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (a.host.empty())
    throw std::invalid_argument("bootstrap address '" + text + "': no host before the port (give the root's "
                                "host name or address, e.g. node0:" + port + ")");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port) > 65535)
    throw std::invalid_argument("bootstrap address '" + text + "': bad port '" + port + "'");
  a.port = uint16_t(std::stoi(port));
  return a;
}

std::string BootstrapAddress::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// --- root ----------------------------------------------------------------------------------

BootstrapRoot::BootstrapRoot(const BootstrapAddress& address, int nranks,
                             std::chrono::milliseconds timeout, std::chrono::milliseconds silence_limit,
                             std::chrono::milliseconds round_limit, uint64_t max_reply_bytes)
    : nranks_(nranks), timeout_(timeout), silence_limit_(silence_limit), round_limit_(round_limit),
      max_reply_bytes_(std::min<uint64_t>(max_reply_bytes, wire::kMaxReply)) {
  if (nranks < 1 || nranks > kMaxGroupRanks)
    throw std::invalid_argument("bootstrap root: a group of " + std::to_string(nranks) + " ranks; it serves 1 to " +
                                std::to_string(kMaxGroupRanks));
  std::string last_error = "no address";
  for (const net::SocketAddress& a : resolve(address, true)) {
    net::FileDescriptor fd;
    if (const net::NetStatus st = net::open_tcp_socket(a.family, &fd); !st.ok()) {
      last_error = st.message;  // socket() failed: the family unsupported (IPv6 off), no descriptors
      continue;
    }
    if (const int e = net::bind_and_listen(fd.get(), a, 1024); e != 0) {
      last_error = std::strerror(e);
      continue;
    }
    port_ = net::local_address_of(fd.get()).port;
    listener_ = std::move(fd);
    break;
  }
  if (!listener_.valid())
    throw std::runtime_error("bootstrap root: cannot listen on " + address.to_string() + ": " +
                             last_error);
  thread_ = std::thread([this] { serve(); });
}

BootstrapRoot::~BootstrapRoot() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string BootstrapRoot::error() const {
  std::lock_guard lock(error_mutex_);
  return error_;
}

namespace {
// A socket on the root's port that has not said its hello yet.
struct Joining {
  net::FileDescriptor fd;
  std::string peer, inbox;
  Clock::time_point deadline;
};
// One message on its way to a rank. A round's reply is built once and shared by every rank's
// outbox (one copy per rank would be ranks x reply bytes: gigabytes at a few thousand ranks).
struct Outgoing {
  std::shared_ptr<const std::string> bytes;
  size_t sent = 0;     // how much of it this rank has taken
  bool reply = false;  // a round reply, which the rank must take; not a heartbeat
};
// A registered rank.
struct Member {
  net::FileDescriptor fd;
  std::string peer, inbox, blob;
  // What the root still has to send it, written without blocking from the poll loop: a rank
  // that does not read holds up only itself, never the root's heartbeats or the others'
  // replies (a blocking write would let the others hear nothing and blame the root).
  std::deque<Outgoing> outbox;
  Clock::time_point heard, outbox_moved;  // outbox_moved: the reply waiting last moved
  bool has_blob = false;
  bool left = false;  // said goodbye

  bool reply_waiting() const {
    return std::any_of(outbox.begin(), outbox.end(), [](const Outgoing& o) { return o.reply; });
  }
  // Sends what the socket takes of the outbox without blocking; an errno on a broken
  // connection, else 0.
  int send_some(Clock::time_point t) {
    while (fd.valid() && !outbox.empty()) {
      Outgoing& o = outbox.front();
      const ssize_t n = ::send(fd.get(), o.bytes->data() + o.sent, o.bytes->size() - o.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : errno;
      if (n == 0) return 0;
      o.sent += size_t(n);
      outbox_moved = t;
      if (o.sent == o.bytes->size()) outbox.pop_front();
    }
    return 0;
  }
};
// Best effort: the rank may be gone or stopped.
void tell(int fd, const std::string& bytes) {
  try {
    write_all(fd, bytes, Clock::now() + std::chrono::seconds(1));
  } catch (const std::exception&) {
  }
}
}  // namespace

void BootstrapRoot::serve() {
  std::vector<Joining> joining;
  std::string accept_shortage;  // why accepting failed last (out of descriptors or memory), if it did
  std::vector<Member> ranks(nranks_);
  int joined = 0, round = 0;
  bool round_open = false;  // a rank contributed to the current round, at round_opened
  Clock::time_point round_opened;
  const auto registration_deadline = Clock::now() + timeout_;
  std::string failure;  // once set the group is over; ranks joining later are told why
  auto last_beat = Clock::now();
  auto rank_name = [&](int r) { return "rank " + std::to_string(r) + " (" + ranks[r].peer + ")"; };
  // Tells every joined rank why the group failed, so nobody waits for a round that will
  // not come.
  auto fail = [&](const std::string& why) {
    if (!failure.empty()) return;
    failure = why;
    {
      std::lock_guard lock(error_mutex_);
      error_ = why;
    }
    // Each rank hears it after the rest of what it was being sent (whole messages), all of
    // them at once without blocking under one deadline: a rank that stopped reading (often
    // why the group fails) costs the others nothing.
    const auto told = std::make_shared<const std::string>(wire::root_message(wire::kGroupFailed, why));
    for (auto& m : ranks)
      if (m.fd.valid()) m.outbox.push_back({told});
    const auto deadline = Clock::now() + kTellingLimit;
    for (;;) {
      std::vector<pollfd> waiting;
      for (auto& m : ranks) {
        if (!m.fd.valid()) continue;
        if (m.send_some(Clock::now()) != 0 || m.outbox.empty()) m.fd.reset();  // gone, or told
        else waiting.push_back({m.fd.get(), POLLOUT, 0});
      }
      const auto left_ms = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (waiting.empty() || left_ms <= 0) break;
      ::poll(waiting.data(), waiting.size(), int(std::min<long long>(left_ms, 100)));
    }
    for (auto& m : ranks) {
      m.fd.reset();
      m.outbox.clear();
    }
  };
  // Moves what it can of rank r's outbox; a rank that takes nothing of a round reply for the
  // silence limit (stopped with its receive buffer full) fails the group naming it.
  auto flush = [&](int r, Clock::time_point t) {
    Member& m = ranks[r];
    if (!m.fd.valid() || m.outbox.empty()) return;
    const bool reply = m.outbox.front().reply;
    if (const int e = m.send_some(t); e != 0) {
      fail("bootstrap: " + rank_name(r) + " died: its connection to the root failed (" + std::strerror(e) +
           ") while the root sent it " + (reply ? "a round reply" : "a heartbeat"));
    } else if (m.reply_waiting() && t - m.outbox_moved > silence_limit_) {
      fail("bootstrap: " + rank_name(r) + " stopped reading its round reply: nothing of it taken for " +
           std::to_string(ms_of(std::chrono::duration_cast<milliseconds>(t - m.outbox_moved))) + " ms");
    }
  };
  auto send_reply = [&](int r, const std::shared_ptr<const std::string>& reply, Clock::time_point t) {
    Member& m = ranks[r];
    if (!m.reply_waiting()) m.outbox_moved = t;  // its silence counts from now
    m.outbox.push_back({reply, 0, true});
    flush(r, t);
  };
  // A heartbeat goes only to a rank with nothing else on its way, and only if its socket
  // takes it now: one that does not fit is dropped, not queued (a live rank that reads the
  // root only at its next round must not be failed for heartbeats it did not take).
  auto send_heartbeat = [&](int r, const std::shared_ptr<const std::string>& beat, Clock::time_point t) {
    Member& m = ranks[r];
    if (!m.fd.valid() || !m.outbox.empty()) return;
    m.outbox.push_back({beat});
    flush(r, t);
    if (!m.outbox.empty() && m.outbox.front().sent == 0) m.outbox.pop_front();
  };
  try {
    for (;;) {
      const auto now = Clock::now();
      if (failure.empty() && joined < nranks_) {
        if (stopping_) {
          fail("bootstrap: the root was shut down when " + std::to_string(joined) + " of " +
               std::to_string(nranks_) + " ranks had joined");
        } else if (now > registration_deadline) {
          std::string missing;
          int listed = 0;
          for (int r = 0; r < nranks_; ++r)
            if (!ranks[r].fd.valid() && !ranks[r].left && listed++ < 8)
              missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          if (nranks_ - joined > 8) missing += ", ...";
          fail("bootstrap: only " + std::to_string(joined) + " of " + std::to_string(nranks_) +
               " ranks joined within " + std::to_string(ms_of(timeout_)) + " ms (missing: rank " +
               missing + ")" +
               (accept_shortage.empty() ? ""
                                        : "; the root could not accept connections (" + accept_shortage +
                                              "): the missing ranks may be waiting in its backlog"));
        }
      }
      // After a failed registration, ranks still arriving are told why until the deadline.
      const bool lingering = !failure.empty() && joined < nranks_ && now < registration_deadline && !stopping_;
      if (!failure.empty() && !lingering) break;

      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (auto& j : joining) fds.push_back({j.fd.get(), POLLIN, 0});
      for (auto& m : ranks)
        if (m.fd.valid()) fds.push_back({m.fd.get(), short(POLLIN | (m.outbox.empty() ? 0 : POLLOUT)), 0});
      ::poll(fds.data(), fds.size(), 100);
      const auto t = Clock::now();

      // New sockets, registered concurrently: none can hold up another. A claim after the
      // group is complete is a duplicate too.
      for (;;) {
        net::SocketAddress peer;
        int accept_error = 0;
        net::FileDescriptor fd = net::accept_connection(listener_.get(), &peer, &accept_error);
        if (!fd.valid()) {
          // Out of descriptors or memory: the ranks wait in the backlog; back off (the
          // listener stays readable, so the poll above returns at once) and say so.
          if (net::is_resource_shortage(accept_error)) {
            if (accept_shortage.empty())
              config::warn("bootstrap root: cannot accept a rank's connection: " +
                           std::string(std::strerror(accept_error)) + "; retrying");
            accept_shortage = std::strerror(accept_error);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          break;
        }
        net::set_no_delay(fd.get());
        if (joining.size() >= kMaxJoining)  // a flood crowds out its own sockets, not a rank's
          joining.erase(joining.begin() +
                        long(net::socket_to_crowd_out(
                            joining, [](const Joining& j) { return j.fd.get(); },
                            [](const Joining& j) { return j.inbox.size(); })));
        joining.push_back({std::move(fd), peer.to_string(), {}, t + std::min<milliseconds>(kHelloDeadline, timeout_)});
      }
      for (size_t i = 0; i < joining.size();) {
        Joining& j = joining[i];
        const bool open = net::receive_available(j.fd.get(), j.inbox);
        if (j.inbox.size() < sizeof(wire::Hello)) {
          if (!open || t > j.deadline) {  // a port scanner, an idle or vanished client
            joining.erase(joining.begin() + long(i));
          } else {
            ++i;
          }
          continue;
        }
        Joining done = std::move(j);
        joining.erase(joining.begin() + long(i));
        wire::Hello h;
        std::memcpy(&h, done.inbox.data(), sizeof h);
        if (h.magic != wire::kMagic) continue;  // not a topocoll rank (a scanner): closed with `done`
        if (!failure.empty()) {
          tell(done.fd.get(), wire::root_message(wire::kGroupFailed, failure));
          continue;
        }
        std::string why;
        if (h.version != wire::kVersion)  // a rank of another release: a mixed install
          why = "bootstrap: " + done.peer + " (rank " + std::to_string(h.rank) + ") speaks " + wire::foreign_hello(h) +
                "; every rank must run the same topocoll";
        else if (h.nranks != nranks_ || h.rank < 0 || h.rank >= nranks_)
          why = "bootstrap: " + done.peer + " joined as rank " + std::to_string(h.rank) + " of " +
                std::to_string(h.nranks) + ", which does not fit this group of " + std::to_string(nranks_) +
                " ranks (every rank must be started with the same size)";
        else if (ranks[h.rank].fd.valid() || ranks[h.rank].left)
          why = "bootstrap: rank " + std::to_string(h.rank) + " joined twice, from " + ranks[h.rank].peer +
                " and from " + done.peer + " (two processes were given that rank, or a stray client claimed it)";
        if (!why.empty() && round > 0) {
          // The group has completed a round: it is the real one. The latecomer alone is told.
          tell(done.fd.get(), wire::root_message(wire::kGroupFailed, why + "; the group is already running without it"));
          continue;
        }
        if (!why.empty()) {
          tell(done.fd.get(), wire::root_message(wire::kGroupFailed, why));
          done.fd.reset();
          fail(why);
          continue;
        }
        Member& m = ranks[h.rank];
        m.fd = std::move(done.fd);
        m.peer = done.peer;
        m.inbox = done.inbox.substr(sizeof h);
        m.heard = t;
        ++joined;
      }
      if (!failure.empty()) continue;

      // What the ranks said: heartbeats, blobs, goodbyes; silence and sudden ends.
      for (int r = 0; r < nranks_ && failure.empty(); ++r) {
        Member& m = ranks[r];
        if (!m.fd.valid()) continue;
        const size_t before = m.inbox.size();
        const bool open = net::receive_available(m.fd.get(), m.inbox);
        if (m.inbox.size() != before) m.heard = t;
        try {
          while (auto f = wire::take_frame(m.inbox)) {
            if (f->kind == wire::FrameKind::Heartbeat) continue;
            if (f->kind == wire::FrameKind::Goodbye) {
              m.left = true;
              m.fd.reset();
              break;
            }
            if (m.has_blob)
              throw std::runtime_error("a second blob before round " + std::to_string(round) + " completed");
            m.has_blob = true;
            m.blob = std::move(f->blob);
          }
        } catch (const std::exception& e) {
          fail("bootstrap: " + rank_name(r) + " broke the protocol: " + e.what());
          break;
        }
        if (m.left) continue;
        if (!open) {
          fail("bootstrap: " + rank_name(r) + " died: its connection to the root closed without a goodbye "
               "(killed, crashed, or its host went away)");
        } else if (t - m.heard > silence_limit_) {
          fail("bootstrap: " + rank_name(r) + " stopped answering: nothing from it for " +
               std::to_string(ms_of(std::chrono::duration_cast<milliseconds>(t - m.heard))) +
               " ms (stopped, e.g. by SIGSTOP, hung, or its host is unreachable)");
        }
      }
      if (!failure.empty()) continue;

      for (int r = 0; r < nranks_ && failure.empty(); ++r) flush(r, t);
      if (!failure.empty()) continue;
      if (t - last_beat >= kHeartbeatInterval) {  // so the ranks can tell a stopped root
        last_beat = t;
        const auto beat = std::make_shared<const std::string>(wire::root_message(wire::kRootHeartbeat));
        for (int r = 0; r < nranks_ && failure.empty(); ++r)  // a rank still sent a reply hears that
          send_heartbeat(r, beat, t);
        if (!failure.empty()) continue;
      }
      if (joined < nranks_) continue;

      // Rounds.
      int with_blob = 0, left = 0;
      for (auto& m : ranks) {
        with_blob += m.has_blob;
        left += m.left;
      }
      if (left == nranks_) break;  // normal end: every rank said goodbye
      if (left > 0 && with_blob > 0) {
        std::string gone;
        for (int r = 0; r < nranks_; ++r)
          if (ranks[r].left) gone += (gone.empty() ? "" : ", ") + rank_name(r);
        fail("bootstrap: " + gone + " left the group while the others wait in round " + std::to_string(round) +
             " (it ended early, most likely with its own error)");
        continue;
      }
      if (with_blob > 0 && !round_open) round_open = true, round_opened = t;
      if (with_blob < nranks_) {
        if (round_open && t - round_opened > round_limit_) {
          // Their heartbeats still come, so the processes live: hung in their own work.
          std::string missing;
          int listed = 0;
          for (int r = 0; r < nranks_; ++r)
            if (!ranks[r].has_blob && listed++ < 8) missing += (missing.empty() ? "" : ", ") + rank_name(r);
          if (nranks_ - with_blob > 8) missing += ", ...";
          fail("bootstrap: round " + std::to_string(round) + " did not complete within " +
               std::to_string(ms_of(round_limit_)) + " ms of its first contribution: " + missing +
               " never contributed to it, though its heartbeat still comes (a live process that hangs in "
               "its own work, or waits for something that does not come); " + std::to_string(with_blob) +
               " of " + std::to_string(nranks_) + " ranks wait in it");
        }
        continue;
      }
      round_open = false;
      // The reply's limit is the ranks' together; the client would refuse a longer one and
      // blame the root, so the root names the sizes instead.
      uint64_t reply_bytes = 0;
      int largest = 0;
      for (int r = 0; r < nranks_; ++r) {
        reply_bytes += sizeof(uint64_t) + ranks[r].blob.size();
        if (ranks[r].blob.size() > ranks[largest].blob.size()) largest = r;
      }
      if (reply_bytes > max_reply_bytes_) {
        fail("bootstrap: round " + std::to_string(round) + "'s reply would carry " + std::to_string(reply_bytes) +
             " bytes, above the " + std::to_string(max_reply_bytes_) + " a round may: " + std::to_string(nranks_) +
             " ranks' contributions together (the largest, " + std::to_string(ranks[largest].blob.size()) +
             " bytes, from " + rank_name(largest) + ")");
        continue;
      }
      std::string reply;
      reply.reserve(size_t(reply_bytes));
      for (auto& m : ranks) {
        const uint64_t n = m.blob.size();
        reply.append(reinterpret_cast<const char*>(&n), sizeof n);
        reply += m.blob;
        m.blob.clear();
        m.has_blob = false;
      }
      const auto message = std::make_shared<const std::string>(wire::root_message(wire::kRoundReply, reply));
      reply.clear();
      reply.shrink_to_fit();
      for (int r = 0; r < nranks_ && failure.empty(); ++r) send_reply(r, message, t);
      ++round;
    }
  } catch (const std::exception& e) {
    fail(std::string("bootstrap root: ") + e.what());
  }
}

// --- client --------------------------------------------------------------------------------

BootstrapClient::BootstrapClient(const BootstrapAddress& root, int rank, int nranks,
                                 std::chrono::milliseconds timeout, std::chrono::milliseconds silence_limit,
                                 std::chrono::milliseconds round_limit)
    : rank_(rank), nranks_(nranks), root_name_(root.to_string()), timeout_(timeout), silence_limit_(silence_limit),
      round_limit_(round_limit) {
  if (nranks < 1 || nranks > kMaxGroupRanks || rank < 0 || rank >= nranks)
    throw std::invalid_argument("bootstrap: rank " + std::to_string(rank) + " of " +
                                std::to_string(nranks) + " is not a valid rank (a group has 1 to " +
                                std::to_string(kMaxGroupRanks) + " ranks)");
  if (root.port == 0)
    throw std::invalid_argument("bootstrap: root address " + root.to_string() + " has port 0 (no root listens there)");
  const auto deadline = Clock::now() + timeout;
  int last_error = 0;  // what the last attempt the deadline did not cut short got
  while (!socket_.valid()) {
    for (const net::SocketAddress& a : resolve(root, false)) {
      if (socket_.valid()) break;
      net::FileDescriptor fd;
      if (const net::NetStatus st = net::open_tcp_socket(a.family, &fd); !st.ok()) {
        last_error = st.error_number != 0 ? st.error_number : EINVAL;
        continue;
      }
      // Non-blocking connect bounded by the deadline: an unreachable host must not hold
      // us for the kernel's SYN retries (minutes).
      int err = net::start_connect(fd.get(), a);
      if (err == 0) {
        const auto slice = std::min(deadline, Clock::now() + std::chrono::seconds(2));
        const bool answered = wait_fd(fd.get(), POLLOUT, slice);
        err = answered ? net::connect_error(fd.get()) : ETIMEDOUT;
        // An attempt our own deadline cut short says nothing about the root.
        if (!answered && slice == deadline && last_error != 0) err = last_error;
        if (err == 0 && net::connected_to_itself(fd.get())) err = ECONNREFUSED;  // no root there yet
      }
      if (err == 0)
        socket_ = std::move(fd);
      else
        last_error = err;
    }
    if (socket_.valid()) break;
    if (Clock::now() > deadline)
      throw std::runtime_error("bootstrap: cannot reach root " + root.to_string() + " within " +
                               std::to_string(timeout.count()) + " ms: " +
                               (last_error == ECONNREFUSED
                                    ? "connection refused: nothing listens there (is rank 0, or the launcher "
                                      "serving the root, running, and is the port right?)"
                                    : last_error == 0 ? std::string("no connection could be attempted")
                                                      : std::string(std::strerror(last_error))));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // root not up yet
  }
  net::set_no_delay(socket_.get());
  const net::SocketAddress local = net::local_address_of(socket_.get());
  local_ip_ = local.is_set() ? local.ip_string() : "";
  wire::Hello h;
  h.rank = rank;
  h.nranks = nranks;
  write_all(socket_.get(), &h, sizeof h, deadline);  // on a throw, socket_ closes with the object
  root_heard_ = Clock::now();
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

BootstrapClient::~BootstrapClient() {
  {
    std::lock_guard lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (socket_.valid()) {
    try {
      send_locked(wire::control_frame(wire::kGoodbyeFrame), Clock::now() + std::chrono::seconds(1));
    } catch (const std::exception&) {
    }
  }
}

void BootstrapClient::send_locked(const std::string& bytes, Clock::time_point deadline) {
  std::lock_guard lock(send_mutex_);
  try {
    write_all(socket_.get(), bytes, deadline);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + " (to the bootstrap root at " + root_name_ + ")");
  }
}

void BootstrapClient::heartbeat_loop() {
  const std::string beat = wire::control_frame(wire::kHeartbeatFrame);
  std::unique_lock lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, kHeartbeatInterval, [&] { return stop_; })) {
    lock.unlock();
    try {
      send_locked(beat, Clock::now() + kHeartbeatInterval);
    } catch (const std::exception&) {
      // The root is gone or stopped: allgather / group_verdict say so.
    }
    lock.lock();
  }
}

std::string BootstrapClient::root_silence_message() const {
  return "the bootstrap root at " + root_name_ + " stopped answering: nothing from it for " +
         std::to_string(ms_of(std::chrono::duration_cast<milliseconds>(Clock::now() - root_heard_))) +
         " ms (rank 0 or the launcher serving it is stopped, hung or unreachable)";
}

bool BootstrapClient::read_root(Clock::time_point deadline, uint32_t* status, std::string* body) {
  for (;;) {
    const size_t before = inbox_.size();
    const bool open = net::receive_available(socket_.get(), inbox_);
    if (inbox_.size() != before) root_heard_ = Clock::now();
    while (auto m = wire::take_root_message(inbox_)) {
      if (m->status == wire::kRootHeartbeat) continue;
      *status = m->status;
      *body = std::move(m->body);
      return true;
    }
    if (!open)
      throw std::runtime_error("the bootstrap root at " + root_name_ +
                               " closed the connection (rank 0 or the launcher serving it ended or was killed)");
    const auto now = Clock::now();
    if (now - root_heard_ > silence_limit_) throw std::runtime_error(root_silence_message());
    if (now >= deadline) return false;
    wait_fd(socket_.get(), POLLIN, std::min(deadline, now + milliseconds(200)));
  }
}

std::vector<std::string> BootstrapClient::allgather(const std::string& mine) {
  if (mine.size() > wire::kMaxBlob)
    throw std::runtime_error("bootstrap: a blob of " + std::to_string(mine.size()) + " bytes, above the " +
                             std::to_string(wire::kMaxBlob) + " a round takes");
  try {
    if (!verdict_.empty()) throw std::runtime_error(verdict_);
    // A root that takes nothing for as long as it may be silent is hung (it reads every
    // rank's socket each pass), not busy: the same bound as its silence when it answers.
    send_locked(wire::blob_frame(mine), Clock::now() + round_limit_ + silence_limit_);
    uint32_t status = 0;
    std::string reply;
    // The root ends a round that waits too long for a rank, telling every rank; this limit
    // only guards against a root that answers yet never decides.
    const auto deadline = Clock::now() + round_limit_ + silence_limit_;
    if (!read_root(deadline, &status, &reply))
      throw std::runtime_error("the bootstrap root at " + root_name_ + " neither completed round " +
                               std::to_string(round_) + " nor failed it within " +
                               std::to_string(ms_of(round_limit_ + silence_limit_)) +
                               " ms of this rank's contribution, although it answers");
    if (status == wire::kGroupFailed) {
      verdict_ = reply;
      throw std::runtime_error(reply);
    }
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos + sizeof(uint64_t) <= reply.size()) {
      uint64_t n;
      std::memcpy(&n, reply.data() + pos, sizeof n);
      pos += sizeof n;
      if (n > reply.size() - pos) break;
      out.emplace_back(reply.substr(pos, n));
      pos += n;
    }
    if (int(out.size()) != nranks_ || pos != reply.size())
      throw std::runtime_error("bootstrap: malformed reply from the root at " + root_name_ + ": " +
                               std::to_string(out.size()) + " blobs and " + std::to_string(reply.size() - pos) +
                               " bytes more, where " + std::to_string(nranks_) + " blobs were expected");
    ++round_;
    return out;
  } catch (const std::exception& e) {
    if (verdict_.empty()) verdict_ = e.what();
    throw std::runtime_error("rank " + std::to_string(rank_) + ": " + e.what());
  }
}

std::string BootstrapClient::group_verdict(std::chrono::milliseconds wait) {
  if (!verdict_.empty()) return verdict_;
  try {
    uint32_t status = 0;
    std::string body;
    if (read_root(Clock::now() + wait, &status, &body))
      verdict_ = status == wire::kGroupFailed ? body : "the bootstrap root sent a round reply outside a round";
  } catch (const std::exception& e) {
    verdict_ = e.what();
  }
  return verdict_;
}

}  // namespace topocoll::exec
