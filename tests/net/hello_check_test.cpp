// net/hello_check.h: each field of a connecting socket's hello that does not fit the
// listener's handle is named with the value expected, so the stray-connection WARN says
// which side is misbuilt or misconfigured.
#include "net/hello_check.h"

#include <gtest/gtest.h>

namespace topocoll::net {
namespace {

struct HelloCheck : ::testing::Test {
  Handle listener;
  Hello hello;
  void SetUp() override {
    listener.sockets = 4;
    listener.listener_nonce = 77;
    hello.version = kProtocolVersion;
    hello.sockets = 4;
    hello.socket_index = 3;
    hello.listener_nonce = 77;
    hello.chunk_bytes = 512 * 1024;
    hello.min_stripe_bytes = 65536;
  }
};

TEST_F(HelloCheck, AHelloOfThisListenersConnectionPasses) { EXPECT_EQ(hello_problem(hello, listener), ""); }

TEST_F(HelloCheck, EachWrongFieldIsNamedWithWhatWasExpected) {
  Hello h = hello;
  h.magic = 0x11223344;
  EXPECT_EQ(hello_problem(h, listener).rfind("not a topocoll transport (magic 0x11223344", 0), 0u);
  h = hello;
  h.version = kProtocolVersion + 1;
  EXPECT_EQ(hello_problem(h, listener), "speaks protocol version 2, this side version 1");
  h = hello;
  h.listener_nonce = 78;
  EXPECT_EQ(hello_problem(h, listener), "carries the handle of another listener");
  h = hello;
  h.sockets = 2;
  h.socket_index = 1;
  EXPECT_EQ(hello_problem(h, listener), "says its connection has 2 sockets, the listener's handle 4");
  h = hello;
  h.socket_index = 4;
  EXPECT_EQ(hello_problem(h, listener), "claims socket 4 of a connection of 4");
  h = hello;
  h.chunk_bytes = 100;
  h.min_stripe_bytes = 1;
  EXPECT_EQ(hello_problem(h, listener), "stripes in chunks of 100 bytes, outside 4096..67108864");
  h = hello;
  h.min_stripe_bytes = 0;
  EXPECT_EQ(hello_problem(h, listener), "stripes in pieces of at least 0 bytes, outside 1..its chunk (524288)");
}

}  // namespace
}  // namespace topocoll::net
