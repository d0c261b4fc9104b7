// libFuzzer target for the bootstrap wire (exec/bootstrap_wire.h): the bytes a stranger or a
// broken rank can send to the root, and the root's messages as a rank reads them. Any input
// is parsed frame by frame or rejected with std::runtime_error; a crash, a sanitizer report,
// unbounded memory or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "exec/bootstrap_wire.h"

using namespace topocoll::exec::bootstrap_wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size >= sizeof(Hello)) {
    Hello h;
    std::memcpy(&h, data, sizeof h);
    foreign_hello(h);
  }
  std::string inbox = bytes;
  try {
    while (auto frame = take_frame(inbox))
      if (frame->blob.size() > kMaxBlob) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  inbox = bytes;
  try {
    while (auto message = take_root_message(inbox))
      if (message->body.size() > kMaxReply) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  // What is encoded parses back to itself.
  std::string round_trip = blob_frame(bytes.substr(0, 4096)) + control_frame(kHeartbeatFrame);
  auto frame = take_frame(round_trip);
  if (!frame || frame->blob != bytes.substr(0, 4096)) __builtin_trap();
  return 0;
}
