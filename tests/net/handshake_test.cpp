// Connection set-up of the socket transport: handles, hellos from foreign or mismatched
// peers, timeouts, and a peer that dies mid-message. Raw sockets play the bad peers.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "config/env.h"
#include "config/warnings.h"
#include "net/socket_transport.h"
#include "net/wire_format.h"
#include "tests/net/transport_pair.h"

namespace topocoll::net::testing {
namespace {

// A blocking socket connected to the listener, standing in for a misbehaving peer.
int raw_connect(const Listener& l) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage ss;
  unsigned len = l.address().to_sockaddr(&ss);
  EXPECT_EQ(0, ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len)) << std::strerror(errno);
  return fd;
}

void write_all(int fd, const void* data, size_t size) {
  ASSERT_EQ(ssize_t(size), ::send(fd, data, size, MSG_NOSIGNAL));
}

Hello valid_hello(const Listener& l, uint16_t index, uint64_t id) {
  Hello h;
  h.version = kProtocolVersion;
  h.socket_index = index;
  h.sockets = l.handle().sockets;
  h.listener_nonce = l.handle().listener_nonce;
  h.connection_id = id;
  h.chunk_bytes = 64 * 1024;
  h.min_stripe_bytes = 64 * 1024;
  return h;
}

TEST(Handshake, HandleRoundTripsThroughOpaqueBytes) {
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(), &l, 77).ok());
  unsigned char opaque[kMaxHandleBytes] = {};
  std::memcpy(opaque, &l->handle(), sizeof(Handle));
  Handle h;
  ASSERT_TRUE(decode_handle(opaque, sizeof opaque, &h).ok());
  EXPECT_EQ(h.user_data, 77u);
  EXPECT_EQ(handle_address(h).to_string(), l->address().to_string());
  EXPECT_NE(h.port, 0);
}

TEST(Handshake, ForeignHandleIsRejectedByName) {
  unsigned char garbage[kMaxHandleBytes];
  std::memset(garbage, 0x5a, sizeof garbage);
  Handle h;
  NetStatus s = decode_handle(garbage, sizeof garbage, &h);
  EXPECT_EQ(s.code, NetCode::BadHandle);
  EXPECT_NE(s.message.find("magic"), std::string::npos) << s.message;
  std::unique_ptr<SendComm> send;
  s = connect(h, nullptr, fast_options(), 0, &send);
  EXPECT_EQ(s.code, NetCode::BadHandle) << s.message;
  EXPECT_FALSE(send);
  EXPECT_EQ(decode_handle(garbage, 8, &h).code, NetCode::BadHandle);
}

TEST(Handshake, HandleVersionMismatchIsRejected) {
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(), &l).ok());
  Handle h = l->handle();
  h.version = kProtocolVersion + 1;
  std::unique_ptr<SendComm> send;
  NetStatus s = connect(h, nullptr, fast_options(), 0, &send);
  EXPECT_EQ(s.code, NetCode::VersionMismatch);
  EXPECT_NE(s.message.find("version"), std::string::npos) << s.message;
}

// Warnings raised by the transport, captured per test.
std::vector<std::string>& warnings() {
  static std::vector<std::string> w;
  return w;
}
void capture_warning(const std::string& m) { warnings().push_back(m); }
bool warned(const std::string& text) {
  for (const auto& w : warnings())
    if (w.find(text) != std::string::npos) return true;
  return false;
}

