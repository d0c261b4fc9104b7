// TOPOCOLL_* variables of the interposer: defaults, good values, and bad values that WARN
// naming the variable and keep the default.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "plugin/interposer/interposer_params.h"

namespace topocoll::plugin::interposer {
namespace {

// log.cpp reads NCCL_DEBUG once, at the first message: set it before any test logs.
const bool kDebugSet = [] {
  setenv("NCCL_DEBUG", "WARN", 1);
  return true;
}();

class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"TOPOCOLL_ENABLE", "TOPOCOLL_TOPO_FILE", "TOPOCOLL_ALGO", "TOPOCOLL_MIN_BYTES",
                          "TOPOCOLL_MAX_BYTES", "TOPOCOLL_STEP_OVERHEAD_US",
                          "TOPOCOLL_PLAN_CACHE_BYTES", "TOPOCOLL_AUTO_MARGIN",
                          "TOPOCOLL_SCRATCH_MAX_BYTES"})
      unsetenv(v);
  }
  // Reads the configuration and returns what was printed on stderr.
  static std::string read(InterposerConfig& out) {
    ::testing::internal::CaptureStderr();
    out = read_interposer_config();
    return ::testing::internal::GetCapturedStderr();
  }
};

TEST_F(Config, Defaults) {
  InterposerConfig c;
  EXPECT_EQ(read(c), "");
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.topo_file, "");
  EXPECT_EQ(c.algo, AlgoChoice::Auto);
  EXPECT_EQ(c.min_bytes, 0);
  EXPECT_EQ(c.max_bytes, INT64_MAX);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, 8.0);
  EXPECT_EQ(c.plan_cache_bytes, int64_t(256) << 20);
  EXPECT_DOUBLE_EQ(c.auto_margin, 1.3);
  EXPECT_EQ(c.scratch_max_bytes, int64_t(2) << 30);
}

TEST_F(Config, AutoMargin) {
  setenv("TOPOCOLL_AUTO_MARGIN", "2.5", 1);
  InterposerConfig c;
  EXPECT_EQ(read(c), "");
  EXPECT_DOUBLE_EQ(c.auto_margin, 2.5);
  for (const char* bad : {"0.9", "fast", "1.5x", "1000"}) {
    setenv("TOPOCOLL_AUTO_MARGIN", bad, 1);
    EXPECT_NE(read(c).find("TOPOCOLL_AUTO_MARGIN"), std::string::npos) << bad;
    EXPECT_DOUBLE_EQ(c.auto_margin, 1.3) << bad;
  }
}

TEST_F(Config, GoodValues) {
  setenv("TOPOCOLL_ENABLE", "0", 1);
  setenv("TOPOCOLL_TOPO_FILE", "/tmp/cluster.json", 1);
  setenv("TOPOCOLL_ALGO", "nccl-topo-ring", 1);
  setenv("TOPOCOLL_MIN_BYTES", "64K", 1);
  setenv("TOPOCOLL_MAX_BYTES", "1G", 1);
  setenv("TOPOCOLL_STEP_OVERHEAD_US", "12", 1);
  setenv("TOPOCOLL_PLAN_CACHE_BYTES", "16M", 1);
  setenv("TOPOCOLL_SCRATCH_MAX_BYTES", "512M", 1);
  InterposerConfig c;
  EXPECT_EQ(read(c), "");
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.topo_file, "/tmp/cluster.json");
  EXPECT_EQ(c.algo, AlgoChoice::NcclTopoRing);
  EXPECT_EQ(c.min_bytes, 64 << 10);
  EXPECT_EQ(c.max_bytes, int64_t(1) << 30);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, 12.0);
  EXPECT_EQ(c.plan_cache_bytes, int64_t(16) << 20);
  EXPECT_EQ(c.scratch_max_bytes, int64_t(512) << 20);
}

TEST_F(Config, EveryAlgoNameRoundTrips) {
  for (const char* name : {"auto", "nccl", "ring", "hd", "fc", "fc-direct", "hier", "nccl-topo-ring"}) {
    auto a = parse_algo_choice(name);
    ASSERT_TRUE(a) << name;
    EXPECT_EQ(to_string(*a), name);
  }
  EXPECT_EQ(schedule_algo_name(AlgoChoice::Hd), "hd");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::FcDirect), "fc-direct");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::Auto), "");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::NcclTopoRing), "");
  EXPECT_FALSE(parse_algo_choice("HD"));
  EXPECT_FALSE(parse_algo_choice(""));
}

TEST_F(Config, BadAlgoWarnsWithTheAcceptedValues) {
  setenv("TOPOCOLL_ALGO", "butterfly", 1);
  InterposerConfig c;
  const std::string err = read(c);
  EXPECT_EQ(c.algo, AlgoChoice::Auto);
  EXPECT_NE(err.find("NCCL WARN topocoll: TOPOCOLL_ALGO: unknown value \"butterfly\""), std::string::npos) << err;
  EXPECT_NE(err.find("auto, nccl, ring, hd, fc, fc-direct, hier, nccl-topo-ring"), std::string::npos) << err;
}

TEST_F(Config, BadEnableAndSizesWarnAndKeepDefaults) {
  setenv("TOPOCOLL_ENABLE", "maybe", 1);
  setenv("TOPOCOLL_MIN_BYTES", "12Q", 1);
  setenv("TOPOCOLL_MAX_BYTES", "-5", 1);
  setenv("TOPOCOLL_STEP_OVERHEAD_US", "-1", 1);
  InterposerConfig c;
  const std::string err = read(c);
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.min_bytes, 0);
  EXPECT_EQ(c.max_bytes, INT64_MAX);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, 8.0);
  EXPECT_NE(err.find("TOPOCOLL_ENABLE: expected 0/1"), std::string::npos) << err;
  EXPECT_NE(err.find("TOPOCOLL_MIN_BYTES: expected a size like 4096, 64K, 1M or 2G, got \"12Q\""),
            std::string::npos) << err;
  EXPECT_NE(err.find("TOPOCOLL_MAX_BYTES: expected a size"), std::string::npos) << err;
  EXPECT_NE(err.find("TOPOCOLL_STEP_OVERHEAD_US: value -1 out of range"), std::string::npos) << err;
}

TEST_F(Config, MinAboveMaxIsRejectedAsAPair) {
  setenv("TOPOCOLL_MIN_BYTES", "1M", 1);
  setenv("TOPOCOLL_MAX_BYTES", "4K", 1);
  InterposerConfig c;
  const std::string err = read(c);
  EXPECT_EQ(c.min_bytes, 0);
  EXPECT_EQ(c.max_bytes, INT64_MAX);
  EXPECT_NE(err.find("TOPOCOLL_MIN_BYTES (1048576) is larger than TOPOCOLL_MAX_BYTES (4096)"),
            std::string::npos) << err;
}

}  // namespace
}  // namespace topocoll::plugin::interposer
