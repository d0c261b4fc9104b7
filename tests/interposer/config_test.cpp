// The interposer's view of its TOPOCOLL_* variables: the Env's values (config/env.h read and
// validated them; tests/config covers the grammar and the warnings) in the interposer's
// types, and TOPOCOLL_ALGO's names the same list on both sides.
#include <gtest/gtest.h>

#include <string>

#include "config/algorithm_names.h"
#include "config/env.h"
#include "plugin/interposer/interposer_config.h"
#include "sched/algorithm_registry.h"

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

// The routing fingerprint every rank's init record carries: each setting that decides what
// a served call issues changes it, settings that do not (plan cache size, step times, the
// init limit, the topology's path) leave it, and equal settings, however spelled, agree.
TEST(Config, RoutingFingerprintCoversTheSettingsThatDecideWhatACallIssues) {
  const uint64_t base = config_of({}).routing_fingerprint;
  EXPECT_NE(base, 0u);
  EXPECT_EQ(config_of({}).routing_fingerprint, base);
  const Values deciding[] = {
      {{"TOPOCOLL_ALGO", "hd"}},          {{"TOPOCOLL_ALGO", "nccl-topo-ring"}},
      {{"TOPOCOLL_MIN_BYTES", "64K"}},    {{"TOPOCOLL_MAX_BYTES", "1G"}},
      {{"TOPOCOLL_STEP_OVERHEAD_US", "12"}}, {{"TOPOCOLL_AUTO_MARGIN", "2"}},
      {{"TOPOCOLL_SCRATCH_MAX_BYTES", "1M"}}, {{"TOPOCOLL_RING_COMM", "lazy"}},
      {{"TOPOCOLL_RING_COMM", "off"}},     {{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "64K"}},
      {{"TOPOCOLL_PIPELINE_MAX_CHUNKS", "4"}}};
  for (const Values& v : deciding)
    EXPECT_NE(config_of(v).routing_fingerprint, base) << v.begin()->first << "=" << v.begin()->second;
  EXPECT_NE(config_of({{"TOPOCOLL_ALGO", "hd"}}).routing_fingerprint,
            config_of({{"TOPOCOLL_ALGO", "ring"}}).routing_fingerprint);
  const Values neutral[] = {{{"TOPOCOLL_PLAN_CACHE_BYTES", "16M"}}, {{"TOPOCOLL_STEP_TIMES", "1"}},
                            {{"TOPOCOLL_INIT_TIMEOUT_S", "30"}}, {{"TOPOCOLL_TOPO_FILE", "/tmp/other/path.json"}}};
  for (const Values& v : neutral)
    EXPECT_EQ(config_of(v).routing_fingerprint, base) << v.begin()->first << "=" << v.begin()->second;
  EXPECT_EQ(config_of({{"TOPOCOLL_MIN_BYTES", "65536"}}).routing_fingerprint,
            config_of({{"TOPOCOLL_MIN_BYTES", "64K"}}).routing_fingerprint);
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

// TOPOCOLL_ALGO is validated in one place (config/algorithm_names.h): its routes are the
// interposer's and back, every other name it accepts is an algorithm of the registry, and
// every algorithm of the registry is accepted, meaning what it means to the planner.
TEST(Config, EveryAlgoNameIsARouteOrARegisteredSchedule) {
  for (std::string_view name : config::route_names()) {
    auto a = parse_algo_choice(name);
    ASSERT_TRUE(a) << name;
    EXPECT_NE(*a, AlgoChoice::Schedule) << name;
    EXPECT_EQ(to_string(*a), name);
  }
  EXPECT_EQ(config::route_names().size(), std::size_t(AlgoChoice::Schedule)) << "a route without a name";
  std::size_t schedules = 0;
  for (std::string_view name : config::algorithm_names()) {
    auto a = parse_algo_choice(name);
    ASSERT_TRUE(a) << name;
    if (*a != AlgoChoice::Schedule) continue;
    ++schedules;
    ASSERT_NE(sched::find_algorithm(name), nullptr) << name;
    EXPECT_EQ(config_of({{"TOPOCOLL_ALGO", std::string(name)}}).schedule_algo, name);
  }
  EXPECT_EQ(schedules, sched::algorithms().size());
  EXPECT_EQ(config_of({{"TOPOCOLL_ALGO", "ring"}}).schedule_algo, "ring");  // rank order
  EXPECT_EQ(config_of({{"TOPOCOLL_ALGO", "ring-topo"}}).schedule_algo, "ring-topo");
  EXPECT_EQ(config_of({{"TOPOCOLL_ALGO", "nccl"}}).schedule_algo, "");
  EXPECT_FALSE(parse_algo_choice("HD"));
  EXPECT_FALSE(parse_algo_choice(""));
}

}  // namespace
}  // namespace topocoll::plugin::interposer
