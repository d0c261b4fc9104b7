// Data path of the socket transport: sizes, striping, tags, grouped receives, ordering,
// and the errors a receive can hit (truncation, unknown tag, peer gone).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include "net/socket_transport.h"
#include "tests/net/transport_pair.h"

namespace topocoll::net::testing {
namespace {

// sockets, threads, and whether the caller polls (TransportOptions::caller_polls).
class TransportSizes : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(TransportSizes, EverySizeArrivesIntactWithItsSize) {
  auto [sockets, threads, caller_polls] = GetParam();
  TransportOptions options = fast_options(sockets, threads);
  options.caller_polls = caller_polls;
  auto p = make_pair(options);
  ASSERT_TRUE(p.recv);
  const size_t chunk = 64 * 1024;
  const std::vector<size_t> sizes = {0, 1, 7, 4095, chunk - 1, chunk, chunk + 1,
                                     3 * chunk, 3 * chunk + 5, 1 << 20, (5 << 20) + 3};
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto in = pattern(sizes[i], uint32_t(i));
    std::vector<uint8_t> out(sizes[i] + 16, 0xee);
    Request *rs = nullptr, *rr = nullptr;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), int(i), &rr).ok());
    ASSERT_TRUE(p.send->isend(in.data(), in.size(), int(i), &rs).ok());
    size_t sent = 99, got = 99;
    // Both tested in turn, as NCCL's proxy tests every request it has in flight (a caller
    // that polls moves its one-piece messages only while it tests them).
    NetStatus s1, s2;
    wait_both(*p.send, rs, &sent, &s1, *p.recv, rr, &got, &s2);
    ASSERT_TRUE(s1.ok()) << s1.message;
    ASSERT_TRUE(s2.ok()) << s2.message;
    EXPECT_EQ(sent, sizes[i]);
    EXPECT_EQ(got, sizes[i]);
    EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin())) << "size " << sizes[i];
    EXPECT_EQ(out[sizes[i]], 0xee) << "wrote past the message";
  }
}

INSTANTIATE_TEST_SUITE_P(SocketsAndThreads, TransportSizes,
                         ::testing::Values(std::tuple{1, 1, false}, std::tuple{2, 1, false},
                                           std::tuple{3, 2, false}, std::tuple{4, 4, false},
                                           std::tuple{1, 1, true}, std::tuple{3, 2, true},
                                           std::tuple{1, 0, true}, std::tuple{4, 0, true}));

TEST(Transport, SixtyFourMegabytesWithDefaultOptions) {
  TransportOptions o;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  const size_t size = 64 << 20;
  auto in = pattern(size, 42);
  std::vector<uint8_t> out(size);
  Request *rs, *rr;
  ASSERT_TRUE(p.recv->irecv(out.data(), size, 3, &rr).ok());
  ASSERT_TRUE(p.send->isend(in.data(), size, 3, &rs).ok());
  size_t got = 0;
  ASSERT_TRUE(wait_request(*p.send, rs, nullptr).ok());
  ASSERT_TRUE(wait_request(*p.recv, rr, &got).ok());
  EXPECT_EQ(got, size);
  EXPECT_TRUE(in == out);
}

TEST(Transport, ManyRequestsInFlightCompleteInOrder) {
  auto p = make_pair(fast_options(4, 2));
  ASSERT_TRUE(p.recv);
  constexpr int kCount = 64;
  std::vector<std::vector<uint8_t>> in, out;
  std::vector<Request*> sends(kCount), recvs(kCount);
  for (int i = 0; i < kCount; ++i) {
    // Alternate large and tiny so a later tiny message finishes its bytes first.
    size_t size = (i % 2 == 0) ? (300 * 1024 + size_t(i)) : size_t(i);
    in.push_back(pattern(size, uint32_t(100 + i)));
    out.emplace_back(size);
    ASSERT_TRUE(p.recv->irecv(out[i].data(), size, i, &recvs[i]).ok());
  }
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(p.send->isend(in[i].data(), in[i].size(), i, &sends[i]).ok());
  // Poll the last receive first: it reports done only once every earlier one is done,
  // so afterwards each earlier one reports done at its first test().
  size_t got = 0;
  auto s = wait_request(*p.recv, recvs[kCount - 1], &got);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(got, in[kCount - 1].size());
  for (int j = 0; j < kCount - 1; ++j) {
    bool done = false;
    size_t earlier = 0;
    ASSERT_TRUE(p.recv->test(recvs[j], &done, &earlier).ok());
    ASSERT_TRUE(done) << "request " << j << " not done after the last one";
    EXPECT_EQ(earlier, in[j].size());
  }
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(wait_request(*p.send, sends[i], nullptr).ok());
    EXPECT_TRUE(in[i] == out[i]) << "message " << i;
  }
}

