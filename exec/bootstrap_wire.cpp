#include "exec/bootstrap_wire.h"

#include <cstring>
#include <stdexcept>
#include <string_view>

#include "config/value_grammar.h"

namespace topocoll::exec::bootstrap_wire {

namespace {
uint64_t read_u64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}
void append_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
}  // namespace

std::string foreign_hello(const Hello& h) {
  if (h.magic != kMagic) return "not a topocoll bootstrap hello";
  if (h.version != kVersion)
    return "bootstrap protocol version " + std::to_string(h.version) + ", this side speaks " +
           std::to_string(kVersion) + " (another topocoll release)";
  return {};
}

std::optional<Frame> take_frame(std::string& inbox) {
  if (inbox.size() < sizeof(uint64_t)) return std::nullopt;
  const uint64_t n = read_u64(inbox, 0);
  if (n == kHeartbeatFrame) {
    // A run of heartbeats is one (erased at once: one erase per 8-byte frame made a stream of
    // them quadratic, a peer holding the root up for minutes).
    size_t run = sizeof n;
    while (inbox.size() >= run + sizeof n && read_u64(inbox, run) == kHeartbeatFrame) run += sizeof n;
    inbox.erase(0, run);
    return Frame{FrameKind::Heartbeat, {}};
  }
  if (n == kGoodbyeFrame) {
    inbox.erase(0, sizeof n);
    return Frame{FrameKind::Goodbye, {}};
  }
  if (n > kMaxBlob)
    throw std::runtime_error("a frame of " + std::to_string(n) + " bytes, more than the " +
                             std::to_string(kMaxBlob) + " a rank may send");
  if (inbox.size() < sizeof n + n) return std::nullopt;
  Frame f{FrameKind::Blob, inbox.substr(sizeof n, n)};
  inbox.erase(0, sizeof n + n);
  return f;
}

std::optional<RootMessage> take_root_message(std::string& inbox) {
  uint32_t status;
  if (inbox.size() < sizeof status) return std::nullopt;
  std::memcpy(&status, inbox.data(), sizeof status);
  if (status == kRootHeartbeat) {  // a run of them is one, as take_frame's
    size_t run = sizeof status;
    for (uint32_t next; inbox.size() >= run + sizeof next; run += sizeof next) {
      std::memcpy(&next, inbox.data() + run, sizeof next);
      if (next != kRootHeartbeat) break;
    }
    inbox.erase(0, run);
    return RootMessage{kRootHeartbeat, {}};
  }
  if (status != kRoundReply && status != kGroupFailed) {
    // What answered, as text where it is text ("HTTP" from a web server).
    const std::string shown = config::quoted_value(std::string_view(inbox).substr(0, 16));
    throw std::runtime_error("what answers at the bootstrap address is not a topocoll bootstrap root: it sent " +
                             shown + " (status " + std::to_string(status) + "; is the address or port right?)");
  }
  if (inbox.size() < sizeof status + sizeof(uint64_t)) return std::nullopt;
  const uint64_t n = read_u64(inbox, sizeof status);
  if (n > kMaxReply)
    throw std::runtime_error("the bootstrap root sent a reply of " + std::to_string(n) + " bytes");
  if (inbox.size() < sizeof status + sizeof n + n) return std::nullopt;
  RootMessage m{RootStatus(status), inbox.substr(sizeof status + sizeof n, n)};
  inbox.erase(0, sizeof status + sizeof n + n);
  return m;
}

std::string blob_frame(const std::string& blob) {
  std::string s;
  append_u64(s, blob.size());
  return s + blob;
}

std::string control_frame(uint64_t kind) {
  std::string s;
  append_u64(s, kind);
  return s;
}

std::string root_message(RootStatus status, const std::string& body) {
  std::string s(reinterpret_cast<const char*>(&status), sizeof status);
  if (status == kRootHeartbeat) return s;
  append_u64(s, body.size());
  return s + body;
}

}  // namespace topocoll::exec::bootstrap_wire
