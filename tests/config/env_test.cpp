// The table of environment variables and the Env read from it: every row complete and its
// default valid by its own grammar, values read from a map, and each bad value one warning
// naming the variable, the value, what was expected and what is used instead.
#include <gtest/gtest.h>

#include <climits>
#include <set>
#include <string>

#include "config/algorithm_names.h"
#include "config/env.h"
#include "config/local_host.h"

namespace topocoll::config {
namespace {

using Values = std::map<std::string, std::string, std::less<>>;

TEST(EnvTable, EveryVariableHasADocLineAndAValidDefault) {
  std::set<std::string_view> names;
  for (const EnvVariable& v : env_variables()) {
    SCOPED_TRACE(std::string(v.name));
    EXPECT_TRUE(names.insert(v.name).second) << "listed twice";
    EXPECT_FALSE(v.doc.empty());
    EXPECT_EQ(v.name.starts_with("TOPOCOLL_"), v.owner == Owner::Topocoll);
    if (!v.default_value.empty()) {
      const ParsedEnvValue parsed = parse_env_value(v, v.default_value);
      EXPECT_FALSE(std::holds_alternative<std::monostate>(parsed.value)) << parsed.expected;
      EXPECT_TRUE(v.unset_means.empty()) << "a default says what unset means";
    } else if (v.owner == Owner::Topocoll && v.grammar != Grammar::Text) {
      EXPECT_FALSE(v.unset_means.empty()) << "unset with no default must say what it does";
    }
    if (v.grammar == Grammar::Choice) {
      EXPECT_FALSE(v.choices.empty());
    }
    if (v.grammar == Grammar::Count || v.grammar == Grammar::Size) {
      EXPECT_LE(v.min, v.max);
    }
    EXPECT_EQ(find_env_variable(v.name), &v);
  }
  EXPECT_EQ(find_env_variable("TOPOCOLL_NO_SUCH_THING"), nullptr);
}

TEST(EnvTable, TopocollAlgoAcceptsExactlyTheAlgorithmNames) {
  const EnvVariable* algo = find_env_variable("TOPOCOLL_ALGO");
  ASSERT_NE(algo, nullptr);
  ASSERT_EQ(algo->choices.size(), algorithm_names().size());
  for (std::string_view name : algorithm_names())
    EXPECT_TRUE(std::holds_alternative<std::string>(parse_env_value(*algo, name).value)) << name;
}

TEST(EnvRead, NothingSetGivesTheDefaultsAndNoWarning) {
  const Env e = read_env(Values{});
  EXPECT_TRUE(e.warnings.empty());
  EXPECT_EQ(e.settings.size(), env_variables().size());
  EXPECT_EQ(e.topo_file, "");
  EXPECT_TRUE(e.enable);
  EXPECT_EQ(e.algo, "auto");
  EXPECT_EQ(e.min_bytes, 0);
  EXPECT_EQ(e.max_bytes, INT64_MAX);
  EXPECT_EQ(e.step_overhead_us, 8);
  EXPECT_DOUBLE_EQ(e.auto_margin, 1.3);
  EXPECT_EQ(e.scratch_max_bytes, int64_t(2) << 30);
  EXPECT_EQ(e.plan_cache_bytes, int64_t(256) << 20);
  EXPECT_EQ(e.ring_comm, "init");
  EXPECT_FALSE(e.pipeline_chunk_bytes);
  EXPECT_EQ(e.pipeline_max_chunks, 8);
  EXPECT_TRUE(e.tuner);
  EXPECT_FALSE(e.net_sockets_per_conn) << "unset: each face has its own default (net/transport_options.h)";
  EXPECT_FALSE(e.net_threads) << "unset: each face has its own default (net/transport_options.h)";
  EXPECT_EQ(e.net_timeout_ms, 60000);
  EXPECT_EQ(e.net_chunk_bytes, 512 << 10);
  EXPECT_EQ(e.net_min_stripe_bytes, 64 << 10);
  EXPECT_EQ(e.net_eager_bytes, 1 << 20);
  EXPECT_TRUE(e.net_rendezvous);
  EXPECT_TRUE(e.net_lane_marks.empty());
  EXPECT_FALSE(e.bootstrap_served);
  EXPECT_EQ(e.master_port, "29500");
  EXPECT_EQ(e.fabric_state_dir, "/run/topocoll/fabric");
  EXPECT_FALSE(e.setting("TOPOCOLL_RANK").is_set());
  EXPECT_THROW(e.setting("TOPOCOLL_NO_SUCH_THING"), std::out_of_range);
}

TEST(EnvRead, ValuesComeFromTheMapTrimmed) {
  const Env e = read_env(Values{{"TOPOCOLL_TOPO_FILE", " /tmp/cluster.json\n"},
                                {"TOPOCOLL_ENABLE", "off"},
                                {"TOPOCOLL_ALGO", "nccl-topo-ring"},
                                {"TOPOCOLL_MIN_BYTES", "64K"},
                                {"TOPOCOLL_MAX_BYTES", "1G"},
                                {"TOPOCOLL_STEP_OVERHEAD_US", "12"},
                                {"TOPOCOLL_AUTO_MARGIN", "2.5"},
                                {"TOPOCOLL_PLAN_CACHE_BYTES", "16MiB"},
                                {"TOPOCOLL_PIPELINE_CHUNK_BYTES", "0"},
                                {"TOPOCOLL_NET_LANE_MARKS", "256,0x101"},
                                {"NCCL_HOSTID", " s3 "},
                                {"TOPOCOLL_NET_IFNAME", "   "}});
  EXPECT_TRUE(e.warnings.empty());
  EXPECT_EQ(e.topo_file, "/tmp/cluster.json");
  EXPECT_FALSE(e.enable);
  EXPECT_EQ(e.algo, "nccl-topo-ring");
  EXPECT_EQ(e.min_bytes, 64 << 10);
  EXPECT_EQ(e.max_bytes, int64_t(1) << 30);
  EXPECT_EQ(e.step_overhead_us, 12);
  EXPECT_DOUBLE_EQ(e.auto_margin, 2.5);
  EXPECT_EQ(e.plan_cache_bytes, 16 << 20);
  ASSERT_TRUE(e.pipeline_chunk_bytes);
  EXPECT_EQ(*e.pipeline_chunk_bytes, 0);
  EXPECT_EQ(e.net_lane_marks, (std::vector<uint32_t>{256, 257}));
  EXPECT_EQ(e.nccl_hostid, "s3");
  EXPECT_FALSE(e.setting("TOPOCOLL_NET_IFNAME").is_set()) << "only whitespace is unset";
  EXPECT_EQ(local_host(e).name, "s3");
  EXPECT_STREQ(local_host(e).source, "NCCL_HOSTID");
  const Env both = read_env(Values{{"NCCL_HOSTID", "s3"}, {"TOPOCOLL_HOSTNAME", "s4.cluster"}});
  EXPECT_EQ(local_host(both).name, "s4.cluster");
  EXPECT_STREQ(local_host(both).source, "TOPOCOLL_HOSTNAME");
  EXPECT_STREQ(local_host(read_env(Values{})).source, "gethostname()");
}

// TOPOCOLL_SCRATCH_MAX_BYTES=2GiB warned while `--bytes 2GiB` worked.
TEST(EnvRead, ByteVariablesTakeEverySizeUnit) {
  const Env e = read_env(Values{{"TOPOCOLL_SCRATCH_MAX_BYTES", "2GiB"}, {"TOPOCOLL_NET_CHUNK_BYTES", "1MB"},
                                {"TOPOCOLL_MIN_BYTES", "4kib"}});
  EXPECT_TRUE(e.warnings.empty()) << e.warnings.front();
  EXPECT_EQ(e.scratch_max_bytes, int64_t(2) << 30);
  EXPECT_EQ(e.net_chunk_bytes, 1 << 20);
  EXPECT_EQ(e.min_bytes, 4096);
}

// TOPOCOLL_NET_RENDEZVOUS=yes was refused while other switches took yes/true.
TEST(EnvRead, EverySwitchTakesEveryBooleanSpelling) {
  for (const EnvVariable& v : env_variables()) {
    if (v.grammar != Grammar::Bool) continue;
    for (const char* yes : {"yes", "true", "on", "1", "YES"}) {
      const Env e = read_env(Values{{std::string(v.name), yes}});
      EXPECT_TRUE(e.warnings.empty()) << v.name << "=" << yes;
      EXPECT_EQ(std::get<bool>(e.setting(v.name).value), true) << v.name << "=" << yes;
    }
    const Env off = read_env(Values{{std::string(v.name), "no"}});
    EXPECT_EQ(std::get<bool>(off.setting(v.name).value), false) << v.name;
  }
  EXPECT_TRUE(read_env(Values{{"TOPOCOLL_NET_RENDEZVOUS", "yes"}}).net_rendezvous);
  EXPECT_FALSE(read_env(Values{{"TOPOCOLL_NET_RENDEZVOUS", "no"}}).net_rendezvous);
  EXPECT_TRUE(read_env(Values{{"TOPOCOLL_BOOTSTRAP_SERVED", "true"}}).bootstrap_served);
}

TEST(EnvRead, ABadValueIsOneWarningNamingValueExpectationAndReplacement) {
  const Env e = read_env(Values{{"TOPOCOLL_NET_RENDEZVOUS", "maybe"},
                                {"TOPOCOLL_SCRATCH_MAX_BYTES", "2XiB"},
                                {"TOPOCOLL_MAX_BYTES", "-5"},
                                {"TOPOCOLL_ALGO", "butterfly"},
                                {"TOPOCOLL_NET_TIMEOUT_MS", "60K"}});
  ASSERT_EQ(e.warnings.size(), 5u);
  // The routes, then whatever algorithms registered (none here: this test links config/
  // alone; tests/sched/algorithm_registry_test.cpp checks the full list).
  std::string names;
  for (std::string_view name : algorithm_names()) names += (names.empty() ? "" : ", ") + std::string(name);
  EXPECT_EQ(e.warnings[0], "TOPOCOLL_ALGO=\"butterfly\": expected one of " + names + "; using auto");
  EXPECT_EQ(names.rfind("auto, nccl, nccl-topo-ring", 0), 0u) << names;
  EXPECT_EQ(e.warnings[1],
            "TOPOCOLL_MAX_BYTES=\"-5\": expected a size (like 4096, 64K or 2GiB); using the default (unlimited)");
  EXPECT_EQ(e.warnings[2],
            "TOPOCOLL_SCRATCH_MAX_BYTES=\"2XiB\": expected a size (like 4096, 64K or 2GiB); using 2G");
  EXPECT_EQ(e.warnings[3], "TOPOCOLL_NET_TIMEOUT_MS=\"60K\": expected an integer from 1 to 86400000; using 60000");
  EXPECT_EQ(e.warnings[4],
            "TOPOCOLL_NET_RENDEZVOUS=\"maybe\": expected 1/0, true/false, yes/no or on/off; using 1");
  EXPECT_EQ(e.algo, "auto");
  EXPECT_EQ(e.scratch_max_bytes, int64_t(2) << 30);
  EXPECT_EQ(e.max_bytes, INT64_MAX);
  EXPECT_EQ(e.net_timeout_ms, 60000);
  EXPECT_TRUE(e.net_rendezvous);
  EXPECT_EQ(e.setting("TOPOCOLL_NET_RENDEZVOUS").problem, e.warnings[4]);
}

// LOCAL_RANK=abc silently became GPU 0.
TEST(EnvRead, ALauncherGpuThatIsNotANumberWarns) {
  const Env e = read_env(Values{{"LOCAL_RANK", "abc"}});
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_EQ(e.warnings[0],
            "LOCAL_RANK=\"abc\": expected an integer from 0 to 4095; using the default (the next launcher "
            "variable, else GPU 0)");
}

// TOPOCOLL_RANK=" 0" was accepted and "0 " refused.
TEST(EnvRead, RanksAreTrimmedAndABadOneIsRefusedNotReplaced) {
  for (const char* text : {" 0", "0 ", "\t0\n"}) {
    const Env e = read_env(Values{{"TOPOCOLL_RANK", text}});
    EXPECT_TRUE(e.setting("TOPOCOLL_RANK").problem.empty()) << '"' << text << '"';
    EXPECT_EQ(std::get<int64_t>(e.setting("TOPOCOLL_RANK").value), 0);
  }
  const Env bad = read_env(Values{{"TOPOCOLL_RANK", "x1"}, {"SLURM_NTASKS", "0"}});
  EXPECT_TRUE(bad.warnings.empty()) << "refused values are the reader's error, not a warning";
  EXPECT_EQ(bad.setting("TOPOCOLL_RANK").problem, "TOPOCOLL_RANK=\"x1\": expected an integer from 0 to 2147483647");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(bad.setting("TOPOCOLL_RANK").value));
  EXPECT_EQ(bad.setting("SLURM_NTASKS").problem, "SLURM_NTASKS=\"0\": expected an integer from 1 to 2147483647");
  EXPECT_EQ(bad.first_set({"TOPOCOLL_NRANKS", "SLURM_NTASKS"}), &bad.setting("SLURM_NTASKS"));
  EXPECT_EQ(bad.first_set({"TOPOCOLL_NRANKS", "PMI_SIZE"}), nullptr);
}

TEST(EnvRead, MinBytesAboveMaxBytesIsRejectedAsAPair) {
  const Env e = read_env(Values{{"TOPOCOLL_MIN_BYTES", "1M"}, {"TOPOCOLL_MAX_BYTES", "4K"}});
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_EQ(e.warnings[0],
            "TOPOCOLL_MIN_BYTES (1M) is larger than TOPOCOLL_MAX_BYTES (4K); using neither (0 and unlimited)");
  EXPECT_EQ(e.min_bytes, 0);
  EXPECT_EQ(e.max_bytes, INT64_MAX);
}

TEST(EnvRead, PipelineChunkIsZeroOrInRange) {
  const Env e = read_env(Values{{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "1K"}, {"TOPOCOLL_PIPELINE_MAX_CHUNKS", "65"}});
  ASSERT_EQ(e.warnings.size(), 2u);
  EXPECT_EQ(e.warnings[0],
            "TOPOCOLL_PIPELINE_CHUNK_BYTES=\"1K\": expected 0 (off) or a size from 64K to 1G (like 4096, 64K or "
            "2GiB); using the default (4M on the NCCL backend, 0 (off) on the host backend)");
  EXPECT_FALSE(e.pipeline_chunk_bytes);
  EXPECT_EQ(e.pipeline_max_chunks, 8);
  EXPECT_EQ(*read_env(Values{{"TOPOCOLL_PIPELINE_CHUNK_BYTES", "64K"}}).pipeline_chunk_bytes, 64 << 10);
}

TEST(EnvRead, ControlCharactersInAValueAreShownEscaped) {
  const Env e = read_env(Values{{"TOPOCOLL_TUNER", "o\x1bn"}});
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_NE(e.warnings[0].find("TOPOCOLL_TUNER=\"o\\x1bn\""), std::string::npos) << e.warnings[0];
}

}  // namespace
}  // namespace topocoll::config
