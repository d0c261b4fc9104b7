// The in-process transport's matching and failure behaviour: posting order per pair, a
// receive of the wrong size is an error on both sides, a missing peer times out instead of
// hanging, and a failure on one rank releases the others.
#include <gtest/gtest.h>

#include <thread>

#include "exec/backend.h"
#include "exec/in_process_transport.h"

namespace topocoll::exec {
namespace {

TEST(InProcessTransport, MatchesInPostingOrderPerPair) {
  InProcessFabric fabric(2);
  int a[3] = {1, 2, 3}, b[3] = {0, 0, 0};
  std::thread sender([&] {
    InProcessTransport t(fabric, 0);
    for (int& x : a) t.post_send(1, &x, sizeof x);
    t.wait_all();
  });
  InProcessTransport t(fabric, 1);
  for (int& x : b) t.post_recv(0, &x, sizeof x);
  t.wait_all();
  sender.join();
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 2);
  EXPECT_EQ(b[2], 3);
}

TEST(InProcessTransport, SizeMismatchFailsBothSides) {
  InProcessFabric fabric(2, std::chrono::seconds(5));
  char src[8] = {}, dst[4];
  bool sender_failed = false;
  std::thread sender([&] {
    InProcessTransport t(fabric, 0);
    t.post_send(1, src, 8);
    try {
      t.wait_all();
    } catch (const BackendError&) {
      sender_failed = true;
    }
  });
  InProcessTransport t(fabric, 1);
  try {
    t.post_recv(0, dst, 4);
    t.wait_all();
    ADD_FAILURE() << "expected a size mismatch";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("sends 8 bytes"), std::string::npos) << e.what();
  }
  sender.join();
  EXPECT_TRUE(sender_failed);
}

TEST(InProcessTransport, MissingPeerTimesOutAndNamesIt) {
  InProcessFabric fabric(3, std::chrono::milliseconds(200));
  InProcessTransport t(fabric, 0);
  char buf[4];
  t.post_recv(2, buf, 4);
  try {
    t.wait_all();
    FAIL() << "expected a timeout";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("receive from rank 2"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fabric.aborted());
  InProcessTransport other(fabric, 1);
  EXPECT_THROW(other.post_send(0, buf, 4), BackendError);
}

TEST(InProcessTransport, RejectsInvalidPeers) {
  InProcessFabric fabric(2);
  InProcessTransport t(fabric, 0);
  char buf[1];
  EXPECT_THROW(t.post_send(0, buf, 1), BackendError);
  EXPECT_THROW(t.post_recv(2, buf, 1), BackendError);
  EXPECT_THROW(InProcessTransport(fabric, 2), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::exec
