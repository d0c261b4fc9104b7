// Thin, checked wrappers over the socket system calls used by connect() and the Listener
// (internal to net/). Every wait is bounded by a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/file_descriptor.h"
#include "net/net_status.h"
#include "net/socket_address.h"

namespace topocoll::net {

using Clock = std::chrono::steady_clock;

std::string errno_text(int error_number);
// "0x%08x": how magic numbers and ids appear in error messages.
std::string hex32(uint32_t value);
uint64_t random_u64();
int remaining_ms(Clock::time_point deadline);

// A non-blocking, close-on-exec TCP socket.
NetStatus open_tcp_socket(int family, FileDescriptor* out);
NetStatus set_no_delay(int fd);
SocketAddress local_address_of(int fd);
SocketAddress peer_address_of(int fd);
// Writes all of `size` bytes to a non-blocking socket, waiting for room until the deadline.
NetStatus send_all(int fd, const void* data, size_t size, Clock::time_point deadline,
                   const std::string& what);

}  // namespace topocoll::net
