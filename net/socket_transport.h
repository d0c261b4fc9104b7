// Socket transport: the one TCP data path behind the NCCL net plugin (plugin/net) and the
// host backend's multi-process mode (exec/). Free of NCCL types; the plugin adapts.
//
// Model (NCCL net semantics): a Listener publishes a Handle (fits NCCL's 128-byte opaque
// handle); a peer connect()s with it and gets a one-way SendComm, the listener's accept()
// yields the matching RecvComm. Messages on a comm are matched in posting order; each
// carries a tag and its size (a small header precedes the data, so the receiver learns the
// size first). A connection is several TCP sockets; messages larger than one chunk are
// striped over them and moved by per-connection progress threads, so one connection can
// fill a fast link; a message of one piece is moved by the thread that posts or tests it
// (net/connection.h, "the caller's share"). Requests complete in posting order per comm.
//
// Errors are a NetStatus (code + message naming what went wrong); nothing here throws and
// nothing blocks longer than TransportOptions::timeout_ms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/net_status.h"
#include "net/socket_address.h"
#include "net/transport_options.h"

namespace topocoll::net {

// Wire format of the handle, copied byte-for-byte into NCCL's opaque handle buffer.
inline constexpr uint32_t kHandleMagic = 0x54434e31;  // "TCN1"
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kMaxHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE

struct Handle {
  uint32_t magic = 0;        // kHandleMagic; anything else is a foreign or corrupt handle
  uint16_t version = 0;      // kProtocolVersion of the listening side
  uint16_t family = 0;       // AF_INET or AF_INET6
  uint16_t port = 0;         // host byte order
  uint16_t sockets = 0;      // data sockets per connection the listener expects
  uint32_t reserved = 0;
  uint8_t address[16] = {};  // IPv4 in the first 4 bytes, or IPv6
  uint64_t listener_nonce = 0;  // random per listener: rejects connections to a reused port
  uint64_t user_data = 0;       // opaque to the transport (the plugin stores a topology endpoint)
};
static_assert(sizeof(Handle) <= kMaxHandleBytes, "Handle must fit NCCL's opaque handle");

// Checks magic and version of a handle received from a peer (raw bytes as NCCL passes them).
NetStatus decode_handle(const void* bytes, size_t size, Handle* out);
SocketAddress handle_address(const Handle& handle);

class ConnectAttempt;  // net/connect_attempt.h: connect() for callers that poll
class Request;  // owned by its comm; valid until test() reports done or the comm is closed
class Connection;

class SendComm {
 public:
  ~SendComm();  // stops its progress threads and closes its sockets; pending requests fail
  SendComm(const SendComm&) = delete;
  SendComm& operator=(const SendComm&) = delete;

  // Posts one message. `data` must stay valid until test() reports done. size 0 is allowed.
  NetStatus isend(const void* data, size_t size, int tag, Request** request);
  // done = false while in flight; size = bytes sent. After done (or an error) the request is
  // released. Errors are sticky: once a connection fails every request on it fails.
  NetStatus test(Request* request, bool* done, size_t* size);

  const SocketAddress& local_address() const;  // where the connection leaves from
  const SocketAddress& peer_address() const;

 private:
  friend class ConnectAttempt;
  friend NetStatus connect(const Handle&, const SocketAddress*, const TransportOptions&,
                           uint64_t, std::unique_ptr<SendComm>*);
  explicit SendComm(std::unique_ptr<Connection> c);
  std::unique_ptr<Connection> connection_;
};

class RecvComm {
 public:
  ~RecvComm();
  RecvComm(const RecvComm&) = delete;
  RecvComm& operator=(const RecvComm&) = delete;

  // Posts a group of n receives (NCCL's grouped irecv; n = 1 for a plain receive). The next
  // n messages of the comm fill them, each into the buffer whose tag it carries. A message
  // larger than its buffer, or whose tag was not posted, fails the request (and the comm).
  NetStatus irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                  Request** request);
  NetStatus irecv(void* data, size_t size, int tag, Request** request) {
    return irecv(1, &data, &size, &tag, request);
  }
  // sizes (n entries, may be null) = bytes received per buffer, valid once done.
  NetStatus test(Request* request, bool* done, size_t* sizes);

  const SocketAddress& peer_address() const;  // source address of the connecting side
  uint64_t peer_cookie() const;               // the cookie the connecting side passed

 private:
  friend class Listener;
  explicit RecvComm(std::unique_ptr<Connection> c, uint64_t cookie);
  std::unique_ptr<Connection> connection_;
  uint64_t cookie_ = 0;
};

class Listener {
 public:
  // Binds `bind_address` (port 0 = ephemeral) and listens.
  static NetStatus open(const SocketAddress& bind_address, const TransportOptions& options,
                        std::unique_ptr<Listener>* out, uint64_t user_data = 0);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  const Handle& handle() const { return handle_; }
  const SocketAddress& address() const { return address_; }

  // Completes one incoming connection. Waits at most wait_ms (0 = poll once, NCCL style:
  // *out stays null when no connection is complete yet). Several connections may arrive
  // on one listener; they are returned one per call. Fails with Timeout when no connection
  // completed within options.timeout_ms of the first call that found none. A socket whose
  // hello is foreign, of another version or another listener is closed as a stray.
  NetStatus accept(std::unique_ptr<RecvComm>* out, int wait_ms);
  // Connections closed because their handshake was not ours or never came (a warning
  // through config/warnings.h names each one); they never fail accept().
  uint64_t stray_connections() const;

 private:
  struct State;
  Listener() = default;
  Handle handle_{};
  SocketAddress address_{};
  std::unique_ptr<State> state_;
};

// Connects to a listener. `local_bind` (may be null) picks the local address the sockets
// leave from (plane routing: the NIC of the chosen plane); its port is ignored. `cookie`
// is handed to the accepting side (RecvComm::peer_cookie), e.g. the sender's rank.
// Does not wait for the peer to call accept (so two peers may connect to each other from
// one thread before accepting).
NetStatus connect(const Handle& handle, const SocketAddress* local_bind,
                  const TransportOptions& options, uint64_t cookie,
                  std::unique_ptr<SendComm>* out);

}  // namespace topocoll::net