// One stray (a hello of another version, a foreign client, a wrong nonce, an idle socket)
// is closed, counted and named in one WARN; accept() goes on and returns the real peer.
TEST(Handshake, StrayConnectionsAreClosedWhileTheRealPeerIsAccepted) {
  warnings().clear();
  config::set_warning_sink(&capture_warning);
  TransportOptions o = fast_options();
  o.timeout_ms = 400;  // also the idle socket's hello deadline
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &l).ok());
  int other_version = raw_connect(*l);
  Hello h = valid_hello(*l, 0, 1);
  h.version = 99;
  write_all(other_version, &h, sizeof h);
  int foreign = raw_connect(*l);
  char junk[sizeof(Hello)];
  std::memset(junk, 'G', sizeof junk);  // e.g. an HTTP client
  write_all(foreign, junk, sizeof junk);
  int other_listener = raw_connect(*l);
  h = valid_hello(*l, 0, 2);
  h.listener_nonce ^= 1;
  write_all(other_listener, &h, sizeof h);
  int idle = raw_connect(*l);  // says nothing

  std::unique_ptr<RecvComm> recv;
  NetStatus s = l->accept(&recv, 200);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(recv);
  EXPECT_EQ(l->stray_connections(), 3u);
  EXPECT_TRUE(warned("speaks protocol version 99")) << ::testing::PrintToString(warnings());
  EXPECT_TRUE(warned("not a topocoll transport")) << ::testing::PrintToString(warnings());
  EXPECT_TRUE(warned("carries the handle of another listener")) << ::testing::PrintToString(warnings());
  EXPECT_TRUE(warned("closed a stray connection from 127.0.0.1:")) << ::testing::PrintToString(warnings());

  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(connect(l->handle(), nullptr, o, 9, &send).ok());
  s = l->accept(&recv, 5000);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(recv);
  EXPECT_EQ(recv->peer_cookie(), 9u);
  s = l->accept(&recv, 600);  // the idle socket's deadline passes
  EXPECT_EQ(l->stray_connections(), 4u);
  EXPECT_TRUE(warned("sent 0 of ")) << ::testing::PrintToString(warnings());
  // A probe that sends less than a hello and waits is turned away by its first bytes, not
  // held until the hello deadline.
  int probe = raw_connect(*l);
  write_all(probe, "GET / HTTP/1.1\r\n", 16);
  const size_t strays = l->stray_connections();
  s = l->accept(&recv, 100);
  EXPECT_EQ(l->stray_connections(), strays + 1) << "a 16-byte probe was held for the hello deadline";
  EXPECT_TRUE(warned("magic 0x20544547")) << ::testing::PrintToString(warnings());
  ::close(probe);
  for (int fd : {other_version, foreign, other_listener, idle}) ::close(fd);
  config::set_warning_sink(nullptr);
}

// A flood of silent connections costs a bounded number of descriptors and never keeps the
// real peer out.
TEST(Handshake, FloodOfSilentConnectionsDoesNotKeepTheRealPeerOut) {
  warnings().clear();
  config::set_warning_sink(&capture_warning);
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(), &l).ok());
  std::vector<int> flood;
  for (int i = 0; i < 400; ++i) flood.push_back(raw_connect(*l));
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(l->accept(&recv, 100).ok());
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(connect(l->handle(), nullptr, fast_options(), 5, &send).ok());
  for (int i = 0; i < 100 && !recv; ++i) ASSERT_TRUE(l->accept(&recv, 100).ok());
  ASSERT_TRUE(recv) << "the real peer was not accepted behind the flood";
  EXPECT_GE(l->stray_connections(), 400u - 256u);
  EXPECT_LE(warnings().size(), 12u) << "one WARN per stray past the first ten";
  for (int fd : flood) ::close(fd);
  config::set_warning_sink(nullptr);
}

// The real peer first, its hello waiting unread, then more strangers than the listener holds
// before the next accept: the strangers crowd out strangers, never the peer.
TEST(Handshake, AFloodAfterTheRealPeerDoesNotCrowdItOut) {
  warnings().clear();
  config::set_warning_sink(&capture_warning);
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(), &l).ok());
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(connect(l->handle(), nullptr, fast_options(), 5, &send).ok());
  std::vector<int> flood;
  for (int i = 0; i < 400; ++i) flood.push_back(raw_connect(*l));
  std::unique_ptr<RecvComm> recv;
  for (int i = 0; i < 20 && !recv; ++i) ASSERT_TRUE(l->accept(&recv, 100).ok());
  EXPECT_TRUE(recv) << "the real peer, first in, was crowded out by the flood behind it";
  for (int fd : flood) ::close(fd);
  config::set_warning_sink(nullptr);
}

