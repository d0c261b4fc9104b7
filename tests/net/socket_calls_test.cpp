// net/'s socket helpers as the bootstrap and the acceptance probes use them: name
// resolution, listen / connect / accept on loopback, bounded waits, whole sends and draining
// receives, each reporting the errno of the call that failed.
#include "net/socket_calls.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "net/host_resolution.h"

namespace topocoll::net {
namespace {

TEST(HostResolution, LiteralsAndTheWildcard) {
  std::vector<SocketAddress> found;
  ASSERT_TRUE(resolve_host("127.0.0.1", 4242, false, &found).ok());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].to_string(), "127.0.0.1:4242");
  ASSERT_TRUE(resolve_host("::1", 7, false, &found).ok());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].to_string(), "[::1]:7");
  // Listening on no host in particular: every local address, port kept.
  ASSERT_TRUE(resolve_host("", 9, true, &found).ok());
  ASSERT_FALSE(found.empty());
  for (const SocketAddress& a : found) {
    EXPECT_TRUE(a.is_unspecified()) << a.to_string();
    EXPECT_EQ(a.port, 9);
  }
}

// NCCL_COMM_ID's forms, as NCCL reads them: <host>:<port>, [<IPv6>]:<port>, a link-local
// address with its interface; anything else named in the error.
TEST(HostResolution, HostAndPortAsNcclReadsItsCommId) {
  SocketAddress a;
  ASSERT_TRUE(resolve_host_port("127.0.0.1:29500", &a).ok());
  EXPECT_EQ(a.to_string(), "127.0.0.1:29500");
  ASSERT_TRUE(resolve_host_port("localhost:1", &a).ok());
  EXPECT_EQ(a.port, 1);
  ASSERT_TRUE(resolve_host_port("[::1]:7", &a).ok());
  EXPECT_EQ(a.to_string(), "[::1]:7");
  ASSERT_TRUE(resolve_host_port("[fe80::1%lo]:7", &a).ok());
  EXPECT_EQ(a.scope_id, if_nametoindex("lo"));
  for (const char* bad : {"", ":80", "10.0.0.1:port", "10.0.0.1:99999", "[::1", "[::1]80", "[10.0.0.1]:1",
                          "[fe80::1%no-such-if0]:1", "::1:80"}) {
    const NetStatus s = resolve_host_port(bad, &a);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message.find(std::string("\"") + bad + "\""), std::string::npos) << s.message;
  }
}

TEST(SocketAddress, KeepsTheScopeOfALinkLocalAddress) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(5);
  in6.sin6_addr.s6_addr[0] = 0xfe;
  in6.sin6_addr.s6_addr[1] = 0x80;
  in6.sin6_scope_id = 3;
  const SocketAddress a = SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&in6));
  EXPECT_EQ(a.scope_id, 3u);
  sockaddr_storage back;
  ASSERT_EQ(a.to_sockaddr(&back), sizeof(sockaddr_in6));
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(&back)->sin6_scope_id, 3u);
}

