#include "net/host_resolution.h"

#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <memory>

namespace topocoll::net {

NetStatus resolve_host(const std::string& host, uint16_t port, bool passive,
                       std::vector<SocketAddress>* out) {
  out->clear();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) return NetStatus::error(NetCode::ConnectFailed, gai_strerror(rc));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(list, &::freeaddrinfo);
  for (const addrinfo* a = list; a; a = a->ai_next) {
    const SocketAddress address = SocketAddress::from_sockaddr(a->ai_addr);
    if (address.is_set()) out->push_back(address);
  }
  return {};
}

namespace {
NetStatus bad(const std::string& text, const std::string& why) {
  return NetStatus::error(NetCode::InvalidArgument, "\"" + text + "\" " + why);
}
// The port after `at` (":<digits>"), 0 when nothing follows.
bool port_after(const std::string& text, std::size_t at, uint16_t* port) {
  *port = 0;
  if (at >= text.size()) return true;
  if (text[at] != ':' || at + 1 == text.size()) return false;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data() + at + 1, end, *port);
  return error == std::errc() && stop == end;
}
}  // namespace

NetStatus resolve_host_port(const std::string& text, SocketAddress* out) {
  uint16_t port = 0;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos) return bad(text, "has no ']' closing its IPv6 address");
    std::string ip = text.substr(1, close - 1);
    uint32_t scope = 0;
    if (const std::size_t percent = ip.find('%'); percent != std::string::npos) {
      const std::string interface = ip.substr(percent + 1);
      scope = ::if_nametoindex(interface.c_str());
      if (scope == 0) return bad(text, "names interface " + interface + ", which this host does not have");
      ip.resize(percent);
    }
    if (!port_after(text, close + 1, &port)) return bad(text, "has no port after its ']' (\":<port>\")");
    auto address = SocketAddress::parse(ip, port);
    if (!address || address->family != AF_INET6) return bad(text, "does not hold an IPv6 address in its brackets");
    address->scope_id = scope;
    *out = *address;
    return {};
  }
  const std::size_t colon = text.find(':');
  const std::string host = text.substr(0, colon);
  if (host.empty()) return bad(text, "names no host");
  if (colon != std::string::npos && !port_after(text, colon, &port))
    return bad(text, "is not <host>:<port> (an IPv6 address goes in brackets: [addr]:port)");
  std::vector<SocketAddress> found;
  if (NetStatus s = resolve_host(host, port, false, &found); !s.ok() || found.empty())
    return bad(text, "does not resolve: " + (s.ok() ? std::string("no address") : s.message));
  *out = found.front();
  return {};
}

}  // namespace topocoll::net
