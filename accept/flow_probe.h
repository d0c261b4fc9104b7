// Measuring the flows of one cable round: every rank runs its part at once, for the same
// window of time — a sender pushes bytes over a few TCP connections (bound to its NIC's
// address, marked for the local switch the flow is pinned to) until the window closes, the
// receiver counts what arrives in the window's last three quarters (TCP's start left out).
// A slow flow so takes no longer than a fast one. A flow that cannot connect, or from which
// nothing arrives, is dead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/file_descriptor.h"

namespace topocoll::accept {

inline constexpr uint32_t kFlowMagic = 0x54434146;  // "TCAF"

// First bytes of every connection of a flow.
struct FlowHeader {
  uint32_t magic = kFlowMagic;
  uint32_t round = 0;
  uint32_t flow = 0;     // index of the flow in its round
  uint16_t stream = 0;
  uint16_t streams = 0;
  uint64_t bytes = 0;    // what this connection carries after the header
  uint64_t run = 0;      // the acceptance run (random, agreed by all ranks): strays are refused
};
static_assert(sizeof(FlowHeader) == 32);

class FlowListener {
 public:
  // Listens on `address` (port chosen by the kernel). Throws std::runtime_error.
  explicit FlowListener(const std::string& address);
  FlowListener(const FlowListener&) = delete;
  FlowListener& operator=(const FlowListener&) = delete;
  int port() const { return port_; }
  int fd() const { return socket_.get(); }

 private:
  net::FileDescriptor socket_;
  int port_ = 0;
};

struct FlowTask {
  uint32_t flow = 0;
  bool sending = false;
  std::string local_address;           // bind here (the rank's NIC)
  std::string peer_address;            // sending: the receiver's listener
  int peer_port = 0;
  int64_t bytes = 0;                   // at most this much (a cap; the window decides)
  int streams = 1;
  uint32_t mark = 0;                   // SO_MARK for every connection (0: none)
  double expected_gbps = 0;            // sizes the send buffers (0: the kernel's default)
};

struct FlowOutcome {
  uint32_t flow = 0;
  bool sending = false;
  int64_t bytes = 0;      // sent, or received
  bool complete = false;  // the connections ran the whole window (sender) / closed cleanly
  double rate_gbps = 0;   // receiver: payload rate over the window's last three quarters
  double connect_us = -1; // sender: the first connection's set-up time (one round trip)
  std::string error;      // sender: why it could not connect or send; receiver: what is missing
  // Sender: it failed on its own host before a packet left (socket mark, bind): no cable is
  // to blame.
  bool local_error = false;
};

// Runs this rank's tasks of round `round`: senders send from now until `window_end`;
// receivers measure until then and close what is still open shortly after.
std::vector<FlowOutcome> run_flow_round(FlowListener& listener, uint32_t round, uint64_t run,
                                        const std::vector<FlowTask>& tasks,
                                        std::chrono::steady_clock::time_point window_end);

}  // namespace topocoll::accept