TEST(SocketCalls, ListenConnectAcceptSendReceiveOnLoopback) {
  FileDescriptor listener;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &listener).ok());
  const char* failed_call = nullptr;
  ASSERT_EQ(bind_and_listen(listener.get(), SocketAddress::loopback_ipv4(), 16, &failed_call), 0);
  const SocketAddress address = local_address_of(listener.get());
  ASSERT_NE(address.port, 0);

  // The port is taken: the bind says so, by its errno.
  FileDescriptor second;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &second).ok());
  EXPECT_EQ(bind_and_listen(second.get(), address, 16, &failed_call), EADDRINUSE);
  EXPECT_STREQ(failed_call, "bind");

  // Nothing pending yet: invalid, and no error.
  int accept_error = -1;
  EXPECT_FALSE(accept_connection(listener.get(), nullptr, &accept_error).valid());
  EXPECT_EQ(accept_error, 0);

  FileDescriptor client;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &client).ok());
  ASSERT_EQ(bind_local(client.get(), SocketAddress::loopback_ipv4()), 0);
  ASSERT_EQ(start_connect(client.get(), address), 0);
  const auto soon = Clock::now() + std::chrono::seconds(10);
  ASSERT_GT(wait_ready(client.get(), POLLOUT, soon), 0);
  EXPECT_EQ(connect_error(client.get()), 0);
  ASSERT_GT(wait_ready(listener.get(), POLLIN, soon), 0);
  SocketAddress peer;
  FileDescriptor server = accept_connection(listener.get(), &peer);
  ASSERT_TRUE(server.valid());
  EXPECT_EQ(peer.to_string(), local_address_of(client.get()).to_string());

  const std::string message(200000, 'x');
  EXPECT_EQ(send_fully(client.get(), message.data(), message.size(), soon), 0);
  client.reset();  // the end of the stream follows the bytes
  std::string inbox;
  bool open = true;
  while (open && Clock::now() < soon) {
    wait_ready(server.get(), POLLIN, soon);
    open = receive_available(server.get(), inbox);
  }
  EXPECT_FALSE(open);
  EXPECT_EQ(inbox, message);

  // A deadline already past: no wait.
  EXPECT_EQ(wait_ready(server.get(), POLLIN, Clock::now() - std::chrono::seconds(1)), 0);
}

// Out of descriptors (a wide all-to-all, a low `ulimit -n`): the error names the limit and
// the setting that multiplies sockets per connection. Run in a child, whose limit is lowered.
TEST(SocketCalls, RunningOutOfDescriptorsNamesTheLimitAndTheSocketsPerConnection) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(2);
    lim.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(2);
    std::vector<FileDescriptor> held;
    for (int i = 0; i < 100; ++i) {
      FileDescriptor fd;
      const NetStatus s = open_tcp_socket(AF_INET, &fd);
      if (!s.ok()) {
        const bool named = s.message.find("open-file limit (ulimit -n)") != std::string::npos &&
                           s.message.find("TOPOCOLL_NET_SOCKETS_PER_CONN") != std::string::npos;
        if (!named) std::fprintf(stderr, "message: %s\n", s.message.c_str());
        ::_exit(named ? 0 : 3);
      }
      held.push_back(std::move(fd));
    }
    ::_exit(4);  // never ran out
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setrlimit failed, 3: message without the hint, 4: no EMFILE";
}

TEST(SocketCalls, ARefusedConnectIsReportedByItsErrno) {
  // A port with no listener: bound, then closed again.
  FileDescriptor probe;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &probe).ok());
  ASSERT_EQ(bind_local(probe.get(), SocketAddress::loopback_ipv4()), 0);
  const SocketAddress nobody = local_address_of(probe.get());
  probe.reset();
  FileDescriptor client;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &client).ok());
  int err = start_connect(client.get(), nobody);
  if (err == 0) {
    ASSERT_GT(wait_ready(client.get(), POLLOUT, Clock::now() + std::chrono::seconds(10)), 0);
    err = connect_error(client.get());
  }
  EXPECT_EQ(err, ECONNREFUSED);
  // A send on it fails with the errno, not a timeout.
  const char byte = 0;
  const int sent = send_fully(client.get(), &byte, 1, Clock::now() + std::chrono::seconds(1));
  EXPECT_NE(sent, 0);
  EXPECT_NE(sent, kDeadlinePassed);
}

