// Test fixture: one SendComm/RecvComm pair over loopback, and data patterns to check.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/socket_transport.h"

namespace topocoll::net::testing {

struct TransportPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

inline TransportOptions fast_options(int sockets = 3, int threads = 2) {
  TransportOptions o;
  o.sockets_per_conn = sockets;
  o.threads_per_conn = threads;
  o.chunk_bytes = 64 * 1024;
  o.timeout_ms = 30000;
  return o;
}

inline TransportPair make_pair(const TransportOptions& options,
                               const SocketAddress* local_bind = nullptr, uint64_t cookie = 7) {
  TransportPair p;
  NetStatus s = Listener::open(SocketAddress::loopback_ipv4(), options, &p.listener);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok()) return p;
  s = connect(p.listener->handle(), local_bind, options, cookie, &p.send);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok()) return p;
  s = p.listener->accept(&p.recv, options.timeout_ms);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_NE(p.recv, nullptr);
  return p;
}

inline std::vector<uint8_t> pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> v(size);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
  return v;
}

// Polls test() until done or an error; fails the test after a generous deadline.
template <typename Comm>
NetStatus wait_request(Comm& comm, Request* r, size_t* sizes, int seconds = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (;;) {
    bool done = false;
    NetStatus s = comm.test(r, &done, sizes);
    if (!s.ok() || done) return s;
    if (std::chrono::steady_clock::now() > deadline)
      return NetStatus::error(NetCode::Timeout, "test harness: request did not complete");
    std::this_thread::yield();
  }
}

// The bytes of a request expected done at its very first test() (`what` names the call that
// should have moved them); if it is not, the failure is recorded and the request waited for,
// so the test goes on to check the data.
template <typename Comm>
size_t bytes_done_at_first_test(Comm& comm, Request* r, const std::string& what, int seconds = 60) {
  bool done = false;
  size_t bytes = 0;
  const NetStatus s = comm.test(r, &done, &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(done) << what;
  if (s.ok() && !done) {
    const NetStatus w = wait_request(comm, r, &bytes, seconds);
    EXPECT_TRUE(w.ok()) << w.message;
  }
  return bytes;
}

// Tests two requests in turn until both are done or one fails (each status set when it ends).
template <typename A, typename B>
void wait_both(A& a, Request* ra, size_t* sizes_a, NetStatus* status_a, B& b, Request* rb, size_t* sizes_b,
               NetStatus* status_b, int seconds = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool done_a = false, done_b = false;
  while (!done_a || !done_b) {
    if (!done_a) {
      *status_a = a.test(ra, &done_a, sizes_a);
      if (!status_a->ok()) done_a = true;
    }
    if (!done_b) {
      *status_b = b.test(rb, &done_b, sizes_b);
      if (!status_b->ok()) done_b = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      if (!done_a) *status_a = NetStatus::error(NetCode::Timeout, "test harness: request did not complete");
      if (!done_b) *status_b = NetStatus::error(NetCode::Timeout, "test harness: request did not complete");
      return;
    }
    std::this_thread::yield();
  }
}

}  // namespace topocoll::net::testing
