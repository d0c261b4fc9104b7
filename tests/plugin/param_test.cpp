// TOPOCOLL_* parameter parsing: good values parse, bad values are rejected with a message
// naming what was expected, and the env readers fall back to the default on bad input.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plugin/param.h"

namespace topocoll::plugin {
namespace {

TEST(ParamParse, IntegersWithinRange) {
  std::string err;
  EXPECT_EQ(parse_int("42", 0, 100, &err), 42);
  EXPECT_EQ(parse_int("-3", -5, 5, &err), -3);
  EXPECT_FALSE(parse_int("101", 0, 100, &err));
  EXPECT_NE(err.find("out of range [0, 100]"), std::string::npos) << err;
  EXPECT_FALSE(parse_int("12abc", 0, 100, &err));
  EXPECT_NE(err.find("expected an integer"), std::string::npos) << err;
  EXPECT_FALSE(parse_int("", 0, 100, &err));
}

TEST(ParamParse, BytesWithSuffixes) {
  std::string err;
  EXPECT_EQ(parse_bytes("4096", &err), 4096);
  EXPECT_EQ(parse_bytes("64K", &err), 64 << 10);
  EXPECT_EQ(parse_bytes("1m", &err), 1 << 20);
  EXPECT_EQ(parse_bytes("2G", &err), int64_t(2) << 30);
  EXPECT_FALSE(parse_bytes("K", &err));
  EXPECT_FALSE(parse_bytes("-1K", &err));
  EXPECT_FALSE(parse_bytes("1T", &err));
  EXPECT_NE(err.find("expected a size"), std::string::npos) << err;
}

TEST(ParamParse, Booleans) {
  std::string err;
  EXPECT_EQ(parse_bool("1", &err), true);
  EXPECT_EQ(parse_bool("off", &err), false);
  EXPECT_FALSE(parse_bool("maybe", &err));
  EXPECT_NE(err.find("maybe"), std::string::npos);
}

TEST(ParamEnv, BadValueFallsBackToDefault) {
  ::setenv("TOPOCOLL_TEST_PARAM_INT", "lots", 1);
  EXPECT_EQ(param_int("TOPOCOLL_TEST_PARAM_INT", 7, 0, 10), 7);
  ::setenv("TOPOCOLL_TEST_PARAM_INT", "9", 1);
  EXPECT_EQ(param_int("TOPOCOLL_TEST_PARAM_INT", 7, 0, 10), 9);
  ::setenv("TOPOCOLL_TEST_PARAM_CHOICE", "tree", 1);
  EXPECT_EQ(param_choice("TOPOCOLL_TEST_PARAM_CHOICE", "auto", {"auto", "ring", "hd"}), "auto");
  ::setenv("TOPOCOLL_TEST_PARAM_CHOICE", "hd", 1);
  EXPECT_EQ(param_choice("TOPOCOLL_TEST_PARAM_CHOICE", "auto", {"auto", "ring", "hd"}), "hd");
  ::unsetenv("TOPOCOLL_TEST_PARAM_INT");
  EXPECT_EQ(param_bytes("TOPOCOLL_TEST_PARAM_INT", 123), 123);
}

}  // namespace
}  // namespace topocoll::plugin
