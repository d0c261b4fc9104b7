// Which connect and transfer errors are retried or blamed on the peer (as NCCL's Socket
// transport: misc/socket.cc), and a polled connect (net/connect_attempt.h) that meets a
// listener only after seconds of refusals, or never.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include "net/connect_attempt.h"
#include "net/socket_calls.h"
#include "net/socket_transport.h"
#include "tests/net/transport_pair.h"

namespace topocoll::net::testing {
namespace {

TEST(ConnectRetry, RefusedAndUnreachableConnectsAreTriedAgainLocalErrorsAreNot) {
  for (const int e : {ECONNREFUSED, EHOSTUNREACH, ETIMEDOUT, EAGAIN, EINTR})
    EXPECT_TRUE(is_retryable_connect_error(e)) << errno_text(e);
  for (const int e : {ENETUNREACH, EADDRNOTAVAIL, EACCES, EPERM, EAFNOSUPPORT, EBADF, ENOBUFS, EINVAL})
    EXPECT_FALSE(is_retryable_connect_error(e)) << errno_text(e);
}

// A dead host or a link down is the peer's or the path's (ncclRemoteError, as NCCL reports
// every socket errno); a descriptor or memory error is ours (ncclSystemError).
TEST(ConnectRetry, TransferErrorsOfThePeerOrThePathAreToldFromOurOwn) {
  for (const int e : {ECONNRESET, EPIPE, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ENETDOWN, ENETRESET, ECONNABORTED,
                      ENOTCONN, EHOSTDOWN})
    EXPECT_TRUE(is_peer_or_path_error(e)) << errno_text(e);
  for (const int e : {EBADF, ENOMEM, EFAULT, EINVAL, ENOTSOCK, EMFILE})
    EXPECT_FALSE(is_peer_or_path_error(e)) << errno_text(e);
}

TEST(ConnectRetry, TheDelayGrowsAndIsBounded) {
  EXPECT_EQ(connect_retry_delay(0), std::chrono::milliseconds(10));
  EXPECT_EQ(connect_retry_delay(1), std::chrono::milliseconds(20));
  EXPECT_EQ(connect_retry_delay(5), std::chrono::milliseconds(320));
  EXPECT_EQ(connect_retry_delay(6), std::chrono::milliseconds(500));
  EXPECT_EQ(connect_retry_delay(1000), std::chrono::milliseconds(500));
  EXPECT_EQ(connect_retry_delay(-3), std::chrono::milliseconds(10));
}

// A socket bound to a handle's port that does not listen yet: connects to it are refused
// until listen() is called.
class NotYetListening {
 public:
  explicit NotYetListening(const SocketAddress& address) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const int one = 1;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss;
    const unsigned len = address.to_sockaddr(&ss);
    bound_ = ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0;
  }
  bool bound() const { return bound_; }
  bool listen() { return ::listen(fd_.get(), 4) == 0; }
  int fd() const { return fd_.get(); }

 private:
  FileDescriptor fd_;
  bool bound_ = false;
};

// A handle whose listener is gone, and its address.
Handle handle_of_a_closed_listener(const TransportOptions& options) {
  std::unique_ptr<Listener> l;
  EXPECT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), options, &l).ok());
  return l ? l->handle() : Handle{};
}

// NCCL's Socket transport retries a refused connect for about a minute (34 tries); the net
// plugin's connect gave up after one second, so a peer whose listener came later (or a
// neighbour entry that came back) failed a communicator NCCL would have kept.
TEST(ConnectRetry, AListenerThatComesSecondsLateIsStillReached) {
  TransportOptions options = fast_options(1, 1);
  options.timeout_ms = 10000;
  const Handle h = handle_of_a_closed_listener(options);
  NotYetListening peer(handle_address(h));
  ASSERT_TRUE(peer.bound()) << errno_text(errno);

  std::unique_ptr<ConnectAttempt> attempt;
  NetStatus s = ConnectAttempt::start(h, nullptr, options, 5, &attempt);
  ASSERT_TRUE(s.ok()) << s.message;
  std::unique_ptr<SendComm> send;
  const auto started = Clock::now();
  while (Clock::now() - started < std::chrono::milliseconds(1500)) {
    s = attempt->advance(&send);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_FALSE(send);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(peer.listen()) << errno_text(errno);
  while (!send && Clock::now() - started < std::chrono::seconds(8)) {
    s = attempt->advance(&send);
    ASSERT_TRUE(s.ok()) << s.message;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(send) << "no connection within 8 s of the first refusal";
  // The hello the late listener gets carries the handle's listener.
  FileDescriptor arrived(::accept(peer.fd(), nullptr, nullptr));
  ASSERT_TRUE(arrived.valid()) << errno_text(errno);
  Hello hello{};
  ASSERT_EQ(::recv(arrived.get(), &hello, sizeof hello, MSG_WAITALL), ssize_t(sizeof hello));
  EXPECT_EQ(hello.listener_nonce, h.listener_nonce);
  EXPECT_EQ(hello.cookie, 5u);
}

// Nothing ever listens: the attempt ends at the timeout, naming the error it kept meeting.
TEST(ConnectRetry, AConnectRefusedUntilTheTimeoutSaysSo) {
  TransportOptions options = fast_options(2, 1);
  options.timeout_ms = 600;
  const Handle h = handle_of_a_closed_listener(options);
  NotYetListening peer(handle_address(h));  // holds the port: no one else's listener answers
  ASSERT_TRUE(peer.bound()) << errno_text(errno);
  std::unique_ptr<ConnectAttempt> attempt;
  NetStatus s = ConnectAttempt::start(h, nullptr, options, 0, &attempt);
  ASSERT_TRUE(s.ok()) << s.message;
  std::unique_ptr<SendComm> send;
  const auto started = Clock::now();
  while (s.ok() && !send && Clock::now() - started < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = attempt->advance(&send);
  }
  EXPECT_FALSE(send);
  EXPECT_EQ(s.code, NetCode::Timeout) << s.message;
  EXPECT_NE(s.message.find("did not complete within 600 ms (retried after: "), std::string::npos) << s.message;
  EXPECT_NE(s.message.find(errno_text(ECONNREFUSED)), std::string::npos) << s.message;
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(550));
}

}  // namespace
}  // namespace topocoll::net::testing