TEST(Transport, GroupedReceiveMatchesByTag) {
  auto p = make_pair(fast_options(2, 2));
  ASSERT_TRUE(p.recv);
  std::vector<size_t> sizes = {100, 200000, 0};
  std::vector<int> tags = {10, 20, 30};
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(300000));
  void* bufs[3] = {out[0].data(), out[1].data(), out[2].data()};
  size_t caps[3] = {300000, 300000, 300000};
  Request* rr;
  ASSERT_TRUE(p.recv->irecv(3, bufs, caps, tags.data(), &rr).ok());
  // Sent in a different order than posted.
  int order[3] = {2, 0, 1};
  std::vector<std::vector<uint8_t>> in(3);
  Request* rs[3];
  for (int k = 0; k < 3; ++k) {
    int i = order[k];
    in[i] = pattern(sizes[i], uint32_t(i));
    ASSERT_TRUE(p.send->isend(in[i].data(), sizes[i], tags[i], &rs[k]).ok());
  }
  size_t got[3] = {9, 9, 9};
  auto s = wait_request(*p.recv, rr, got);
  ASSERT_TRUE(s.ok()) << s.message;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i], sizes[i]);
    EXPECT_TRUE(std::equal(in[i].begin(), in[i].end(), out[i].begin())) << "message " << i;
  }
  for (auto* r : rs) ASSERT_TRUE(wait_request(*p.send, r, nullptr).ok());
}

TEST(Transport, SendLargerThanPostedReceiveIsTruncationError) {
  std::vector<uint8_t> in(1000), out(999);  // outlive the comms: their threads use them
  auto p = make_pair(fast_options());
  ASSERT_TRUE(p.recv);
  Request *rs, *rr;
  ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 1, &rr).ok());
  ASSERT_TRUE(p.send->isend(in.data(), in.size(), 1, &rs).ok());
  auto s = wait_request(*p.recv, rr, nullptr);
  EXPECT_EQ(s.code, NetCode::Truncated) << s.message;
  EXPECT_NE(s.message.find("1000"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("999"), std::string::npos) << s.message;
  // Sticky: later receives fail too.
  Request* again;
  EXPECT_EQ(p.recv->irecv(out.data(), out.size(), 1, &again).code, NetCode::Truncated);
}

TEST(Transport, UnpostedTagIsAnError) {
  std::vector<uint8_t> buf(64);
  auto p = make_pair(fast_options());
  ASSERT_TRUE(p.recv);
  Request *rs, *rr;
  ASSERT_TRUE(p.recv->irecv(buf.data(), buf.size(), 5, &rr).ok());
  ASSERT_TRUE(p.send->isend(buf.data(), 10, 6, &rs).ok());
  auto s = wait_request(*p.recv, rr, nullptr);
  EXPECT_EQ(s.code, NetCode::TagMismatch) << s.message;
  EXPECT_NE(s.message.find("tag 6"), std::string::npos) << s.message;
}

TEST(Transport, ReceiverClosedWhileSendingFailsTheSend) {
  const size_t size = 64 << 20;  // far more than the socket buffers hold
  std::vector<uint8_t> in(size, 1);
  auto p = make_pair(fast_options(2, 2));
  ASSERT_TRUE(p.recv);
  Request* rs;
  ASSERT_TRUE(p.send->isend(in.data(), size, 0, &rs).ok());
  p.recv.reset();  // the receiving side vanishes without reading
  auto s = wait_request(*p.send, rs, nullptr);
  EXPECT_EQ(s.code, NetCode::PeerClosed) << s.message;
}

TEST(Transport, SenderClosedBeforeMessageIsPeerClosed) {
  std::vector<uint8_t> out(16);
  auto p = make_pair(fast_options(2, 2));
  ASSERT_TRUE(p.recv);
  Request* rr;
  ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 0, &rr).ok());
  p.send.reset();
  auto s = wait_request(*p.recv, rr, nullptr);
  EXPECT_EQ(s.code, NetCode::PeerClosed) << s.message;
  EXPECT_NE(s.message.find("EOF"), std::string::npos) << s.message;
}

