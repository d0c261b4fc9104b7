// The per-process mailbox of the NCCL emulation: every message addressed to a rank living in
// this process lands here, whether it came over a socket or from a rank of this process.
// Sends are eager (the bytes are copied at send time), so a send never waits for its
// receiver; a receive waits here for the oldest message under its key.
#pragma once

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace topocoll::emu {

// A communicator's identity, the same in every process that holds one of its ranks.
struct CommKey {
  std::uint64_t hi = 0, lo = 0;
  auto operator<=>(const CommKey&) const = default;
};

// User point-to-point traffic and the traffic a collective makes for itself are kept apart,
// so a user's ncclRecv can never consume a collective's message or the reverse. NetSetup and
// NetHandle carry the net plugin's connection setup (nccl_emu_net_proxy.h), never data.
enum class Channel : std::int32_t { User = 0, Collective = 1, NetSetup = 2, NetHandle = 3 };
const char* channel_name(Channel channel);

struct MessageKey {
  CommKey comm;
  std::int32_t source = 0;
  std::int32_t destination = 0;
  Channel channel = Channel::User;
  auto operator<=>(const MessageKey&) const = default;
};

class Mailbox {
 public:
  // The process's one mailbox; it lives until the process exits (the receiver thread may
  // deliver into it at any time).
  static Mailbox& process();

  void deliver(const MessageKey& key, std::vector<std::byte> bytes);
  // The oldest message under `key` (messages between two ranks on one channel are FIFO, as
  // NCCL matches them), or nothing after `timeout`.
  std::optional<std::vector<std::byte>> take(const MessageKey& key,
                                             std::chrono::milliseconds timeout);
  // Drops what is still waiting for `rank` of `comm` (the communicator is being destroyed).
  void discard(const CommKey& comm, int rank);

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<MessageKey, std::deque<std::vector<std::byte>>> waiting_;
};

}  // namespace topocoll::emu