// A socket bound to a port and connected to that same address is connected to itself (a
// TCP simultaneous open Linux completes); a real pair is not.
TEST(SocketCalls, ASelfConnectionIsToldApartFromARealOne) {
  FileDescriptor self;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &self).ok());
  ASSERT_EQ(bind_local(self.get(), SocketAddress::loopback_ipv4()), 0);
  const SocketAddress own = local_address_of(self.get());
  ASSERT_EQ(start_connect(self.get(), own), 0);
  const auto soon = Clock::now() + std::chrono::seconds(10);
  ASSERT_GT(wait_ready(self.get(), POLLOUT, soon), 0);
  ASSERT_EQ(connect_error(self.get()), 0) << "the kernel refused the simultaneous open";
  EXPECT_TRUE(connected_to_itself(self.get()));

  FileDescriptor listener, client;
  ASSERT_TRUE(open_tcp_socket(AF_INET, &listener).ok());
  const char* failed_call = nullptr;
  ASSERT_EQ(bind_and_listen(listener.get(), SocketAddress::loopback_ipv4(), 4, &failed_call), 0);
  ASSERT_TRUE(open_tcp_socket(AF_INET, &client).ok());
  ASSERT_EQ(start_connect(client.get(), local_address_of(listener.get())), 0);
  ASSERT_GT(wait_ready(client.get(), POLLOUT, soon), 0);
  ASSERT_EQ(connect_error(client.get()), 0);
  EXPECT_FALSE(connected_to_itself(client.get()));
}

// Out of descriptors: accept fails with EMFILE, which the caller is told (a shortage that
// passes, so it backs off: the bootstrap root spun on a listener that stays readable and
// then blamed the ranks). In a child, whose descriptor limit is lowered.
TEST(SocketCalls, AcceptOutOfDescriptorsSaysSo) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    FileDescriptor listener, client;
    if (!open_tcp_socket(AF_INET, &listener).ok()) ::_exit(2);
    const char* failed_call = nullptr;
    if (bind_and_listen(listener.get(), SocketAddress::loopback_ipv4(), 16, &failed_call) != 0) ::_exit(3);
    if (!open_tcp_socket(AF_INET, &client).ok() || start_connect(client.get(), local_address_of(listener.get())) != 0)
      ::_exit(4);
    if (wait_ready(listener.get(), POLLIN, Clock::now() + std::chrono::seconds(10)) <= 0) ::_exit(5);
    const rlimit none_left{rlim_t(client.get() + 1), rlim_t(client.get() + 1)};  // no descriptor above the client's
    if (::setrlimit(RLIMIT_NOFILE, &none_left) != 0) ::_exit(6);
    int error = 0;
    const bool got = accept_connection(listener.get(), nullptr, &error).valid();
    ::_exit(!got && error == EMFILE && is_resource_shortage(error) ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: not EMFILE, or not a shortage; above 1: the set-up failed";
  EXPECT_FALSE(is_resource_shortage(ECONNRESET));
}

// A full table of sockets that have not said who they are: the newcomer crowds out the
// oldest silent one, never one whose hello waits unread or was partly read; the oldest of
// all only when each has sent something. One rule for the Listener, the bootstrap root and
// the eager channel (the latter two closed the oldest, which may be the real peer's).
TEST(SocketCalls, AFloodCrowdsOutTheOldestSilentSocketNotAPeerWhoseHelloWaits) {
  struct Waiting {
    FileDescriptor mine, theirs;
    size_t received = 0;
  };
  std::vector<Waiting> waiting(4);
  for (auto& w : waiting) {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    w.mine = FileDescriptor(pair[0]);
    w.theirs = FileDescriptor(pair[1]);
  }
  const auto fd_of = [](const Waiting& w) { return w.mine.get(); };
  const auto received_of = [](const Waiting& w) { return w.received; };
  ASSERT_EQ(::send(waiting[0].theirs.get(), "h", 1, 0), 1);  // the peer's hello, unread
  waiting[1].received = 3;                                    // a hello partly read
  EXPECT_EQ(socket_to_crowd_out(waiting, fd_of, received_of), 2u);
  EXPECT_FALSE(has_sent_nothing(waiting[0].mine.get(), 0));
  EXPECT_TRUE(has_sent_nothing(waiting[2].mine.get(), 0));
  for (size_t k = 2; k < waiting.size(); ++k) ASSERT_EQ(::send(waiting[k].theirs.get(), "x", 1, 0), 1);
  EXPECT_EQ(socket_to_crowd_out(waiting, fd_of, received_of), 0u) << "every one has bytes: the oldest";
}

}  // namespace
}  // namespace topocoll::net
