#include "accept/flow_probe.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "net/socket_address.h"
#include "net/socket_calls.h"

namespace topocoll::accept {
namespace {

using Clock = std::chrono::steady_clock;

net::SocketAddress ipv4(const std::string& address, int port) {
  const std::optional<net::SocketAddress> a = net::SocketAddress::parse(address, uint16_t(port));
  if (!a || a->family != AF_INET) throw std::runtime_error("'" + address + "' is not an IPv4 address");
  return *a;
}

net::FileDescriptor tcp_socket() {
  net::FileDescriptor fd;
  if (const net::NetStatus s = net::open_tcp_socket(AF_INET, &fd); !s.ok())
    throw std::runtime_error(std::string("socket: ") + std::strerror(s.error_number));
  return fd;
}

double microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The zeros every sender pushes.
const char* payload() {
  static const std::unique_ptr<char[]> zeros(new char[1 << 20]());
  return zeros.get();
}
constexpr size_t kPayloadChunk = 1 << 20;

struct Outgoing {  // one connection of a sent flow
  size_t task = 0;
  net::FileDescriptor fd;
  bool connected = false;
  FlowHeader header;
  size_t header_sent = 0;
  uint64_t sent = 0;
  Clock::time_point started;
};

struct Incoming {  // one accepted connection
  net::FileDescriptor fd;
  FlowHeader header;
  size_t header_read = 0;
  int task = -1;  // once the header names a flow of ours
  uint64_t received = 0;
};

struct Arrival {  // per received flow
  int64_t bytes = 0;            // all that arrived
  int64_t measured = 0;         // in the measured part of the window
  Clock::time_point first;
  Clock::time_point last;       // the last byte counted in `measured`
};

}  // namespace

FlowListener::FlowListener(const std::string& address) {
  socket_ = tcp_socket();
  if (const int e = net::bind_and_listen(socket_.get(), ipv4(address, 0), 256); e != 0)
    throw std::runtime_error("cannot listen on " + address + ": " + std::strerror(e));
  port_ = net::local_address_of(socket_.get()).port;
}

std::vector<FlowOutcome> run_flow_round(FlowListener& listener, uint32_t round, uint64_t run,
                                        const std::vector<FlowTask>& tasks,
                                        Clock::time_point window_end) {
  std::vector<FlowOutcome> out(tasks.size());
  std::vector<Outgoing> outgoing;
  std::vector<Incoming> incoming;
  std::map<uint32_t, size_t> receiving;  // flow index -> task
  std::vector<Arrival> arrivals(tasks.size());
  std::vector<int> streams_left(tasks.size(), 0);
  const Clock::time_point start = Clock::now();
  // The first quarter of the window is TCP's start; what arrives after it is measured.
  const Clock::time_point warm = start + (window_end - start) / 4;
  const Clock::time_point deadline = window_end + std::chrono::milliseconds(200);

  for (size_t i = 0; i < tasks.size(); ++i) {
    const FlowTask& t = tasks[i];
    out[i].flow = t.flow;
    out[i].sending = t.sending;
    streams_left[i] = std::max(1, t.streams);
    if (!t.sending) {
      receiving[t.flow] = i;
      continue;
    }
    for (int s = 0; s < streams_left[i]; ++s) {
      Outgoing o;
      o.task = i;
      o.started = Clock::now();
      o.header.round = round;
      o.header.flow = t.flow;
      o.header.stream = uint16_t(s);
      o.header.streams = uint16_t(streams_left[i]);
      o.header.run = run;
      const uint64_t share = uint64_t(t.bytes) / uint64_t(streams_left[i]);
      o.header.bytes = s + 1 == streams_left[i] ? uint64_t(t.bytes) - share * uint64_t(s) : share;
      bool before_the_network = true;  // a failure here is this host's (mark, bind), not a cable's
      try {
        o.fd = tcp_socket();
        if (t.mark && ::setsockopt(o.fd.get(), SOL_SOCKET, SO_MARK, &t.mark, sizeof t.mark) != 0)
          throw std::runtime_error(std::string("SO_MARK (needs CAP_NET_ADMIN): ") + std::strerror(errno));
        // In flight at most ~20 ms of the flow's rate: a flow that fills a cable must not also
        // fill the queue before it, or the next round's flows wait behind this one's bytes.
        if (t.expected_gbps > 0) {
          const int buffer = int(std::clamp(t.expected_gbps * 1e9 / 8 * 0.02 / streams_left[i], 32e3, 4e6));
          ::setsockopt(o.fd.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
        }
        if (const int e = net::bind_local(o.fd.get(), ipv4(t.local_address, 0)); e != 0)
          throw std::runtime_error("bind " + t.local_address + ": " + std::strerror(e));
        net::set_no_delay(o.fd.get());
        before_the_network = false;
        if (const int e = net::start_connect(o.fd.get(), ipv4(t.peer_address, t.peer_port)); e != 0)
          throw std::runtime_error("connect to " + t.peer_address + ": " + std::strerror(e));
      } catch (const std::exception& e) {
        if (out[i].error.empty()) out[i].error = e.what(), out[i].local_error = before_the_network;
        continue;  // o, and its socket, end here
      }
      outgoing.push_back(std::move(o));
    }
  }

  auto receiving_done = [&] {
    for (const auto& [flow, i] : receiving)
      if (streams_left[i] > 0) return false;
    return true;
  };
  auto sending_done = [&] {
    return std::all_of(outgoing.begin(), outgoing.end(), [](const Outgoing& o) { return !o.fd.valid(); });
  };

  std::vector<pollfd> fds;
  char sink[1 << 16];
  while (Clock::now() < deadline && !(receiving_done() && sending_done())) {
    // Senders stop at the window's end even when their sockets are not writable.
    if (Clock::now() >= window_end)
      for (auto& o : outgoing)
        if (o.fd.valid() && o.header_sent == sizeof o.header) {
          o.fd.reset();
          if (--streams_left[o.task] == 0 && out[o.task].error.empty()) out[o.task].complete = true;
        }
    fds.clear();
    fds.push_back({listener.fd(), POLLIN, 0});
    for (const auto& o : outgoing) fds.push_back({o.fd.get(), short(o.fd.valid() ? POLLOUT : 0), 0});
    for (const auto& in : incoming) fds.push_back({in.fd.get(), short(in.fd.valid() ? POLLIN : 0), 0});
    const int wait_ms = int(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count(), 1, 100));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
    size_t k = 0;
    // Connections accepted below have no entry in fds until the next poll.
    const size_t polled_incoming = incoming.size();
    if (fds[k++].revents & POLLIN)
      for (;;) {
        net::FileDescriptor fd = net::accept_connection(listener.fd());
        if (!fd.valid()) break;
        incoming.push_back({std::move(fd), {}, 0, -1, 0});
      }
    for (auto& o : outgoing) {
      const short ev = fds[k++].revents;
      if (!o.fd.valid() || !ev) continue;
      FlowOutcome& result = out[o.task];
      if (!o.connected) {
        if (const int err = net::connect_error(o.fd.get()); err != 0) {
          if (result.error.empty())
            result.error = "connect to " + tasks[o.task].peer_address + ": " + std::strerror(err);
          o.fd.reset();
          continue;
        }
        o.connected = true;
        if (result.connect_us < 0) result.connect_us = microseconds(Clock::now() - o.started);
      }
      while (o.fd.valid()) {
        ssize_t n;
        if (Clock::now() >= window_end && o.header_sent == sizeof o.header) {
          ::shutdown(o.fd.get(), SHUT_WR);
          o.fd.reset();
          if (--streams_left[o.task] == 0 && result.error.empty()) result.complete = true;
          break;
        }
        if (o.header_sent < sizeof o.header) {
          n = ::send(o.fd.get(), reinterpret_cast<const char*>(&o.header) + o.header_sent,
                     sizeof o.header - o.header_sent, MSG_NOSIGNAL);
          if (n > 0) o.header_sent += size_t(n);
        } else if (o.sent < o.header.bytes) {
          n = ::send(o.fd.get(), payload(), std::min<uint64_t>(kPayloadChunk, o.header.bytes - o.sent), MSG_NOSIGNAL);
          if (n > 0) o.sent += uint64_t(n), result.bytes += n;
        } else {
          ::shutdown(o.fd.get(), SHUT_WR);
          o.fd.reset();
          if (--streams_left[o.task] == 0 && result.error.empty()) result.complete = true;
          break;
        }
        if (n < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            if (result.error.empty()) result.error = std::string("send: ") + std::strerror(errno);
            o.fd.reset();
          }
          break;
        }
      }
    }
    for (size_t j = 0; j < polled_incoming; ++j) {
      Incoming& in = incoming[j];
      const short ev = fds[k++].revents;
      if (!in.fd.valid() || !ev) continue;
      for (;;) {
        if (in.header_read < sizeof in.header) {
          const ssize_t n = ::recv(in.fd.get(), reinterpret_cast<char*>(&in.header) + in.header_read,
                                   sizeof in.header - in.header_read, 0);
          if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) in.fd.reset();
            break;
          }
          in.header_read += size_t(n);
          if (in.header_read < sizeof in.header) continue;
          const auto it = receiving.find(in.header.flow);
          // Strays (a port scanner, an earlier round's straggler, another run) are closed.
          if (in.header.magic != kFlowMagic || in.header.run != run || in.header.round != round ||
              it == receiving.end()) {
            in.fd.reset();
            break;
          }
          in.task = int(it->second);
          continue;
        }
        const ssize_t n = ::recv(in.fd.get(), sink, sizeof sink, 0);
        if (n < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) in.fd.reset();
          break;
        }
        Arrival& a = arrivals[in.task];
        const auto now = Clock::now();
        if (n == 0) {  // the sender finished this stream
          in.fd.reset();
          if (--streams_left[in.task] == 0) out[in.task].complete = true;
          break;
        }
        if (a.bytes == 0) a.first = now;
        a.bytes += n;
        in.received += uint64_t(n);
        if (now >= warm && now <= window_end) a.measured += n, a.last = now;
      }
    }
    // Drop closed connections.
    std::erase_if(incoming, [](const Incoming& in) { return !in.fd.valid(); });
  }
  outgoing.clear();  // closes what is still open
  incoming.clear();

  for (size_t i = 0; i < tasks.size(); ++i) {
    FlowOutcome& r = out[i];
    if (tasks[i].sending) continue;
    const Arrival& a = arrivals[i];
    r.bytes = a.bytes;
    if (a.bytes == 0) {
      r.error = "nothing arrived in " + std::to_string(int(microseconds(window_end - start) / 1000)) + " ms";
      continue;
    }
    // Over the measured part of the window, from its start or from the first byte if later,
    // to its end, or to the last byte when the sender's window closed a little earlier: the
    // ranks leave the barrier one after another, so the sender's window may end before this
    // one, and the time after its last byte is not the flow's. By at most an eighth of the
    // measured part: a flow that stopped halfway is not a fast one.
    const Clock::time_point measured_from = std::max(warm, a.first);
    const Clock::time_point end = std::max(a.last, window_end - (window_end - warm) / 8);
    const double span_us = microseconds(std::min(window_end, end) - measured_from);
    r.rate_gbps = span_us > 0 ? double(a.measured) * 8 / (span_us * 1e3) : 0;
  }
  return out;
}

}  // namespace topocoll::accept
