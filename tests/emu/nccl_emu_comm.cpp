#include "tests/emu/nccl_emu_comm.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "tests/emu/nccl_emu_failure.h"
#include "tests/emu/nccl_emu_net_proxy.h"
#include "tests/emu/nccl_emu_transport.h"

namespace topocoll::emu {
namespace {

// Marks an id made by make_unique_id, so an uninitialized id is refused, not used.
constexpr char kIdMagic[8] = {'t', 'c', 'e', 'm', 'u', 'i', 'd', '1'};

// splitmix64's finalizer: spreads every input bit over the whole output.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ncclUniqueId make_unique_id() {
  static std::atomic<std::uint32_t> counter{0};
  std::random_device random;
  const CommKey key{(std::uint64_t(::getpid()) << 32) | counter.fetch_add(1),
                    (std::uint64_t(random()) << 32) ^ random()};
  ncclUniqueId id{};
  std::memcpy(id.internal, kIdMagic, sizeof kIdMagic);
  std::memcpy(id.internal + 8, &key.hi, 8);
  std::memcpy(id.internal + 16, &key.lo, 8);
  return id;
}

CommKey key_of(const ncclUniqueId& id) {
  if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    throw Failure(ncclInvalidArgument, "the ncclUniqueId was not made by ncclGetUniqueId");
  CommKey key;
  std::memcpy(&key.hi, id.internal + 8, 8);
  std::memcpy(&key.lo, id.internal + 16, 8);
  return key;
}

CommKey child_key(const CommKey& parent, std::uint64_t sequence, std::uint64_t salt) {
  const std::uint64_t seed = mix(parent.hi ^ mix(parent.lo ^ mix(sequence ^ mix(salt))));
  return {mix(seed), mix(seed ^ 0x5bd1e995ull)};
}

std::string describe(const CommKey& key) {
  char text[40];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(key.hi),
                static_cast<unsigned long long>(key.lo));
  return text;
}

std::chrono::milliseconds timeout() {
  const char* text = std::getenv("TOPOCOLL_EMU_TIMEOUT_S");
  double seconds = 60;
  if (text && *text) {
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end && *end == '\0' && value > 0) seconds = value;
    else std::fprintf(stderr, "nccl_emu WARN TOPOCOLL_EMU_TIMEOUT_S=%s is not a positive number; using 60\n", text);
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

bool tracing() {
  const char* text = std::getenv("TOPOCOLL_EMU_TRACE");
  return text && std::strcmp(text, "1") == 0;
}

bool has_remote_ranks(const ncclComm& comm) {
  for (const std::string& address : comm.addresses)
    if (!address.empty()) return true;
  return false;
}

void send_to(const ncclComm& comm, int peer, Channel channel, const void* data,
             std::size_t bytes) {
  const MessageKey key{comm.key, comm.rank, peer, channel};
  const std::string& address = comm.addresses[std::size_t(peer)];
  if (NetProxy* proxy = NetProxy::active(); proxy && !address.empty())
    return proxy->send(address, key, data, bytes);
  send_message(address, key, data, bytes, timeout());
}

void receive_from(const ncclComm& comm, int peer, Channel channel, void* into,
                  std::size_t bytes) {
  const MessageKey key{comm.key, peer, comm.rank, channel};
  const std::chrono::milliseconds limit = timeout();
  if (NetProxy* proxy = NetProxy::active(); proxy && !comm.addresses[std::size_t(peer)].empty())
    return proxy->receive(key, into, bytes, limit);
  const std::string where = "communicator " + describe(comm.key) + " rank " +
                            std::to_string(comm.rank) + "/" + std::to_string(comm.nranks) +
                            ", " + channel_name(channel) + " message from peer " +
                            std::to_string(peer);
  auto message = Mailbox::process().take(key, limit);
  if (!message) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", double(limit.count()) / 1000.0);
    throw Failure(ncclSystemError, std::string("timed out after ") + seconds +
                                       " s (TOPOCOLL_EMU_TIMEOUT_S) waiting for " + where +
                                       " (" + std::to_string(bytes) + " bytes)");
  }
  if (message->size() != bytes)
    throw Failure(ncclInvalidUsage, where + " has " +
                                        std::to_string(message->size()) +
                                        " bytes but the receive posted " +
                                        std::to_string(bytes) + " bytes");
  if (bytes) std::memcpy(into, message->data(), bytes);
}

}  // namespace topocoll::emu
