// libFuzzer target for the eager channel's frames (exec/eager_channel.h, exec/eager_wire.h):
// what a peer, or a stranger that learned the nonce, writes to a rank's eager port. A real
// channel on loopback reads the input from a scripted peer while it waits for receives and
// clear-to-sends the input's first bytes choose. Every input ends in delivered messages or
// a BackendError; a crash, a sanitizer report, a byte written past a posted receive, any
// other exception, unbounded memory or a hang is a bug.
//
//   byte 0      bit 0: precede the input with a valid hello (else the input is the hello);
//               bits 1-2: the rank that hello claims (1..3; 0 claims this rank itself)
//   byte 1      receives posted from that rank (0..3), then a u16 size for each
//   next byte   clear-to-sends awaited from it (0..3), then a u16 size for each
//   the rest    what the peer writes
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "exec/backend.h"
#include "exec/eager_channel.h"
#include "tests/common/scripted_eager_peer.h"

using namespace topocoll;

namespace {

struct Input {
  const uint8_t* p;
  size_t left;
  uint8_t byte() {
    if (left == 0) return 0;
    --left;
    return *p++;
  }
  uint16_t u16() { return uint16_t(byte() | (byte() << 8)); }
};

constexpr unsigned char kGuard = 0xA5;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const uint8_t flags = in.byte();
  const int claimed = (flags >> 1) & 3;
  std::vector<std::vector<unsigned char>> receives(in.byte() % 4);
  for (auto& r : receives) r.assign(size_t(in.u16() % 8192) + 1, kGuard);  // + the guard byte
  std::vector<uint16_t> awaited(in.byte() % 4);
  for (auto& a : awaited) a = in.u16();

  exec::EagerChannel channel(0, 4, net::SocketAddress::loopback_ipv4(), 0, 1000, [](const std::string&) {});
  std::vector<exec::EagerChannel::Address> peers(4);
  for (int r = 0; r < 4; ++r) peers[r].address = net::SocketAddress::loopback_ipv4(uint16_t(9000 + r));
  channel.set_peers(peers);
  const int from = claimed == 0 ? 1 : claimed;  // a claim of rank 0 is this rank's own: refused
  for (auto& r : receives) channel.post_recv(from, r.data(), r.size() - 1);
  for (size_t i = 0; i < awaited.size(); ++i) channel.expect_clear_to_send(from);

  testing_support::ScriptedEagerPeer peer(channel.local());
  if (!peer.valid()) return 0;
  if (flags & 1) peer.hello(uint32_t(claimed), channel.local().nonce);
  if (in.left > 0) peer.write(in.p, in.left);
  try {
    size_t taken = 0;
    for (int round = 0; round < 64 && !channel.idle(); ++round) {
      bool moved = channel.progress();
      while (taken < awaited.size() && channel.take_clear_to_send(from, awaited[taken])) ++taken, moved = true;
      if (!moved) channel.wait(round < 4 ? 1 : 0);
    }
  } catch (const exec::BackendError&) {
  }
  for (const auto& r : receives)
    if (r.back() != kGuard) __builtin_trap();  // a byte past the posted size
  peer.reset();
  return 0;
}
