// A connect() that never blocks, for callers that poll (NCCL's net plugin: connect is called
// again until it returns a comm). start() opens the connection's sockets with non-blocking
// connects; each advance() moves them on without waiting: a connect refused or unreachable
// for now is retried until options.timeout_ms (TOPOCOLL_NET_TIMEOUT_MS, 60 s, about what
// NCCL's Socket transport's 34 retries take), each socket sends its hello once connected,
// and the SendComm is handed out when every hello is sent. Past the timeout the attempt
// fails with Timeout naming the peer and the last error met.
#pragma once

#include <memory>
#include <vector>

#include "net/file_descriptor.h"
#include "net/socket_calls.h"
#include "net/socket_transport.h"
#include "net/wire_format.h"

namespace topocoll::net {

class ConnectAttempt {
 public:
  static NetStatus start(const Handle& handle, const SocketAddress* local_bind,
                         const TransportOptions& options, uint64_t cookie,
                         std::unique_ptr<ConnectAttempt>* out);
  // *out stays null while the attempt is under way; an error ends the attempt.
  NetStatus advance(std::unique_ptr<SendComm>* out);

 private:
  struct Lane {
    FileDescriptor socket;
    bool connected = false;
    size_t hello_sent = 0;
    Clock::time_point retry_at{};  // after a connect refused or unreachable for now
    int tries = 0;                 // connects that failed so, for the retry's delay
  };
  ConnectAttempt() = default;
  NetStatus open_lane(size_t i);
  // A lane whose connect failed with `err`: closed for a later try while the deadline allows
  // (true), else the attempt's error.
  bool retry_later(Lane& lane, int err, Clock::time_point now);
  // The attempt's end at its deadline, naming the error its retries kept meeting (0: none).
  NetStatus timed_out(int err) const;

  TransportOptions options_;
  SocketAddress peer_, local_bind_;
  Hello hello_{};
  std::vector<Lane> lanes_;
  Clock::time_point deadline_;
  int last_error_ = 0;  // the last retried connect's error, for the timeout's message
};

}  // namespace topocoll::net
