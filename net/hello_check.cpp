#include "net/hello_check.h"

#include "net/socket_calls.h"

namespace topocoll::net {

std::string hello_problem(const Hello& h, const Handle& listener) {
  if (h.magic != kHelloMagic)
    return "not a topocoll transport (magic " + hex32(h.magic) + ", expected " + hex32(kHelloMagic) + ")";
  if (h.version != kProtocolVersion)
    return "speaks protocol version " + std::to_string(h.version) + ", this side version " +
           std::to_string(kProtocolVersion);
  if (h.listener_nonce != listener.listener_nonce) return "carries the handle of another listener";
  if (h.sockets != listener.sockets || h.socket_index >= h.sockets || h.chunk_bytes < 4096 ||
      h.chunk_bytes > (uint64_t(64) << 20) || h.min_stripe_bytes < 1 || h.min_stripe_bytes > h.chunk_bytes)
    return "inconsistent handshake (socket " + std::to_string(h.socket_index) + " of " +
           std::to_string(h.sockets) + ", chunk " + std::to_string(h.chunk_bytes) + ", stripe " +
           std::to_string(h.min_stripe_bytes) + ")";
  return {};
}

}  // namespace topocoll::net
