// What travels over a bootstrap connection (exec/bootstrap.h), and the parsers of it: the
// only bytes the root reads from strangers, so they are fuzzed (tests/fuzz/bootstrap_fuzz.cpp).
//
//   rank -> root: a 16-byte Hello, then frames: u64 length + bytes (a round's blob), or the
//                 length kHeartbeatFrame (alive, every second) or kGoodbyeFrame (leaving).
//   root -> rank: u32 status, then for kRoundReply / kGroupFailed a u64 length + bytes (the
//                 gathered blobs / the reason); kRootHeartbeat has nothing after it.
// Native byte order: both ends run the same build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace topocoll::exec::bootstrap_wire {

inline constexpr uint32_t kMagic = 0x54434231;  // "TCB1"
inline constexpr uint32_t kVersion = 2;          // 2: heartbeats and goodbye frames
inline constexpr uint64_t kMaxBlob = 1 << 20;    // one rank's contribution to a round
inline constexpr uint64_t kMaxReply = kMaxBlob * 1024;
inline constexpr uint64_t kHeartbeatFrame = ~uint64_t(0);
inline constexpr uint64_t kGoodbyeFrame = ~uint64_t(0) - 1;

struct Hello {
  uint32_t magic = kMagic, version = kVersion;
  int32_t rank = -1, nranks = 0;
};
static_assert(sizeof(Hello) == 16);

// A hello from something that is not a topocoll rank of this release: empty when it is one
// of ours (its rank and size are checked against the group separately).
std::string foreign_hello(const Hello& hello);

enum class FrameKind { Blob, Heartbeat, Goodbye };
struct Frame {
  FrameKind kind = FrameKind::Blob;
  std::string blob;
};
// Takes the first complete rank frame off the front of `inbox`; nullopt when more bytes are
// needed. Throws std::runtime_error on a frame longer than kMaxBlob.
std::optional<Frame> take_frame(std::string& inbox);

enum RootStatus : uint32_t { kRoundReply = 0, kGroupFailed = 1, kRootHeartbeat = 2 };
struct RootMessage {
  RootStatus status = kRoundReply;
  std::string body;
};
// The same for the root's messages; throws on an unknown status or an oversized body.
std::optional<RootMessage> take_root_message(std::string& inbox);

// Encoders.
std::string blob_frame(const std::string& blob);
std::string control_frame(uint64_t kind);  // kHeartbeatFrame or kGoodbyeFrame
std::string root_message(RootStatus status, const std::string& body = {});

}  // namespace topocoll::exec::bootstrap_wire
