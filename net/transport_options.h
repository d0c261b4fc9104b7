// Tuning of the socket transport. from_environment() is the one place that reads the
// TOPOCOLL_NET_* variables (docs/net-plugin.md lists them); callers log the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace topocoll::net {

struct TransportOptions {
  int sockets_per_conn = 4;         // TOPOCOLL_NET_SOCKETS_PER_CONN (1..16)
  int threads_per_conn = 2;         // TOPOCOLL_NET_THREADS (1..sockets_per_conn)
  int timeout_ms = 60000;           // TOPOCOLL_NET_TIMEOUT_MS: connect/accept/handshake
  size_t chunk_bytes = 512 * 1024;  // TOPOCOLL_NET_CHUNK_BYTES: striping unit
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

  // Clamps threads to [1, sockets] and everything to its valid range.
  TransportOptions normalized() const;
  // Defaults overridden by the environment; a bad value is left at its default and a
  // warning naming the variable is appended to *warnings (when not null).
  static TransportOptions from_environment(std::vector<std::string>* warnings = nullptr);
  std::string describe() const;  // "sockets=4 threads=2 chunk=524288 timeout_ms=60000"
};

// Reads one integer variable (an optional K or M suffix scales it by 1024 or 1024^2) into
// *value; unset leaves it; a bad or out-of-range value keeps it and appends a warning naming
// the variable and the range to *warnings (when not null).
void read_env_integer(const char* env, long long min, long long max, long long* value,
                      std::vector<std::string>* warnings);

}  // namespace topocoll::net