// A peer that accepts but never reads. The send fails at the timeout
// (no byte moved for timeout_ms) instead of staying not-done forever.
TEST(Transport, SendToAPeerThatNeverReadsFailsAtTheTimeout) {
  TransportOptions o = fast_options();
  o.stall_timeout_ms = 1000;
  TransportPair p = make_pair(o);
  ASSERT_TRUE(p.recv);
  std::vector<uint8_t> data(64 << 20, 0x5c);  // far more than the socket buffers hold
  Request* r = nullptr;
  ASSERT_TRUE(p.send->isend(data.data(), data.size(), 1, &r).ok());
  const auto started = std::chrono::steady_clock::now();
  size_t size = 0;
  NetStatus s = wait_request(*p.send, r, &size, 15);
  EXPECT_EQ(s.code, NetCode::Timeout) << s.message;
  EXPECT_NE(s.message.find("no byte moved on socket"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("the peer stopped reading"), std::string::npos) << s.message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

// Without a stall timeout (the net plugin's default, as NCCL's own transports) a receiver may
// post its receive long after the send started, well past the connect timeout: the send waits
// and both complete intact.
TEST(Transport, WithoutAStallTimeoutALateReceiverStillGetsTheMessage) {
  TransportOptions o = fast_options();
  o.timeout_ms = 200;
  o.stall_timeout_ms = 0;
  TransportPair p = make_pair(o);
  ASSERT_TRUE(p.recv);
  const std::vector<uint8_t> data = pattern(64 << 20, 11);  // far more than the socket buffers hold
  Request* rs = nullptr;
  ASSERT_TRUE(p.send->isend(data.data(), data.size(), 3, &rs).ok());
  const auto late = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < late) {
    bool done = false;
    const NetStatus s = p.send->test(rs, &done, nullptr);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_FALSE(done) << "64 MiB cannot fit in the socket buffers of an unread connection";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<uint8_t> got(data.size());
  Request* rr = nullptr;
  ASSERT_TRUE(p.recv->irecv(got.data(), got.size(), 3, &rr).ok());
  size_t size = 0;
  const NetStatus r = wait_request(*p.recv, rr, &size);
  ASSERT_TRUE(r.ok()) << r.message;
  const NetStatus w = wait_request(*p.send, rs, nullptr);
  ASSERT_TRUE(w.ok()) << w.message;
  EXPECT_EQ(size, data.size());
  EXPECT_TRUE(got == data);
}

// The caller's share (net/connection.h): a one-piece message is written by the isend call
// itself when the socket takes it, so it is done at the first test(), with no progress
// thread woken; through a progress thread it would still be waiting for that thread then.
TEST(Transport, AOnePieceMessageLeavesWithTheSendCall) {
  auto p = make_pair(fast_options(4, 2));
  ASSERT_TRUE(p.recv);
  for (size_t size : {size_t(0), size_t(8), size_t(4096), size_t(64 * 1024)}) {
    const auto in = pattern(size, 5);
    Request* rs = nullptr;
    ASSERT_TRUE(p.send->isend(in.data(), in.size(), 1, &rs).ok());
    EXPECT_EQ(bytes_done_at_first_test(*p.send, rs, std::to_string(size) + " bytes were not sent by isend"), size);
    std::vector<uint8_t> out(size + 1);
    Request* rr = nullptr;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 1, &rr).ok());
    size_t got = 0;
    ASSERT_TRUE(wait_request(*p.recv, rr, &got).ok());
    ASSERT_EQ(got, size);
    EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
  }
}

// ... and one already in the receiver's socket is read by the irecv call that posts for it.
TEST(Transport, AOnePieceMessageAlreadyThereArrivesWithTheReceiveCall) {
  auto p = make_pair(fast_options(4, 2));
  ASSERT_TRUE(p.recv);
  const auto in = pattern(1000, 9);
  Request* rs = nullptr;
  ASSERT_TRUE(p.send->isend(in.data(), in.size(), 4, &rs).ok());
  ASSERT_TRUE(wait_request(*p.send, rs, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // loopback delivers meanwhile
  std::vector<uint8_t> out(in.size());
  Request* rr = nullptr;
  ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 4, &rr).ok());
  EXPECT_EQ(bytes_done_at_first_test(*p.recv, rr, "the message was in the socket, the receive call did not read it"),
            in.size());
  EXPECT_TRUE(in == out);
}

