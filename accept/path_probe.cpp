#include "accept/path_probe.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "net/file_descriptor.h"
#include "net/socket_address.h"
#include "net/socket_calls.h"

namespace topocoll::accept {
namespace {

constexpr uint16_t kFirstPort = 33434;  // traceroute's

// Reads one error from the queue: the ICMP type/code, who sent it, and the destination port
// of the probe it answers (so a late answer is not taken for the next probe's).
bool read_error(int fd, int* type, int* code, std::string* from, int* port) {
  char data[64], control[512];
  sockaddr_in name{};
  iovec iov{data, sizeof data};
  msghdr m{};
  m.msg_name = &name;
  m.msg_namelen = sizeof name;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  if (::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return false;
  *port = ntohs(name.sin_port);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_IP || c->cmsg_type != IP_RECVERR) continue;
    const auto* e = reinterpret_cast<const sock_extended_err*>(CMSG_DATA(c));
    if (e->ee_origin != SO_EE_ORIGIN_ICMP) continue;
    *type = e->ee_type;
    *code = e->ee_code;
    const auto* offender = reinterpret_cast<const sockaddr_in*>(SO_EE_OFFENDER(e));
    char text[INET_ADDRSTRLEN] = {};
    if (offender->sin_family == AF_INET) ::inet_ntop(AF_INET, &offender->sin_addr, text, sizeof text);
    *from = text;
    return true;
  }
  return false;
}

}  // namespace

PathTrace trace_path(const std::string& local, const std::string& destination, uint32_t mark,
                     int max_hops, std::chrono::milliseconds per_hop) {
  PathTrace trace;
  // A datagram socket (blocking: a probe is 8 bytes), closed on every way out.
  const net::FileDescriptor probe_socket(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int fd = probe_socket.get();
  if (!probe_socket.valid()) {
    trace.error = std::string("socket: ") + std::strerror(errno);
    return trace;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_IP, IP_RECVERR, &one, sizeof one);
  // Unmarked, the probe would take the default lane, not the flow's, and its first
  // deviation would read as miswiring: no probe then, and why.
  if (mark && ::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0) {
    trace.error = std::string("SO_MARK (needs CAP_NET_ADMIN): ") + std::strerror(errno);
    return trace;
  }
  const std::optional<net::SocketAddress> src = net::SocketAddress::parse(local);
  std::optional<net::SocketAddress> dst = net::SocketAddress::parse(destination);
  if (!src || src->family != AF_INET || !dst || dst->family != AF_INET ||
      net::bind_local(fd, *src) != 0) {
    trace.error = "cannot probe from " + local + " to " + destination;
    return trace;
  }
  for (int ttl = 1; ttl <= max_hops && !trace.reached && trace.error.empty(); ++ttl) {
    ::setsockopt(fd, SOL_IP, IP_TTL, &ttl, sizeof ttl);
    dst->port = uint16_t(kFirstPort + ttl);
    sockaddr_storage to;
    const unsigned to_length = dst->to_sockaddr(&to);
    const char probe[8] = "topocol";
    if (::sendto(fd, probe, sizeof probe, 0, reinterpret_cast<sockaddr*>(&to), to_length) < 0) {
      trace.error = "sending a probe: " + std::string(std::strerror(errno));
      break;
    }
    std::string answer;
    const auto until = std::chrono::steady_clock::now() + per_hop;
    while (answer.empty()) {
      const int ready = net::wait_ready(fd, POLLERR, until);
      if (ready == 0) break;  // no answer within the hop's time
      if (ready < 0) continue;
      int type = 0, code = 0, port = 0;
      std::string from;
      while (read_error(fd, &type, &code, &from, &port)) {
        if (port != kFirstPort + ttl) continue;  // an earlier probe's late answer
        if (type == ICMP_TIME_EXCEEDED) {
          answer = from;
        } else if (type == ICMP_DEST_UNREACH && code == ICMP_PORT_UNREACH) {
          answer = from;
          trace.reached = true;
        } else if (type == ICMP_DEST_UNREACH) {
          answer = from;
          trace.error = "destination unreachable (code " + std::to_string(code) + ") from " + from;
        }
      }
    }
    trace.responders.push_back(answer);
  }
  return trace;
}

}  // namespace topocoll::accept
