// An IPv4/IPv6 socket address as a value (no sockaddr juggling outside net/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr;

namespace topocoll::net {

struct SocketAddress {
  int family = 0;            // AF_INET or AF_INET6; 0 = unset
  uint8_t bytes[16] = {};    // network byte order; IPv4 uses the first 4
  uint16_t port = 0;         // host byte order
  uint32_t scope_id = 0;     // IPv6 link-local: the interface (from a resolved name only)

  // "127.0.0.2", "::1", "fe80::1%eth0" is not accepted (no scope ids). Port given apart.
  static std::optional<SocketAddress> parse(std::string_view ip, uint16_t port = 0);
  static SocketAddress from_sockaddr(const sockaddr* sa);
  static SocketAddress any_ipv4(uint16_t port = 0);
  static SocketAddress loopback_ipv4(uint16_t port = 0);

  bool is_set() const { return family != 0; }
  std::string ip_string() const;  // "127.0.0.2"
  std::string to_string() const;  // "127.0.0.2:4242", "[::1]:4242"
  // Fills a sockaddr_storage-sized buffer; returns the length to pass to bind/connect.
  unsigned to_sockaddr(void* storage) const;
  bool same_ip(const SocketAddress& other) const;
  bool is_unspecified() const;  // 0.0.0.0 or ::
  bool is_broadcast() const;    // 255.255.255.255

};

}  // namespace topocoll::net