// `count` sends posted at once: 48 KiB (one piece) with every eighth 200 KiB (several
// pieces), each a little longer than the last, with its own pattern and tag.
struct MixedSends {
  std::vector<std::vector<uint8_t>> in;
  std::vector<Request*> sends;
};
MixedSends post_mixed_sends(SendComm& send, int count) {
  MixedSends m;
  for (int i = 0; i < count; ++i) {
    m.in.push_back(pattern(i % 8 == 7 ? 200 * 1024 + size_t(i) : 48 * 1024 + size_t(i), uint32_t(i)));
    Request* r = nullptr;
    if (!send.isend(m.in.back().data(), m.in.back().size(), i, &r).ok()) break;
    m.sends.push_back(r);
  }
  return m;
}

// A caller that never tests (the host backend sleeps on the completion signal): what the
// send calls could not write because the peer's socket was full is finished by the progress
// threads, and every message arrives whole and in order, one-piece ones between larger ones.
TEST(Transport, WhatTheSendCallsCouldNotWriteTheProgressThreadsFinish) {
  auto p = make_pair(fast_options(3, 2));
  ASSERT_TRUE(p.recv);
  constexpr int kCount = 96;  // ~5 MiB unread: more than the loopback socket buffers hold
  auto [in, sends] = post_mixed_sends(*p.send, kCount);
  ASSERT_EQ(sends.size(), size_t(kCount)) << "an isend failed";
  bool done = true;
  ASSERT_TRUE(p.send->test(sends[kCount - 1], &done, nullptr).ok());
  ASSERT_FALSE(done) << "the unread connection took every message: nothing was left to the threads";
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> out(in[i].size());
    Request* rr = nullptr;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), i, &rr).ok());
    size_t got = 0;
    const NetStatus s = wait_request(*p.recv, rr, &got);
    ASSERT_TRUE(s.ok()) << "message " << i << ": " << s.message;
    ASSERT_EQ(got, in[i].size()) << "message " << i;
    ASSERT_TRUE(in[i] == out) << "message " << i;
  }
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(wait_request(*p.send, sends[i], nullptr).ok()) << i;
}

// When the caller polls (the net plugin: NCCL's proxy tests every request until done), the
// one-piece messages the socket did not take are moved by the polling caller alone, and
// every message still arrives whole and in order.
TEST(Transport, WhenTheCallerPollsItFinishesWhatTheSocketDidNotTake) {
  TransportOptions o = fast_options(3, 2);
  o.caller_polls = true;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  constexpr int kCount = 96;  // ~5 MiB unread: more than the loopback socket buffers hold
  auto [in, sends] = post_mixed_sends(*p.send, kCount);
  ASSERT_EQ(sends.size(), size_t(kCount)) << "an isend failed";
  bool receiver_ok = true;
  std::thread receiver([&] {
    for (int i = 0; i < kCount && receiver_ok; ++i) {
      std::vector<uint8_t> out(in[i].size());
      Request* rr = nullptr;
      size_t got = 0;
      receiver_ok = p.recv->irecv(out.data(), out.size(), i, &rr).ok() && wait_request(*p.recv, rr, &got).ok() &&
                    got == in[i].size() && in[i] == out;
    }
  });
  for (int i = 0; i < kCount; ++i) {
    const NetStatus s = wait_request(*p.send, sends[i], nullptr);
    EXPECT_TRUE(s.ok()) << "message " << i << ": " << s.message;
  }
  receiver.join();
  EXPECT_TRUE(receiver_ok);
}

// ... and the stall timeout still ends a send to a peer that never reads, the polling caller
// being the only one that watches a one-piece message.
TEST(Transport, WhenTheCallerPollsASmallSendToAPeerThatNeverReadsFailsAtTheTimeout) {
  TransportOptions o = fast_options(2, 1);
  o.caller_polls = true;
  o.stall_timeout_ms = 2000;  // the posting below stays well inside it, also under a sanitizer
  TransportPair p = make_pair(o);
  ASSERT_TRUE(p.recv);
  std::vector<uint8_t> data(32 * 1024, 0x3c);
  Request* last = nullptr;
  for (int i = 0; i < 1024; ++i)  // 32 MiB: far more than the socket buffers hold
    ASSERT_TRUE(p.send->isend(data.data(), data.size(), 1, &last).ok());
  const auto started = std::chrono::steady_clock::now();
  const NetStatus s = wait_request(*p.send, last, nullptr, 15);
  EXPECT_EQ(s.code, NetCode::Timeout) << s.message;
  EXPECT_NE(s.message.find("no byte moved on socket 0"), std::string::npos) << s.message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(12));
}

