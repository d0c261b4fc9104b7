// Tuning of the socket transport: defaults, or the TOPOCOLL_NET_* values of an Env
// (config/env.h validated them; docs/net-plugin.md lists them). Callers log the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/env.h"

namespace topocoll::net {

struct TransportOptions {
  // TOPOCOLL_NET_SOCKETS_PER_CONN (1..16). Unset: 4, but in the net plugin without progress
  // threads 1 (one per lane mark with marks): for_nccl_net_plugin.
  int sockets_per_conn = 4;
  // TOPOCOLL_NET_THREADS (0..sockets_per_conn): progress threads per connection. 0 (only
  // where the caller polls, the net plugin's default): none, the caller moves every byte, as
  // NCCL's own Socket transport does outside cloud NICs; threads help where one core cannot
  // fill the link, and a caller that sleeps (the host backend) needs at least one.
  int threads_per_conn = 2;
  int timeout_ms = 60000;           // TOPOCOLL_NET_TIMEOUT_MS: connect/accept/handshake
  // An accept that finds no connection arriving at all for this long fails; 0 = never.
  // timeout_ms for topocoll's own engine; never in the net plugin (for_nccl_net_plugin).
  int accept_idle_timeout_ms = 60000;
  // TOPOCOLL_NET_STALL_TIMEOUT_MS: a message in flight that moves no byte for this long fails
  // its request (a peer that accepts but never reads, one stopped mid-message); 0 = never.
  int stall_timeout_ms = 60000;
  size_t chunk_bytes = 512 * 1024;  // TOPOCOLL_NET_CHUNK_BYTES: striping unit
  // The net plugin's chunk on a one-socket connection when the setting is unset
  // (for_nccl_net_plugin): the most one send or receive call moves.
  static constexpr size_t kOneSocketChunkBytes = size_t(2) << 20;
  // TOPOCOLL_NET_MIN_STRIPE_BYTES: a message smaller than chunk x sockets spreads evenly
  // over the sockets in pieces of at least this many bytes (1 = always over every socket).
  size_t min_stripe_bytes = 64 * 1024;
  // TOPOCOLL_NET_EAGER_BYTES (0..1 MiB; host backend only): messages up to this size take
  // the caller-driven eager channel (exec/eager_channel.h) instead of a striped connection
  // (those above 64 KiB after the receiver's clear-to-send, as connection ones). 0 = never.
  size_t eager_bytes = 1024 * 1024;
  // TOPOCOLL_NET_RENDEZVOUS (0|1; host backend only): a larger message starts only when the
  // receiver's clear-to-send says it posted the receive (exec/eager_channel.h).
  bool rendezvous = true;
  // TOPOCOLL_NET_LANE_MARKS ("256,257,..."): socket i of a connection carries SO_MARK
  // marks[i % n], so policy routing can send each lane on its own path (multi-rail hosts,
  // the emulated fabric's NAP striping). Needs CAP_NET_ADMIN. Empty: no marks.
  std::vector<uint32_t> lane_marks;
  // The caller keeps testing the oldest unfinished request of each connection until it is
  // done, as NCCL's proxy thread does for every sub-operation (the net plugin): each test
  // then moves every socket's front as far as the socket takes it, and the progress threads
  // leave lane 0's one-piece messages and headers to it (net/connection.h), neither woken
  // for them nor woken by their arrival; they finish what the caller could not. Off for
  // callers that sleep until a request completes (the host backend).
  bool caller_polls = false;
  // A progress thread with nothing to do re-checks its sockets at least this often, a
  // safety net behind the explicit wake-ups (tests make it long, so a missing wake-up hangs).
  int idle_poll_ms = 1000;

  // Clamps threads to [1, sockets] ([0, sockets] when the caller polls) and everything to
  // its valid range.
  TransportOptions normalized() const;
  // The TOPOCOLL_NET_* values of `env`, normalized, for topocoll's own engine (bench,
  // accept): an unset stall timeout is timeout_ms, since its bootstrap bounds rank skew
  // (docs/reliability.md).
  static TransportOptions from_env(const config::Env& env);
  // The same for NCCL's net plugin, where an unset stall timeout is never and an accept
  // waits for its connection however long it takes: NCCL's own transports wait for a late
  // receiver (a rank writing a checkpoint while the others wait in the next allreduce) and
  // for a late peer's connect (NCCL connects lazily, at a pair's first collective, which a
  // rank reaches late when it waits for another rank first: net_socket.cc's accept has no
  // deadline), and the framework's watchdog (PyTorch's process-group timeout) is what ends
  // a job whose peer hung. A connection that began arriving still has timeout_ms to finish.
  static TransportOptions for_nccl_net_plugin(const config::Env& env);
  std::string describe() const;  // "sockets=4 threads=2 ... timeout_ms=60000 stall_ms=never accept_idle_ms=never caller_polls"
};

}  // namespace topocoll::net
