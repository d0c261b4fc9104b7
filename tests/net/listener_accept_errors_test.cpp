// The listener under accept4 failures, injected: this binary defines accept4 (found before
// libc's), failing the next calls with a chosen errno when a test asks, else passing through.
#include <dlfcn.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "net/socket_calls.h"
#include "net/socket_transport.h"
#include "tests/net/transport_pair.h"

namespace {
std::atomic<int> g_failing_accepts{0};
std::atomic<int> g_accept_errno{0};
}  // namespace

extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  using Accept4 = int (*)(int, sockaddr*, socklen_t*, int);
  static const Accept4 real = reinterpret_cast<Accept4>(dlsym(RTLD_NEXT, "accept4"));
  for (int n = g_failing_accepts.load(); n > 0; n = g_failing_accepts.load())
    if (g_failing_accepts.compare_exchange_weak(n, n - 1)) {
      errno = g_accept_errno.load();
      return -1;
    }
  return real(fd, addr, len, flags);
}

namespace topocoll::net {
namespace {

void fail_next_accepts(int calls, int error_number) {
  g_accept_errno = error_number;
  g_failing_accepts = calls;
}

// A connection whose network error Linux reports through accept (accept(2)) is a stray: the
// listener goes on to the next one, as NCCL's Socket transport does (socketTryAccept).
TEST(ListenerAcceptErrors, AConnectionsPendingNetworkErrorIsAStrayNotTheListenersFailure) {
  for (const int e : {EPROTO, ENETDOWN, EHOSTUNREACH, ECONNABORTED}) {
    SCOPED_TRACE(errno_text(e));
    const TransportOptions options = testing::fast_options(1, 1);
    std::unique_ptr<Listener> listener;
    ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), options, &listener).ok());
    std::unique_ptr<SendComm> send;
    ASSERT_TRUE(connect(listener->handle(), nullptr, options, 7, &send).ok());
    fail_next_accepts(3, e);
    std::unique_ptr<RecvComm> recv;
    const NetStatus s = listener->accept(&recv, 10000);
    fail_next_accepts(0, 0);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_NE(recv, nullptr);
    EXPECT_EQ(listener->stray_connections(), 3u);
  }
}

// Bounded as NCCL bounds it (NCCL_SOCKET_RETRY_CNT's default): errors that never stop fail
// the accept, naming the count and the error; any other error fails it at once.
TEST(ListenerAcceptErrors, EndlessPendingErrorsAndOtherErrorsFailTheAccept) {
  const TransportOptions options = testing::fast_options(1, 1);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), options, &listener).ok());
  std::unique_ptr<RecvComm> recv;
  fail_next_accepts(1000, EPROTO);
  NetStatus s = listener->accept(&recv, 0);
  fail_next_accepts(0, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("failed 34 times in a row"), std::string::npos) << s.message;

  std::unique_ptr<Listener> other;
  ASSERT_TRUE(Listener::open(SocketAddress::loopback_ipv4(), options, &other).ok());
  fail_next_accepts(1, EMFILE);
  s = other->accept(&recv, 0);
  fail_next_accepts(0, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find(errno_text(EMFILE)), std::string::npos) << s.message;
  EXPECT_EQ(other->stray_connections(), 0u);
}

TEST(ListenerAcceptErrors, OnlyAConnectionsOwnErrorsArePendingNetworkErrors) {
  for (const int e : {ECONNABORTED, ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH, EOPNOTSUPP,
                      ENETUNREACH})
    EXPECT_TRUE(is_pending_network_error(e)) << errno_text(e);
  for (const int e : {EMFILE, ENFILE, ENOBUFS, ENOMEM, EBADF, EINVAL, ENOTSOCK, EAGAIN, EINTR})
    EXPECT_FALSE(is_pending_network_error(e)) << errno_text(e);
}

}  // namespace
}  // namespace topocoll::net
