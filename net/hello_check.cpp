#include "net/hello_check.h"

#include "net/socket_calls.h"

namespace topocoll::net {
namespace {

constexpr uint64_t kMinHelloChunkBytes = 4096;
constexpr uint64_t kMaxHelloChunkBytes = uint64_t(64) << 20;

}  // namespace

std::string hello_problem(const Hello& h, const Handle& listener) {
  if (h.magic != kHelloMagic)
    return "not a topocoll transport (magic " + hex32(h.magic) + ", expected " + hex32(kHelloMagic) + ")";
  if (h.version != kProtocolVersion)
    return "speaks protocol version " + std::to_string(h.version) + ", this side version " +
           std::to_string(kProtocolVersion);
  if (h.listener_nonce != listener.listener_nonce) return "carries the handle of another listener";
  // Each field on its own, with what was expected: the WARN says which side is misbuilt.
  if (h.sockets != listener.sockets)
    return "says its connection has " + std::to_string(h.sockets) + " sockets, the listener's handle " +
           std::to_string(listener.sockets);
  if (h.socket_index >= h.sockets)
    return "claims socket " + std::to_string(h.socket_index) + " of a connection of " + std::to_string(h.sockets);
  if (h.chunk_bytes < kMinHelloChunkBytes || h.chunk_bytes > kMaxHelloChunkBytes)
    return "stripes in chunks of " + std::to_string(h.chunk_bytes) + " bytes, outside " +
           std::to_string(kMinHelloChunkBytes) + ".." + std::to_string(kMaxHelloChunkBytes);
  if (h.min_stripe_bytes < 1 || h.min_stripe_bytes > h.chunk_bytes)
    return "stripes in pieces of at least " + std::to_string(h.min_stripe_bytes) + " bytes, outside 1..its chunk (" +
           std::to_string(h.chunk_bytes) + ")";
  return {};
}

}  // namespace topocoll::net
