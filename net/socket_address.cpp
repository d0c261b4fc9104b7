#include "net/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace topocoll::net {

std::optional<SocketAddress> SocketAddress::parse(std::string_view ip, uint16_t port) {
  std::string text(ip);
  SocketAddress a;
  a.port = port;
  if (::inet_pton(AF_INET, text.c_str(), a.bytes) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (::inet_pton(AF_INET6, text.c_str(), a.bytes) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return std::nullopt;
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa) {
  SocketAddress a;
  if (!sa) return a;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    a.family = AF_INET;
    std::memcpy(a.bytes, &in->sin_addr, 4);
    a.port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.family = AF_INET6;
    std::memcpy(a.bytes, &in6->sin6_addr, 16);
    a.port = ntohs(in6->sin6_port);
    a.scope_id = in6->sin6_scope_id;
  }
  return a;
}

SocketAddress SocketAddress::any_ipv4(uint16_t port) {
  SocketAddress a;
  a.family = AF_INET;
  a.port = port;
  return a;
}

SocketAddress SocketAddress::loopback_ipv4(uint16_t port) {
  SocketAddress a = any_ipv4(port);
  a.bytes[0] = 127;
  a.bytes[3] = 1;
  return a;
}

std::string SocketAddress::ip_string() const {
  char text[INET6_ADDRSTRLEN] = "unset";
  if (family == AF_INET || family == AF_INET6) ::inet_ntop(family, bytes, text, sizeof text);
  return text;
}

std::string SocketAddress::to_string() const {
  if (family == AF_INET6) return "[" + ip_string() + "]:" + std::to_string(port);
  return ip_string() + ":" + std::to_string(port);
}

unsigned SocketAddress::to_sockaddr(void* storage) const {
  std::memset(storage, 0, sizeof(sockaddr_storage));
  if (family == AF_INET) {
    auto* in = static_cast<sockaddr_in*>(storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, bytes, 4);
    return sizeof(sockaddr_in);
  }
  if (family == AF_INET6) {
    auto* in6 = static_cast<sockaddr_in6*>(storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, bytes, 16);
    in6->sin6_scope_id = scope_id;
    return sizeof(sockaddr_in6);
  }
  return 0;
}

bool SocketAddress::same_ip(const SocketAddress& other) const {
  if (family != other.family) return false;
  return std::memcmp(bytes, other.bytes, family == AF_INET ? 4 : 16) == 0;
}

bool SocketAddress::is_unspecified() const {
  const size_t n = family == AF_INET ? 4 : 16;
  for (size_t i = 0; i < n; ++i)
    if (bytes[i] != 0) return false;
  return is_set();
}

bool SocketAddress::is_broadcast() const {
  return family == AF_INET && bytes[0] == 255 && bytes[1] == 255 && bytes[2] == 255 && bytes[3] == 255;
}

}  // namespace topocoll::net