// When the caller polls (NCCL's proxy), it moves every piece of every message as far as the
// sockets take them, as NCCL's own Socket transport moves every byte on its proxy thread: a
// several-piece message the sockets take whole is done at the first test(), no progress
// thread having been woken for it (their idle re-check is longer than the test); through the
// threads it would still be waiting for their wake-ups then.
TEST(Transport, WhenTheCallerPollsASeveralPieceMessageLeavesWithTheSendCall) {
  TransportOptions o = fast_options(4, 2);
  o.caller_polls = true;
  o.min_stripe_bytes = 16 * 1024;
  o.idle_poll_ms = 120000;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  for (size_t size : {size_t(40 * 1024), size_t(100 * 1024), size_t(160 * 1024)}) {  // 3, 4, 4 pieces
    const auto in = pattern(size, 6);
    Request* rs = nullptr;
    ASSERT_TRUE(p.send->isend(in.data(), in.size(), 2, &rs).ok());
    EXPECT_EQ(bytes_done_at_first_test(*p.send, rs, std::to_string(size) + " bytes were not sent by isend", 20),
              size);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // loopback delivers meanwhile
    std::vector<uint8_t> out(size);
    Request* rr = nullptr;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 2, &rr).ok());
    ASSERT_EQ(bytes_done_at_first_test(
                  *p.recv, rr, std::to_string(size) + " bytes were in the sockets, the receive call did not read them", 20),
              size);
    EXPECT_TRUE(in == out) << size;
  }
}

// ... and what the sockets did not take is finished by the progress threads, woken for it by
// the send call: here the sending caller never tests until the receiver has every message,
// so the threads moved every byte the isend calls left. Their idle re-check is longer than
// the test, so a missing wake-up hangs instead of costing a second.
TEST(Transport, WhenTheCallerPollsTheThreadsFinishTheSendsTheSocketsDidNotTake) {
  TransportOptions o = fast_options(3, 2);
  o.caller_polls = true;
  o.idle_poll_ms = 120000;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  constexpr int kCount = 96;  // ~58 MiB unread: more than the loopback socket buffers hold
  std::vector<std::vector<uint8_t>> in;
  std::vector<Request*> sends;
  for (int i = 0; i < kCount; ++i) {
    in.push_back(pattern(600 * 1024 + size_t(i), uint32_t(i)));  // 10 pieces of 64 KiB at most
    Request* r = nullptr;
    ASSERT_TRUE(p.send->isend(in[i].data(), in[i].size(), i, &r).ok());
    sends.push_back(r);
  }
  bool done = true;
  ASSERT_TRUE(p.send->test(sends[kCount - 1], &done, nullptr).ok());
  ASSERT_FALSE(done) << "the unread connection took every message: nothing was left to the threads";
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> out(in[i].size());
    Request* rr = nullptr;
    size_t got = 0;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), i, &rr).ok());
    const NetStatus s = wait_request(*p.recv, rr, &got, 20);
    ASSERT_TRUE(s.ok()) << "message " << i << ": " << s.message;
    ASSERT_EQ(got, in[i].size()) << "message " << i;
    ASSERT_TRUE(in[i] == out) << "message " << i;
  }
  for (int i = 0; i < kCount; ++i) ASSERT_TRUE(wait_request(*p.send, sends[i], nullptr, 20).ok()) << i;
}

// The host backend (its waiter sleeps: no caller_polls): the receive call reads the header
// of a several-piece message already in the sockets and wakes the threads of the lanes
// that hold its pieces at the end of its pass. Their idle re-check is longer than the
// test, so a missing wake-up hangs instead of costing a second.
TEST(Transport, AHeaderTheReceiveCallReadsWakesTheThreadsOfItsPieces) {
  TransportOptions o = fast_options(3, 2);
  o.idle_poll_ms = 120000;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  const auto in = pattern(200 * 1024 + 3, 12);  // 4 pieces over 3 sockets
  Request* rs = nullptr;
  ASSERT_TRUE(p.send->isend(in.data(), in.size(), 6, &rs).ok());
  ASSERT_TRUE(wait_request(*p.send, rs, nullptr, 20).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // loopback delivers meanwhile
  std::vector<uint8_t> out(in.size());
  Request* rr = nullptr;
  ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 6, &rr).ok());
  size_t got = 0;
  const NetStatus s = wait_request(*p.recv, rr, &got, 20);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(got, in.size());
  EXPECT_TRUE(in == out);
}

int entries_in(const char* directory) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(directory)) ++n;
  return n;
}

