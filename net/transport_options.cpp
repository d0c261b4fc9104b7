#include "net/transport_options.h"

#include <algorithm>
#include <string>

#include "config/warnings.h"

namespace topocoll::net {

TransportOptions TransportOptions::normalized() const {
  TransportOptions o = *this;
  o.sockets_per_conn = std::clamp(o.sockets_per_conn, 1, 16);
  o.threads_per_conn = std::clamp(o.threads_per_conn, o.caller_polls ? 0 : 1, o.sockets_per_conn);
  o.timeout_ms = std::max(o.timeout_ms, 1);
  o.stall_timeout_ms = std::max(o.stall_timeout_ms, 0);
  o.accept_idle_timeout_ms = std::max(o.accept_idle_timeout_ms, 0);
  o.idle_poll_ms = std::max(o.idle_poll_ms, 1);
  o.chunk_bytes = std::clamp<size_t>(o.chunk_bytes, 4096, size_t(64) << 20);
  o.min_stripe_bytes = std::clamp<size_t>(o.min_stripe_bytes, 1, o.chunk_bytes);
  o.eager_bytes = std::min<size_t>(o.eager_bytes, size_t(1) << 20);
  return o;
}

TransportOptions TransportOptions::from_env(const config::Env& env) {
  TransportOptions o;
  if (env.net_sockets_per_conn) o.sockets_per_conn = *env.net_sockets_per_conn;
  o.threads_per_conn = env.net_threads.value_or(2);
  o.timeout_ms = env.net_timeout_ms;
  o.accept_idle_timeout_ms = env.net_timeout_ms;
  o.stall_timeout_ms = env.net_stall_timeout_ms.value_or(env.net_timeout_ms);
  o.chunk_bytes = size_t(env.net_chunk_bytes);
  o.min_stripe_bytes = size_t(env.net_min_stripe_bytes);
  o.eager_bytes = size_t(env.net_eager_bytes);
  o.rendezvous = env.net_rendezvous;
  o.lane_marks = env.net_lane_marks;
  const TransportOptions n = o.normalized();
  // Settings that only make sense together: said once, not changed silently.
  if (env.net_threads && n.threads_per_conn < *env.net_threads)
    config::warn_once("TOPOCOLL_NET_THREADS=" + std::to_string(*env.net_threads) + " is more than the " +
                      std::to_string(n.sockets_per_conn) + " sockets per connection: " +
                      std::to_string(n.threads_per_conn) + " threads are used (one socket each at most)");
  if (n.min_stripe_bytes < o.min_stripe_bytes)
    config::warn_once("TOPOCOLL_NET_MIN_STRIPE_BYTES=" + std::to_string(o.min_stripe_bytes) +
                      " is more than the chunk (TOPOCOLL_NET_CHUNK_BYTES, " + std::to_string(n.chunk_bytes) +
                      "): the chunk size is used");
  return n;
}

TransportOptions TransportOptions::for_nccl_net_plugin(const config::Env& env) {
  TransportOptions o = from_env(env);
  o.stall_timeout_ms = env.net_stall_timeout_ms.value_or(0);
  o.accept_idle_timeout_ms = 0;
  o.caller_polls = true;  // NCCL's proxy tests every request until it is done
  // Unset: no progress threads, NCCL's proxy moves every byte (net/connection.h, "the
  // caller's share"; perf/results/net-plugin-caller-moves-every-piece-20261127).
  o.threads_per_conn = env.net_threads.value_or(0);
  // Unset: without progress threads the proxy moves a connection's sockets one after the
  // other, so more sockets only add system calls (and on the build machine lost up to 1.24x
  // at 256 KiB; perf/results/net-plugin-sockets-20261128): one, as NCCL's Socket transport
  // outside cloud NICs, or one per lane mark, whose sockets take different paths.
  if (!env.net_sockets_per_conn && o.threads_per_conn == 0)
    o.sockets_per_conn = std::max<int>(1, int(o.lane_marks.size()));
  // Unset, on one socket: nothing to stripe, and the chunk only cuts the proxy's send and
  // receive calls. 512 KiB, one NCCL Simple step per call, streamed both ways at 0.87-0.90x
  // the Socket design at 512 KiB-1 MiB on the build machine, 2 MiB at par, and ahead from
  // 4 MiB, where unbounded calls let one direction fill its socket while the other drains
  // (perf/results/net-plugin-caller-pass-20261128).
  if (!env.net_chunk_bytes_set && o.sockets_per_conn == 1)
    o.chunk_bytes = kOneSocketChunkBytes;
  return o.normalized();
}

std::string TransportOptions::describe() const {
  std::string marks;
  for (uint32_t m : lane_marks) marks += (marks.empty() ? "" : ",") + std::to_string(m);
  return "sockets=" + std::to_string(sockets_per_conn) + " threads=" + std::to_string(threads_per_conn) +
 " chunk=" + std::to_string(chunk_bytes) +
         " stripe=" + std::to_string(min_stripe_bytes) + " eager=" + std::to_string(eager_bytes) + (rendezvous ? " rendezvous" : "") +
         " timeout_ms=" + std::to_string(timeout_ms) +
         " stall_ms=" + (stall_timeout_ms > 0 ? std::to_string(stall_timeout_ms) : std::string("never")) +
         " accept_idle_ms=" + (accept_idle_timeout_ms > 0 ? std::to_string(accept_idle_timeout_ms) : std::string("never")) +
         (marks.empty() ? "" : " marks=" + marks) + (caller_polls ? " caller_polls" : "");
}

}  // namespace topocoll::net
