// libFuzzer target for the data-connection handshake (net/hello_check.h): the first bytes any
// client sends to a rank's data port. Every input is either a hello of the listener's
// connections or a named problem; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "net/hello_check.h"

using namespace topocoll::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Handle listener;
  listener.magic = kHandleMagic;
  listener.version = kProtocolVersion;
  listener.sockets = 4;
  listener.listener_nonce = 0x1234567890abcdefull;
  Hello hello;
  std::memcpy(&hello, data, std::min(size, sizeof hello));
  const std::string problem = hello_problem(hello, listener);
  // A hello that passes must describe a connection the listener can assemble.
  if (problem.empty() && (hello.socket_index >= listener.sockets || hello.chunk_bytes < 4096 ||
                          hello.min_stripe_bytes == 0 || hello.min_stripe_bytes > hello.chunk_bytes))
    __builtin_trap();
  return 0;
}
