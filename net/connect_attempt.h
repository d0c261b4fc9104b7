// A connect() that never blocks, for callers that poll (NCCL's net plugin: connect is called
// again until it returns a comm). start() opens the connection's sockets with non-blocking
// connects; each advance() moves them on without waiting: a refused connect is retried
// briefly (a listener's backlog may be momentarily full), each socket sends its hello once
// connected, and the SendComm is handed out when every hello is sent. Past
// options.timeout_ms the attempt fails with Timeout naming the peer.
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
    Clock::time_point retry_at{};  // after a refused connect
  };
  ConnectAttempt() = default;
  NetStatus open_lane(size_t i);

  TransportOptions options_;
  SocketAddress peer_, local_bind_;
  Hello hello_{};
  std::vector<Lane> lanes_;
  Clock::time_point deadline_, refused_until_;
};

}  // namespace topocoll::net
