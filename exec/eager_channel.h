// Eager channel: the host backend's small messages, moved by the calling thread itself.
//
// Why: through net::Connection a message crosses three threads (the poster hands it to a
// progress thread, the peer's progress thread reads it, then wakes the waiting caller).
// On a loaded machine every hand-off is a scheduler wake-up of tens of microseconds, and a
// latency-bound step (1 KiB allreduce: six HD steps) pays them all. A message of at most
// `eager_bytes` instead goes over one TCP socket per ordered pair of ranks (TCP_NODELAY):
// the poster writes header and payload with one sendmsg, the waiting caller reads them
// with one readv. No thread hand-off; the eager protocol of MPI's TCP transports.
//
// Matching needs no tags: HostTransport's contract is that a receive is posted with
// exactly the sender's size, so sender and receiver pick the channel by size alone, and
// the messages of one (src, dst) pair keep posting order within each channel. A header
// (magic, size) still travels with every message so a broken contract is an error naming
// both sizes, never silently misplaced bytes.
//
// Clear-to-send: the same sockets carry the rendezvous of the large messages that go over
// striped connections (exec/socket_host_transport.h). A receiver announces each large
// receive it posts with a CTS naming its size; the sender starts the transfer only when the
// CTS arrives, i.e. when the receiver has entered that step. Without it a rank that finished
// a step early pushes the next step's bytes into a peer still receiving the previous step,
// two flows share the peer's access link, and the contention-free schedule is not.
//
// Sockets: the sender connects (non-blocking, bound to the rank's own address so policy
// routing sees the NIC's source) to the receiver's eager listener and opens with a hello
// (magic, version, rank, the listener's nonce). The receiver accepts inside wait_all; a
// connection whose hello is wrong, or that says nothing within a few seconds, is closed
// and counted (one warning with its address) while the rank keeps serving its real peers.
//
// What a connection that knows the nonce (docs/reliability.md, threat model) cannot do:
// grow this rank's memory (clear-to-sends no send awaits yet are capped, beyond the cap a
// protocol error), hold off the no-progress timeout with them (they are not progress), or
// take a connected rank's place (a second connection claiming a rank is an error naming
// both addresses). Every error on a connection names the rank it claimed and its address.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "net/file_descriptor.h"
#include "net/socket_address.h"

namespace topocoll::exec {

class EagerChannel {
 public:
  // Where peers find this rank's eager listener: travels through the bootstrap.
  struct Address {
    net::SocketAddress address;
    uint64_t nonce = 0;
  };
  using WarningSink = std::function<void(const std::string&)>;

  // Listens on `bind` (port 0 = ephemeral). `mark` != 0 tags outgoing sockets (SO_MARK).
  // Throws BackendError naming what failed.
  EagerChannel(int rank, int nranks, const net::SocketAddress& bind, uint32_t mark,
               int timeout_ms, WarningSink warn = {});
  ~EagerChannel();

  const Address& local() const { return local_; }
  void set_peers(std::vector<Address> peers);

  void post_send(int peer, const void* src, std::size_t bytes);
  void post_recv(int peer, void* dst, std::size_t bytes);
  // Rendezvous: tells `peer` this rank has posted a large receive of `bytes` from it.
  void post_clear_to_send(int peer, std::size_t bytes);
  // The sender's side: one more CTS is awaited from `peer`; take_clear_to_send() is true
  // (and consumes it) once the next CTS from `peer` arrived. Throws when its size differs.
  void expect_clear_to_send(int peer);
  bool take_clear_to_send(int peer, std::size_t bytes);
  bool idle() const { return pending_ == 0 && awaited_cts_ == 0; }
  // Moves every byte it can without blocking; true when anything moved or completed.
  // Throws BackendError naming the peer on a closed socket or a size mismatch.
  bool progress();
  // Blocks in poll() on what waits (readable receives, writable sends, the listener) and on
  // `also_fd` (>= 0: e.g. the completion signal's eventfd) for at most timeout_ms.
  void wait(int timeout_ms, int also_fd = -1);
  // "send to rank 3 (1024 bytes)" for each message still pending, for timeout errors.
  std::vector<std::string> describe_pending() const;
  int rejected_connections() const { return rejected_; }

 private:
  struct Message {
    char* data = nullptr;
    std::size_t bytes = 0;
    std::size_t done = 0;  // bytes of header + payload moved
    uint32_t header[2] = {};  // magic, payload bytes (send side; CTS: the announced size)
  };
  struct SendLink {
    net::FileDescriptor socket;
    unsigned char hello[24] = {};
    std::size_t hello_left = 0;  // hello bytes still to write before the first message
    std::deque<Message> queue;
  };
  struct RecvLink {
    net::FileDescriptor socket;
    net::SocketAddress from;  // where the connection claiming this rank came from
    std::deque<Message> queue;
    uint32_t header[2] = {};  // the next message's header, read before its payload
    std::size_t header_got = 0;
    std::size_t payload_done = 0;
    std::deque<uint32_t> clear_to_send;  // CTS sizes arrived, not taken yet
    int awaited_cts = 0;
  };
  struct Stranger {  // accepted, hello not read yet
    net::FileDescriptor socket;
    net::SocketAddress from;
    std::size_t got = 0;
    unsigned char hello[24] = {};
    int64_t deadline_ms = 0;
  };

  void open_send_link(int peer);
  void activate(int peer);
  bool write_link(int peer);
  bool read_link(int peer);
  bool wants_read(int peer) const;
  void accept_strangers();
  bool read_hellos();
  void reject(Stranger& s, const std::string& why);
  [[noreturn]] void fail(bool send, int peer, const Message& m, const std::string& why) const;
  // "rank 3 at 10.0.0.3:40000" (the listener this rank sends to) and "rank 3 (eager
  // connection from 10.0.0.3:51234)" (the connection that claimed rank 3).
  std::string sending_to(int peer) const;
  std::string received_from(int peer) const;

  const int rank_, nranks_;
  const uint32_t mark_;
  const int timeout_ms_;
  WarningSink warn_;
  net::SocketAddress bind_;
  net::FileDescriptor listener_;
  Address local_;
  std::vector<Address> peers_;
  std::vector<SendLink> send_;
  std::vector<RecvLink> recv_;
  std::vector<Stranger> strangers_;
  std::vector<pollfd> fds_;
  std::vector<int> active_;                // peers with queued messages
  std::vector<unsigned char> active_flag_;  // per peer: in active_
  std::size_t pending_ = 0;
  int awaited_cts_ = 0;
  int rejected_ = 0;
};

}  // namespace topocoll::exec
