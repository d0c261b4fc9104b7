// The eager channel (exec/eager_channel.h) against a scripted peer on loopback: a process
// that learned the job's nonce and says a valid hello still cannot grow a rank's memory,
// hold off its no-progress timeout, take the place of a rank already connected, or have
// its doings blamed on the rank it claims to be.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "exec/backend.h"
#include "exec/eager_channel.h"
#include "tests/common/scripted_eager_peer.h"

namespace topocoll::exec {
namespace {

using testing_support::ScriptedEagerPeer;
using Clock = std::chrono::steady_clock;

// Rank 0 of `nranks` on loopback; every peer's listener named (nobody listens there: the
// tests only receive).
struct Rank0 {
  std::vector<std::string> warnings;
  EagerChannel channel;
  explicit Rank0(int nranks)
      : channel(0, nranks, net::SocketAddress::loopback_ipv4(), 0, 60000,
                [this](const std::string& w) { warnings.push_back(w); }) {
    std::vector<EagerChannel::Address> peers(nranks);
    for (int r = 0; r < nranks; ++r) peers[r].address = net::SocketAddress::loopback_ipv4(uint16_t(9000 + r));
    channel.set_peers(peers);
  }
};

// Moves what the channel can until it throws (returns the error) or `safety` passes ("").
std::string drive_until_error(EagerChannel& c, std::chrono::seconds safety) {
  const auto end = Clock::now() + safety;
  try {
    while (Clock::now() < end) {
      if (!c.progress()) c.wait(50);
    }
  } catch (const BackendError& e) {
    return e.what();
  }
  return "";
}

TEST(EagerChannel, AFloodOfClearToSendsNobodyAskedForIsAProtocolErrorNamingItsAddress) {
  // The relay of the issue: first on rank 0's eager port as "rank 3", then clear-to-sends
  // as fast as it can while rank 0 waits for a message from rank 3. Before, each was kept
  // (24 MB -> 168 MB in 40 s) and counted as progress.
  Rank0 r(4);
  std::vector<char> buf(64);
  r.channel.post_recv(3, buf.data(), buf.size());
  ScriptedEagerPeer relay(r.channel.local());
  ASSERT_TRUE(relay.valid());
  ASSERT_TRUE(relay.hello(3, r.channel.local().nonce));
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    while (!stop && relay.clear_to_send(1 << 20)) {
    }
  });
  const std::string error = drive_until_error(r.channel, std::chrono::seconds(30));
  stop = true;
  ::shutdown(relay.fd(), SHUT_RDWR);  // ends a send blocked on a full socket
  flood.join();
  EXPECT_NE(error.find("protocol error"), std::string::npos) << error;
  EXPECT_NE(error.find("clear-to-send frames no send of this rank asked for"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 3 (eager connection from " + relay.address() + ")"), std::string::npos) << error;
}

TEST(EagerChannel, AClearToSendNoSendAwaitsIsNotProgressButIsKeptForTheSend) {
  Rank0 r(4);
  std::vector<char> buf(8);
  r.channel.post_recv(3, buf.data(), buf.size());
  ScriptedEagerPeer peer(r.channel.local());
  ASSERT_TRUE(peer.hello(3, r.channel.local().nonce));
  const auto end = Clock::now() + std::chrono::seconds(10);
  bool connected = false;  // identifying the peer is progress
  while (!connected && Clock::now() < end) {
    connected = r.channel.progress();
    if (!connected) r.channel.wait(50);
  }
  ASSERT_TRUE(connected);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(peer.clear_to_send(100000));
  r.channel.wait(1000);  // until they are readable
  EXPECT_FALSE(r.channel.progress()) << "early clear-to-sends counted as progress";
  r.channel.expect_clear_to_send(3);
  EXPECT_TRUE(r.channel.take_clear_to_send(3, 100000));
}

TEST(EagerChannel, ASecondConnectionClaimingAConnectedRankIsRefusedNamingBothAddresses) {
  Rank0 r(4);
  std::vector<char> first_message(8, 0), second(8, 0);
  r.channel.post_recv(3, first_message.data(), 8);
  r.channel.post_recv(2, second.data(), 8);  // rank 2 never connects: rank 0 keeps accepting
  ScriptedEagerPeer rank3(r.channel.local());
  ASSERT_TRUE(rank3.hello(3, r.channel.local().nonce));
  ASSERT_TRUE(rank3.header(eager_wire::kMessageMagic, 8));
  ASSERT_TRUE(rank3.write("rank3 ok", 8));
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (std::string(first_message.data(), 8) != "rank3 ok" && Clock::now() < end)
    if (!r.channel.progress()) r.channel.wait(50);
  ASSERT_EQ(std::string(first_message.data(), 8), "rank3 ok");

  ScriptedEagerPeer impostor(r.channel.local());
  ASSERT_TRUE(impostor.hello(3, r.channel.local().nonce));
  const std::string error = drive_until_error(r.channel, std::chrono::seconds(30));
  EXPECT_NE(error.find("two eager connections claim rank 3: from " + rank3.address() + " (first) and from " +
                       impostor.address() + " (refused)"),
            std::string::npos)
      << error;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find(impostor.address()), std::string::npos) << r.warnings[0];
}

TEST(EagerChannel, AClosedConnectionIsNamedByItsAddressAsWellAsTheRankItClaimed) {
  // A relay that claimed rank 3 and left: the error must say where it came from, not just
  // blame rank 3.
  Rank0 r(4);
  std::vector<char> buf(8);
  r.channel.post_recv(3, buf.data(), buf.size());
  std::string relay_address;
  {
    ScriptedEagerPeer relay(r.channel.local());
    ASSERT_TRUE(relay.hello(3, r.channel.local().nonce));
    relay_address = relay.address();
  }
  const std::string error = drive_until_error(r.channel, std::chrono::seconds(30));
  EXPECT_NE(error.find("the eager connection from " + relay_address + " that claimed rank 3 closed"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace topocoll::exec
