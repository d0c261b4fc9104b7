// What goes over the sockets (internal to net/). Both ends run the same build of the
// transport's protocol version, so native byte order is used; magic numbers catch
// foreign peers and corrupt streams.
#pragma once

#include <cstdint>

namespace topocoll::net {

inline constexpr uint32_t kHelloMagic = 0x54434831;    // "TCH1"
inline constexpr uint32_t kMessageMagic = 0x54434d31;  // "TCM1"
inline constexpr int kMaxGroupedRecvs = 8;             // NCCL_NET_MAX_RECVS
// The largest message (and posted receive) the transport carries: 64 GiB. A message is laid
// out as one queue item per stripe piece up front, so sizes near 2^64 would overflow the
// piece count (SIZE_MAX looked done at once) or allocate gigabytes of items (2^62).
inline constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 36;

// First bytes on every socket of a connection, connecting side -> listening side. No reply
// is awaited, so connect() never depends on the peer calling accept().
struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t version = 0;
  uint16_t socket_index = 0;  // 0 carries message headers
  uint16_t sockets = 0;       // sockets in this connection
  uint16_t reserved = 0;
  uint32_t min_stripe_bytes = 0;  // sender's smallest piece when a message spreads over lanes
  uint64_t listener_nonce = 0;  // from the handle
  uint64_t connection_id = 0;   // random per connect(), groups the sockets
  uint64_t cookie = 0;          // caller's tag for the connection (RecvComm::peer_cookie)
  uint64_t chunk_bytes = 0;     // sender's striping unit; the receiver mirrors it
};

// Precedes every message on socket 0. Data follows in pieces of the stripe unit
// (net/connection.h); piece i goes over socket i % sockets, so both sides derive the layout
// from the size alone.
struct MessageHeader {
  uint32_t magic = kMessageMagic;
  int32_t tag = 0;
  uint64_t size = 0;
};
static_assert(sizeof(MessageHeader) == 16);

}  // namespace topocoll::net
