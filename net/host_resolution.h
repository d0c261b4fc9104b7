// Host names and address literals to socket addresses (getaddrinfo, any family, TCP), for
// the places that take a name from a user: the bootstrap's root address.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/net_status.h"
#include "net/socket_address.h"

namespace topocoll::net {

// Every address `host` resolves to, in getaddrinfo's order, with `port`. `passive`: for
// listening (an empty host then means every local address). On failure the status message
// is getaddrinfo's own text (gai_strerror), for the caller to put in its words.
NetStatus resolve_host(const std::string& host, uint16_t port, bool passive,
                       std::vector<SocketAddress>* out);

// "<host>:<port>" (a name or an IPv4 literal, resolved; the first address) or
// "[<IPv6>]:<port>" ("%<interface>" inside the brackets for a link-local one), as NCCL
// reads NCCL_COMM_ID (misc/socket.cc ncclSocketGetAddrFromString).
NetStatus resolve_host_port(const std::string& text, SocketAddress* out);

}  // namespace topocoll::net
