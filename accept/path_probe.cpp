#include "accept/path_probe.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    trace.error = std::string("socket: ") + std::strerror(errno);
    return trace;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_IP, IP_RECVERR, &one, sizeof one);
  if (mark) ::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark);
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  if (::inet_pton(AF_INET, local.c_str(), &src.sin_addr) != 1 ||
      ::inet_pton(AF_INET, destination.c_str(), &dst.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    trace.error = "cannot probe from " + local + " to " + destination;
    ::close(fd);
    return trace;
  }
  for (int ttl = 1; ttl <= max_hops && !trace.reached && trace.error.empty(); ++ttl) {
    ::setsockopt(fd, SOL_IP, IP_TTL, &ttl, sizeof ttl);
    dst.sin_port = htons(uint16_t(kFirstPort + ttl));
    const char probe[8] = "topocol";
    if (::sendto(fd, probe, sizeof probe, 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) < 0) {
      trace.error = "sending a probe: " + std::string(std::strerror(errno));
      break;
    }
    std::string answer;
    const auto until = std::chrono::steady_clock::now() + per_hop;
    while (answer.empty()) {
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
      if (left <= 0) break;
      pollfd p{fd, POLLERR, 0};
      if (::poll(&p, 1, left) <= 0) continue;
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
  ::close(fd);
  return trace;
}

}  // namespace topocoll::accept
