// The interposer's view of its TOPOCOLL_* variables: the Env's values (config/env.h read and
// validated them; tests/config covers the grammar and the warnings) in the interposer's
// types, and TOPOCOLL_ALGO's names the same list on both sides.
#include <gtest/gtest.h>

#include <string>

#include "config/algorithm_names.h"
#include "config/env.h"
#include "plugin/interposer/interposer_config.h"

namespace topocoll::plugin::interposer {
namespace {

using Values = std::map<std::string, std::string, std::less<>>;

InterposerConfig config_of(const Values& values) { return interposer_config_from(config::read_env(values)); }

TEST(Config, DefaultsAreTheTablesAndTheStructsAlike) {
  const InterposerConfig c = config_of({});
  const InterposerConfig plain;
  EXPECT_EQ(c.enable, plain.enable);
  EXPECT_EQ(c.topo_file, plain.topo_file);
  EXPECT_EQ(c.algo, plain.algo);
  EXPECT_EQ(c.min_bytes, plain.min_bytes);
  EXPECT_EQ(c.max_bytes, plain.max_bytes);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, plain.step_overhead_us);
  EXPECT_EQ(c.plan_cache_bytes, plain.plan_cache_bytes);
  EXPECT_DOUBLE_EQ(c.auto_margin, plain.auto_margin);
  EXPECT_EQ(c.scratch_max_bytes, plain.scratch_max_bytes);
  EXPECT_EQ(c.ring_comm, plain.ring_comm);
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.algo, AlgoChoice::Auto);
  EXPECT_EQ(c.max_bytes, INT64_MAX);
  EXPECT_DOUBLE_EQ(c.auto_margin, 1.3);
  EXPECT_EQ(c.ring_comm, RingCommMode::Init);
}

TEST(Config, GoodValues) {
  const InterposerConfig c = config_of({{"TOPOCOLL_ENABLE", "0"},
                                        {"TOPOCOLL_TOPO_FILE", "/tmp/cluster.json"},
                                        {"TOPOCOLL_ALGO", "nccl-topo-ring"},
                                        {"TOPOCOLL_MIN_BYTES", "64K"},
                                        {"TOPOCOLL_MAX_BYTES", "1G"},
                                        {"TOPOCOLL_STEP_OVERHEAD_US", "12"},
                                        {"TOPOCOLL_PLAN_CACHE_BYTES", "16M"},
                                        {"TOPOCOLL_SCRATCH_MAX_BYTES", "512MiB"},
                                        {"TOPOCOLL_AUTO_MARGIN", "2.5"},
                                        {"TOPOCOLL_RING_COMM", "lazy"}});
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.topo_file, "/tmp/cluster.json");
  EXPECT_EQ(c.algo, AlgoChoice::NcclTopoRing);
  EXPECT_EQ(c.min_bytes, 64 << 10);
  EXPECT_EQ(c.max_bytes, int64_t(1) << 30);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, 12.0);
  EXPECT_EQ(c.plan_cache_bytes, int64_t(16) << 20);
  EXPECT_EQ(c.scratch_max_bytes, int64_t(512) << 20);
  EXPECT_DOUBLE_EQ(c.auto_margin, 2.5);
  EXPECT_EQ(c.ring_comm, RingCommMode::Lazy);
  EXPECT_EQ(config_of({{"TOPOCOLL_RING_COMM", "off"}}).ring_comm, RingCommMode::Off);
}

TEST(Config, BadValuesKeepTheDefaults) {
  const InterposerConfig c = config_of({{"TOPOCOLL_ENABLE", "maybe"},
                                        {"TOPOCOLL_ALGO", "butterfly"},
                                        {"TOPOCOLL_MIN_BYTES", "12Q"},
                                        {"TOPOCOLL_STEP_OVERHEAD_US", "-1"},
                                        {"TOPOCOLL_AUTO_MARGIN", "1.5x"}});
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.algo, AlgoChoice::Auto);
  EXPECT_EQ(c.min_bytes, 0);
  EXPECT_DOUBLE_EQ(c.step_overhead_us, 8.0);
  EXPECT_DOUBLE_EQ(c.auto_margin, 1.3);
}

// TOPOCOLL_ALGO is validated in one place (config/algorithm_names.h); every name it accepts
// is one of the interposer's choices and back.
TEST(Config, EveryAlgoNameRoundTrips) {
  std::size_t choices = 0;
  for (std::string_view name : config::algorithm_names()) {
    auto a = parse_algo_choice(name);
    ASSERT_TRUE(a) << name;
    EXPECT_EQ(to_string(*a), name);
    ++choices;
  }
  EXPECT_EQ(choices, std::size_t(AlgoChoice::NcclTopoRing) + 1) << "an AlgoChoice without a name";
  EXPECT_EQ(schedule_algo_name(AlgoChoice::Hd), "hd");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::FcDirect), "fc-direct");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::Auto), "");
  EXPECT_EQ(schedule_algo_name(AlgoChoice::NcclTopoRing), "");
  EXPECT_FALSE(parse_algo_choice("HD"));
  EXPECT_FALSE(parse_algo_choice(""));
}

}  // namespace
}  // namespace topocoll::plugin::interposer
