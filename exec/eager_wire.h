// What travels over an eager connection (exec/eager_channel.h): the bytes a peer, or a
// stranger, writes to a rank's eager port (fuzzed: tests/fuzz/eager_fuzz.cpp).
//
//   hello, once:  u32 magic "TCE1", u32 version, u32 the sender's rank, u32 0,
//                 u64 the nonce of the listener it connects to (learned through the bootstrap)
//   then frames:  u32 magic, u32 size
//                 "TCM1" followed by `size` payload bytes: one message, of exactly the size
//                        the receiver posted
//                 "TCC1" alone: clear-to-send, the receiver posted a large receive of `size`
//                        bytes from the sender (sizes above 4 GiB are sent as 2^32 - 1)
// Native byte order: both ends run the same build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace topocoll::exec::eager_wire {

inline constexpr uint32_t kHelloMagic = 0x54434531;        // "TCE1"
inline constexpr uint32_t kMessageMagic = 0x54434d31;      // "TCM1"
inline constexpr uint32_t kClearToSendMagic = 0x54434331;  // "TCC1"
inline constexpr uint32_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 8;
inline constexpr std::size_t kHelloBytes = 24;

struct Hello {
  uint32_t magic = kHelloMagic, version = kVersion, rank = 0, reserved = 0;
  uint64_t nonce = 0;
};
static_assert(sizeof(Hello) == kHelloBytes);

struct Header {
  uint32_t magic = kMessageMagic, size = 0;
};
static_assert(sizeof(Header) == kHeaderBytes);

inline Hello read_hello(const unsigned char* bytes) {
  Hello h;
  std::memcpy(&h, bytes, sizeof h);
  return h;
}

}  // namespace topocoll::exec::eager_wire