TEST(Handshake, AcceptPollReturnsNothingThenTimesOut) {
  TransportOptions o = fast_options();
  o.accept_idle_timeout_ms = 200;
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &l).ok());
  std::unique_ptr<RecvComm> recv;
  NetStatus s = l->accept(&recv, 0);  // NCCL-style poll: nothing yet, no error
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(recv);
  s = l->accept(&recv, 1000);
  EXPECT_EQ(s.code, NetCode::Timeout) << s.message;
}

TEST(Handshake, ConnectionMissingSocketsTimesOut) {
  TransportOptions o = fast_options(3, 1);
  o.timeout_ms = 300;
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &l).ok());
  int fd = raw_connect(*l);
  Hello h = valid_hello(*l, 0, 5);
  write_all(fd, &h, sizeof h);
  std::unique_ptr<RecvComm> recv;
  NetStatus s = l->accept(&recv, 5000);
  EXPECT_EQ(s.code, NetCode::Timeout) << s.message;
  EXPECT_NE(s.message.find("only 1 of 3 sockets"), std::string::npos) << s.message;
  ::close(fd);
}

TEST(Handshake, PeerDyingMidMessageIsPeerClosed) {
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(1, 1), &l).ok());
  int fd = raw_connect(*l);
  Hello h = valid_hello(*l, 0, 9);
  write_all(fd, &h, sizeof h);
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(l->accept(&recv, 20000).ok());
  ASSERT_TRUE(recv);
  MessageHeader m;
  m.tag = 0;
  m.size = 1000;
  write_all(fd, &m, sizeof m);
  char part[100] = {};
  write_all(fd, part, sizeof part);
  ::close(fd);  // 900 bytes never come
  std::vector<char> out(1000);
  Request* r;
  ASSERT_TRUE(recv->irecv(out.data(), out.size(), 0, &r).ok());
  NetStatus s = wait_request(*recv, r, nullptr);
  EXPECT_EQ(s.code, NetCode::PeerClosed) << s.message;
  EXPECT_NE(s.message.find("mid-message (100 of 1000"), std::string::npos) << s.message;
  recv.reset();  // before `out`, which its thread wrote into
}

TEST(Handshake, TwoPeersConnectBeforeEitherAccepts) {
  // NCCL may connect to its next peer and only then accept from its previous one, from a
  // single thread: connect() must not wait for the peer's accept().
  TransportOptions o = fast_options(2, 1);
  std::unique_ptr<Listener> la, lb;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &la).ok());
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &lb).ok());
  std::unique_ptr<SendComm> a_to_b, b_to_a;
  ASSERT_TRUE(connect(lb->handle(), nullptr, o, 1, &a_to_b).ok());
  ASSERT_TRUE(connect(la->handle(), nullptr, o, 2, &b_to_a).ok());
  std::unique_ptr<RecvComm> at_a, at_b;
  ASSERT_TRUE(la->accept(&at_a, 20000).ok());
  ASSERT_TRUE(lb->accept(&at_b, 20000).ok());
  ASSERT_TRUE(at_a && at_b);
  EXPECT_EQ(at_a->peer_cookie(), 2u);
  EXPECT_EQ(at_b->peer_cookie(), 1u);
}

TEST(Handshake, OneListenerAcceptsSeveralConnections) {
  TransportOptions o = fast_options(2, 1);
  std::unique_ptr<Listener> l;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), o, &l).ok());
  std::vector<std::unique_ptr<SendComm>> sends(5);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(connect(l->handle(), nullptr, o, uint64_t(i), &sends[i]).ok());
  std::vector<bool> seen(5, false);
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<RecvComm> r;
    ASSERT_TRUE(l->accept(&r, 20000).ok());
    ASSERT_TRUE(r);
    ASSERT_LT(r->peer_cookie(), 5u);
    seen[r->peer_cookie()] = true;
  }
  for (bool s : seen) EXPECT_TRUE(s);
}