// The process's threads, once two reads 5 ms apart agree (a thread just joined by an earlier
// test may still be listed for a moment).
int running_threads() {
  int n = entries_in("/proc/self/task");
  for (int tries = 0; tries < 200; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int again = entries_in("/proc/self/task");
    if (again == n) break;
    n = again;
  }
  return n;
}

// With no progress threads (TOPOCOLL_NET_THREADS=0, the net plugin's default: its caller
// polls) a connection starts none, and the polling caller alone moves every message, a
// one-piece one and one cut over every socket.
TEST(Transport, WithNoProgressThreadsThePollingCallerMovesEverything) {
  // ThreadSanitizer starts its own background thread at the process's first pthread_create:
  // start it before counting, so that it is not counted as a connection's.
  std::thread([] {}).join();
  const int before = running_threads();
  TransportOptions o = fast_options(4, 0);
  o.caller_polls = true;
  auto p = make_pair(o);
  ASSERT_TRUE(p.recv);
  const int without = running_threads() - before;
  {
    TransportOptions two = fast_options(4, 2);
    two.caller_polls = true;
    auto q = make_pair(two);
    ASSERT_TRUE(q.recv);
    EXPECT_EQ(running_threads() - before - without, without + 4)
        << "a connection with 2 threads (send and receive side) runs 4 more than one with none";
  }
  EXPECT_EQ(o.normalized().threads_per_conn, 0);
  for (size_t size : {size_t(1000), size_t(3 << 20) + 7}) {
    const auto in = pattern(size, 11);
    std::vector<uint8_t> out(size);
    Request *rs = nullptr, *rr = nullptr;
    ASSERT_TRUE(p.recv->irecv(out.data(), out.size(), 5, &rr).ok());
    ASSERT_TRUE(p.send->isend(in.data(), in.size(), 5, &rs).ok());
    size_t sent = 0, got = 0;
    NetStatus s1, s2;
    wait_both(*p.send, rs, &sent, &s1, *p.recv, rr, &got, &s2);
    ASSERT_TRUE(s1.ok()) << s1.message;
    ASSERT_TRUE(s2.ok()) << s2.message;
    EXPECT_EQ(got, size);
    EXPECT_TRUE(in == out) << size;
  }
}

TEST(Transport, LocalBindChoosesTheSourceAddress) {
  auto bind = SocketAddress::parse("127.0.0.2");
  ASSERT_TRUE(bind);
  auto p = make_pair(fast_options(), &*bind, 1234);
  ASSERT_TRUE(p.recv);
  EXPECT_EQ(p.recv->peer_address().ip_string(), "127.0.0.2");
  EXPECT_EQ(p.send->local_address().ip_string(), "127.0.0.2");
  EXPECT_EQ(p.recv->peer_cookie(), 1234u);
}

int open_descriptors() { return entries_in("/proc/self/fd"); }

TEST(Transport, ClosingReleasesEverySocketAndThread) {
  const int before = open_descriptors();
  {
    std::vector<uint8_t> data(1 << 20, 3), received(1 << 20);
    auto p = make_pair(fast_options(4, 3));
    ASSERT_TRUE(p.recv);
    Request *rs, *rr;
    ASSERT_TRUE(p.recv->irecv(received.data(), received.size(), 0, &rr).ok());
    ASSERT_TRUE(p.send->isend(data.data(), data.size(), 0, &rs).ok());
    ASSERT_TRUE(wait_request(*p.send, rs, nullptr).ok());
    ASSERT_TRUE(wait_request(*p.recv, rr, nullptr).ok());
    // A request left pending at close is freed with its comm.
    ASSERT_TRUE(p.recv->irecv(received.data(), received.size(), 0, &rr).ok());
  }
  EXPECT_EQ(open_descriptors(), before);
}

TEST(Transport, ArgumentErrorsAreReported) {
  auto p = make_pair(fast_options());
  ASSERT_TRUE(p.recv);
  Request* r;
  EXPECT_EQ(p.send->isend(nullptr, 10, 0, &r).code, NetCode::InvalidArgument);
  EXPECT_EQ(p.recv->irecv(0, nullptr, nullptr, nullptr, &r).code, NetCode::InvalidArgument);
  void* bufs[9] = {};
  size_t sizes[9] = {};
  int tags[9] = {};
  EXPECT_EQ(p.recv->irecv(9, bufs, sizes, tags, &r).code, NetCode::InvalidArgument);
}

}  // namespace
}  // namespace topocoll::net::testing
