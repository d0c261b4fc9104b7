// One cable round's flows over loopback: a flow of several connections is sent and measured
// in the same call, while strangers connect to the listener (a port scanner, another run's
// straggler) — connections accepted in the middle of a poll pass must wait for the next
// pass, and strays are closed without touching the measurement.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "accept/flow_probe.h"

namespace topocoll::accept {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<FlowTask> loop_flow(const FlowListener& listener, int streams) {
  FlowTask send;
  send.flow = 0;
  send.sending = true;
  send.local_address = "127.0.0.1";
  send.peer_address = "127.0.0.1";
  send.peer_port = listener.port();
  send.bytes = int64_t(1) << 30;  // a cap: the window ends the flow first
  send.streams = streams;
  send.expected_gbps = 0.5;  // small send buffers: little left in flight when the window ends
  FlowTask receive = send;
  receive.sending = false;
  return {send, receive};
}

void expect_measured(const std::vector<FlowOutcome>& out) {
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].sending);
  EXPECT_EQ(out[0].error, "");
  EXPECT_TRUE(out[0].complete);
  EXPECT_GT(out[0].bytes, 0);
  EXPECT_GE(out[0].connect_us, 0);
  EXPECT_FALSE(out[1].sending);
  EXPECT_EQ(out[1].error, "");
  EXPECT_TRUE(out[1].complete);
  EXPECT_GT(out[1].rate_gbps, 0);
  // Strays' bytes are not counted.
  EXPECT_LE(out[1].bytes, out[0].bytes);
  EXPECT_GT(out[1].bytes, 0);
}

TEST(FlowProbe, AFlowOfManyConnectionsToItselfIsMeasured) {
  FlowListener listener("127.0.0.1");
  for (int streams : {1, 8, 16}) {
    SCOPED_TRACE(streams);
    expect_measured(run_flow_round(listener, 3, 77, loop_flow(listener, streams),
                                   Clock::now() + std::chrono::milliseconds(300)));
  }
}

TEST(FlowProbe, StrangersConnectingDuringTheRoundAreClosedAndTheFlowStillMeasures) {
  FlowListener listener("127.0.0.1");
  std::atomic<bool> stop{false};
  std::atomic<int> strays{0};
  std::thread scanner([&] {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(listener.port()));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    FlowHeader wrong_run;
    wrong_run.run = 78;
    while (!stop) {
      // Bursts of several at once, so one poll pass accepts more than it polled.
      int fds[6];
      for (int& fd : fds) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
          static const char http[] = "GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n";  // a header's length and more
          if (strays % 2) ::send(fd, http, sizeof http, MSG_NOSIGNAL);
          else ::send(fd, &wrong_run, sizeof wrong_run, MSG_NOSIGNAL);
          ++strays;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (int fd : fds) ::close(fd);
    }
  });
  const auto out = run_flow_round(listener, 3, 77, loop_flow(listener, 8),
                                  Clock::now() + std::chrono::milliseconds(400));
  stop = true;
  scanner.join();
  EXPECT_GT(strays.load(), 0);
  expect_measured(out);
}

}  // namespace
}  // namespace topocoll::accept
