#include "tests/emu/nccl_emu_mailbox.h"

#include <utility>

namespace topocoll::emu {

const char* channel_name(Channel channel) {
  switch (channel) {
    case Channel::User: return "user send/recv";
    case Channel::Collective: return "collective";
    case Channel::NetSetup: return "net setup";
    case Channel::NetHandle: return "net handle";
  }
  return "unknown channel";
}

Mailbox& Mailbox::process() {
  // Never destroyed: the receiver thread is still running while static destructors run.
  static Mailbox* const mailbox = new Mailbox;
  return *mailbox;
}

void Mailbox::deliver(const MessageKey& key, std::vector<std::byte> bytes) {
  {
    std::lock_guard lock(mutex_);
    waiting_[key].push_back(std::move(bytes));
  }
  arrived_.notify_all();
}

std::optional<std::vector<std::byte>> Mailbox::take(const MessageKey& key,
                                                    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto has_message = [&] {
    auto it = waiting_.find(key);
    return it != waiting_.end() && !it->second.empty();
  };
  if (!arrived_.wait_for(lock, timeout, has_message)) return std::nullopt;
  auto it = waiting_.find(key);
  std::vector<std::byte> bytes = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) waiting_.erase(it);
  return bytes;
}

void Mailbox::discard(const CommKey& comm, int rank) {
  std::lock_guard lock(mutex_);
  std::erase_if(waiting_, [&](const auto& entry) {
    return entry.first.comm == comm && entry.first.destination == rank;
  });
}

}  // namespace topocoll::emu