TEST(Handshake, ConnectToClosedPortFails) {
  Handle h;
  {
    std::unique_ptr<Listener> l;
    ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), fast_options(), &l).ok());
    h = l->handle();
  }
  std::unique_ptr<SendComm> send;
  NetStatus s = connect(h, nullptr, fast_options(), 0, &send);
  EXPECT_EQ(s.code, NetCode::ConnectFailed) << s.message;
}

// The TOPOCOLL_NET_* values of an Env (config/env.h validated them), normalized: threads
// never outnumber sockets.
TEST(Options, TheEnvsValuesNormalized) {
  const config::Env env = config::read_env({{"TOPOCOLL_NET_SOCKETS_PER_CONN", "3"},
                                            {"TOPOCOLL_NET_THREADS", "8"},
                                            {"TOPOCOLL_NET_TIMEOUT_MS", "fast"},
                                            {"TOPOCOLL_NET_CHUNK_BYTES", "128K"},
                                            {"TOPOCOLL_NET_RENDEZVOUS", "no"},
                                            {"TOPOCOLL_NET_LANE_MARKS", "256,257"}});
  const TransportOptions o = TransportOptions::from_env(env);
  EXPECT_EQ(o.sockets_per_conn, 3);
  EXPECT_EQ(o.threads_per_conn, 3);  // clamped to the sockets
  EXPECT_EQ(o.timeout_ms, TransportOptions{}.timeout_ms);
  EXPECT_EQ(o.chunk_bytes, 128u * 1024);
  EXPECT_FALSE(o.rendezvous);
  EXPECT_EQ(o.lane_marks, (std::vector<uint32_t>{256, 257}));
  ASSERT_EQ(env.warnings.size(), 1u);
  EXPECT_NE(env.warnings[0].find("TOPOCOLL_NET_TIMEOUT_MS=\"fast\""), std::string::npos) << env.warnings[0];
  // Unset, every option is TransportOptions' own default: the table and the struct agree.
  const TransportOptions d = TransportOptions::from_env(config::read_env({}));
  const TransportOptions plain = TransportOptions{}.normalized();
  EXPECT_EQ(d.sockets_per_conn, plain.sockets_per_conn);
  EXPECT_EQ(d.threads_per_conn, plain.threads_per_conn);
  EXPECT_EQ(d.timeout_ms, plain.timeout_ms);
  EXPECT_EQ(d.chunk_bytes, plain.chunk_bytes);
  EXPECT_EQ(d.min_stripe_bytes, plain.min_stripe_bytes);
  EXPECT_EQ(d.eager_bytes, plain.eager_bytes);
  EXPECT_EQ(d.rendezvous, plain.rendezvous);
  EXPECT_EQ(d.lane_marks, plain.lane_marks);
}

// A count that overflows once scaled (M = 2^20) is out of range, not a wrapped small value.
TEST(Options, ChunkBytesThatOverflowWhenScaledAreRejected) {
  for (const char* text : {"9223372036854775807M", "17592186044416M", "-1K", "9007199254740993K"}) {
    const config::Env env = config::read_env({{"TOPOCOLL_NET_CHUNK_BYTES", text}});
    EXPECT_EQ(TransportOptions::from_env(env).chunk_bytes, TransportOptions{}.chunk_bytes) << text;
    ASSERT_EQ(env.warnings.size(), 1u) << text;
    EXPECT_NE(env.warnings[0].find("TOPOCOLL_NET_CHUNK_BYTES"), std::string::npos) << env.warnings[0];
    EXPECT_NE(env.warnings[0].find("from 4K to 64M"), std::string::npos) << env.warnings[0];
  }
}

}  // namespace
}  // namespace topocoll::net::testing
