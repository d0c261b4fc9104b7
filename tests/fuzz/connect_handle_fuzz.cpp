// libFuzzer target for the net plugin's connect handle (net::decode_handle): the 128 opaque
// bytes NCCL hands to connect(), which came from a peer. Decoding either accepts a handle
// with a usable address or names what is wrong.
#include <cstddef>
#include <cstdint>

#include "net/socket_transport.h"

using namespace topocoll::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Handle h;
  const NetStatus s = decode_handle(data, size, &h);
  if (s.ok()) {
    const SocketAddress a = handle_address(h);
    if (!a.is_set() || a.port == 0 || h.sockets == 0 || h.sockets > 16) __builtin_trap();
    a.to_string();
  } else if (s.message.empty()) {
    __builtin_trap();
  }
  return 0;
}
