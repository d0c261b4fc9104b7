// The tuner driven through its exported structs exactly as NCCL 2.28 drives them
// (src/plugin/tuner*.cc there): init with a logger, getCollInfo on cost tables, finalize /
// destroy. A fake logger captures what the plugin says.
#include <gtest/gtest.h>

#include <functional>

#include <chrono>

#include <fstream>

#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "plugin/nccl_api/tuner_v2.h"
#include "plugin/nccl_api/tuner_v3.h"
#include "plugin/nccl_api/tuner_v4.h"
#include "config/env.h"
#include "plugin/nccl_api/tuner_v5.h"
#include "plugin/process_context.h"
#include "plugin/split_placements.h"
#include "plugin/tuner/communicator_fit.h"
#include "plugin/tuner/topology_tuner.h"
#include "plugin/tuner/tuner_api_mapping.h"
#include "sched/nccl_algorithm_model.h"
#include "sched/placement.h"
#include "sched/ring_order.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"
#include "tests/common/failing_allocation.h"
#include "tests/common/scratch_dir.h"

extern "C" {
extern ncclTuner_v5_t ncclTunerPlugin_v5;
extern ncclTuner_v4_t ncclTunerPlugin_v4;
extern ncclTuner_v3_t ncclTunerPlugin_v3;
extern ncclTuner_v2_t ncclTunerPlugin_v2;
}

namespace topocoll::plugin::tuner {
namespace {

constexpr int A = kNumAlgorithms, P = kNumProtocols;
using Table = float[A][P];

struct Logged {
  ncclDebugLogLevel level;
  unsigned long flags;
  std::string text;
};
std::mutex g_log_mutex;
std::vector<Logged> g_log;

void fake_logger(ncclDebugLogLevel level, unsigned long flags, const char* /*file*/, int /*line*/,
                 const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_log.push_back({level, flags, buf});
}

std::vector<Logged> logged(ncclDebugLogLevel level, const std::string& containing) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::vector<Logged> out;
  for (const auto& l : g_log)
    if (l.level == level && l.text.find(containing) != std::string::npos) out.push_back(l);
  return out;
}

using testing_support::example_path;
using testing_support::ScratchDir;
std::string data(const std::string& name) {
  return std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/tuner/" + name;
}

// NCCL 2.28's default constants, as ncclTopoInitTunerConstants hands them to v5's init.
ncclTunerConstants_v5_t nccl_constants() {
  ncclTunerConstants_v5_t c{};
  sched::NcclLatencies d = sched::default_nccl_latencies();
  for (int a = 0; a < A; ++a)
    for (int p = 0; p < P; ++p) {
      c.baseLatencies[a][p] = d.base[a][p];
      c.hwLatencies[0][a][p] = d.intra_host[a][p];
      c.hwLatencies[2][a][p] = d.inter_host[a][p];
    }
  return c;
}

// A table as NCCL 2.28 fills it for one GPU per node: Ring everywhere, Tree for allreduce,
// PAT Simple for allgather/reduce-scatter, NVLS off. Placeholder times.
void nccl_table(Table& t, ncclFunc_t coll) {
  for (int a = 0; a < A; ++a)
    for (int p = 0; p < P; ++p) t[a][p] = float(NCCL_ALGO_PROTO_IGNORE);
  for (int p = 0; p < P; ++p) t[NCCL_ALGO_RING][p] = 100.0f + p;
  if (coll == ncclFuncAllReduce)
    for (int p = 0; p < P; ++p) t[NCCL_ALGO_TREE][p] = 110.0f + p;
  if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter)
    t[NCCL_ALGO_PAT][NCCL_PROTO_SIMPLE] = 120.0f;
}

bool same(const Table& a, const Table& b) {
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < P; ++j)
      if (std::memcmp(&a[i][j], &b[i][j], sizeof(float)) != 0) return false;
  return true;
}

// NCCL's choice from a table: the smallest enabled entry (among those `allowed` lets by).
std::pair<int, int> pick(const Table& t, const std::function<bool(int, int)>& allowed = {}) {
  std::pair<int, int> best{-1, -1};
  float time = 0;
  for (int a = 0; a < A; ++a)
    for (int p = 0; p < P; ++p)
      if (t[a][p] >= 0 && (!allowed || allowed(a, p)) && (best.first < 0 || t[a][p] < time)) {
        best = {a, p};
        time = t[a][p];
      }
  return best;
}

// Each test runs the tuner in the process context of the environment it gives (the
// process's own is read once; plugin/process_context.h lets a test stand in for it).
class TunerPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    use_env({});
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.clear();
  }
  void TearDown() override {
    scope_.reset();
    context_.reset();
  }
  void use_env(const std::map<std::string, std::string, std::less<>>& values) {
    scope_.reset();
    context_.emplace(make_process_context(config::read_env(values)));
    scope_.emplace(*context_);
  }
  const ProcessContext& context() const { return *context_; }

  std::optional<ProcessContext> context_;
  std::optional<ScopedProcessContext> scope_;

  void* init_v5(size_t nranks, size_t nnodes) {
    void* ctx = nullptr;
    ncclNvlDomainInfo_v5_t nvl{int(nnodes), 1, 1};
    ncclTunerConstants_v5_t constants = nccl_constants();
    EXPECT_EQ(ncclTunerPlugin_v5.init(&ctx, 0x1234, nranks, nnodes, fake_logger, &nvl, &constants),
              ncclSuccess);
    EXPECT_NE(ctx, nullptr) << "a context even when the tuner does nothing";
    return ctx;
  }
  // Runs getCollInfo on an NCCL-like table; returns whether the table changed.
  bool changes(void* ctx, ncclFunc_t coll, size_t bytes, Table& t) {
    nccl_table(t, coll);
    Table before;
    std::memcpy(before, t, sizeof t);
    int channels = 0;
    EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(t), A, P,
                                             0, &channels),
              ncclSuccess);
    EXPECT_EQ(channels, 0) << "nChannels is left to NCCL";
    return !same(before, t);
  }
  void expect_no_change(void* ctx) {
    for (ncclFunc_t c : {ncclFuncAllReduce, ncclFuncAllGather, ncclFuncReduceScatter, ncclFuncBroadcast})
      for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(1) << 30}) {
        Table t;
        EXPECT_FALSE(changes(ctx, c, bytes, t)) << collective_name(c) << " " << bytes;
      }
  }
};

TEST_F(TunerPlugin, StructsCarryTheNameAndEveryEntryPoint) {
  for (const char* name : {ncclTunerPlugin_v5.name, ncclTunerPlugin_v4.name, ncclTunerPlugin_v3.name,
                           ncclTunerPlugin_v2.name})
    EXPECT_STREQ(name, "topocoll");
  EXPECT_TRUE(ncclTunerPlugin_v5.init && ncclTunerPlugin_v5.getCollInfo && ncclTunerPlugin_v5.finalize);
  EXPECT_TRUE(ncclTunerPlugin_v4.init && ncclTunerPlugin_v4.getCollInfo && ncclTunerPlugin_v4.destroy);
  EXPECT_TRUE(ncclTunerPlugin_v3.init && ncclTunerPlugin_v3.getCollInfo && ncclTunerPlugin_v3.destroy);
  EXPECT_TRUE(ncclTunerPlugin_v2.init && ncclTunerPlugin_v2.getCollInfo && ncclTunerPlugin_v2.destroy);
}

TEST_F(TunerPlugin, NoTopologyChangesNothingAndSaysSoOnce) {
  void* a = init_v5(11, 11);
  void* b = init_v5(11, 11);
  expect_no_change(a);
  EXPECT_EQ(logged(NCCL_LOG_INFO, "TOPOCOLL_TOPO_FILE is not set").size(), 1u);
  EXPECT_TRUE(logged(NCCL_LOG_WARN, "").empty());
  EXPECT_EQ(ncclTunerPlugin_v5.finalize(a), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.finalize(b), ncclSuccess);
}

// A topology file this rank cannot load fails NCCL's init with ncclInvalidUsage and a WARN
// naming the file and why: changing nothing here while ranks on hosts that read the file tune
// their tables would have ranks pick different algorithms and hang.
TEST_F(TunerPlugin, BrokenTopologyFilesFailTheInitNamingTheFile) {
  for (const std::string& file : {data("truncated.json"), data("unknown-switch.json"),
                                  data("does-not-exist.json")}) {
    SCOPED_TRACE(file);
    use_env({{"TOPOCOLL_TOPO_FILE", file}});
    void* ctx = reinterpret_cast<void*>(0x1);
    ncclTunerConstants_v5_t constants = nccl_constants();
    EXPECT_EQ(ncclTunerPlugin_v5.init(&ctx, 0x1234, 32, 32, fake_logger, nullptr, &constants), ncclInvalidUsage);
    EXPECT_EQ(ctx, nullptr);
    auto warns = logged(NCCL_LOG_WARN, file);
    ASSERT_EQ(warns.size(), 1u);
    EXPECT_NE(warns[0].text.find("refused: this rank would keep NCCL's cost tables while ranks that read the file "
                                 "tune theirs"),
              std::string::npos)
        << warns[0].text;
  }
  EXPECT_FALSE(logged(NCCL_LOG_WARN, "/servers/3/nics/0/switch: unknown switch \"U9\"").empty());
  EXPECT_FALSE(logged(NCCL_LOG_WARN, "invalid JSON").empty());
}

// NCCL passes numPipeOps, the collectives of a group that share one launch (enqueue.cc
// divUp(nTasksColl, nChannels)): a ring pays its latency once per op, the other algorithms
// once per batch of ten (tuning.cc ncclTopoGetAlgoTime), and the tuned table says so.
TEST_F(TunerPlugin, GroupedCollectivesPayTheRingsLatencyPerOpAndTheTreesPerBatch) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* ctx = init_v5(32, 32);
  auto tuned = [&](int pipe_ops) {
    Table t;
    nccl_table(t, ncclFuncAllReduce);
    int channels = 0;
    EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 4096, pipe_ops, reinterpret_cast<float**>(t),
                                             A, P, 0, &channels),
              ncclSuccess);
    return std::vector<float>{t[NCCL_ALGO_RING][NCCL_PROTO_LL], t[NCCL_ALGO_TREE][NCCL_PROTO_LL]};
  };
  const std::vector<float> one = tuned(1), two = tuned(2), three = tuned(3), ten = tuned(10), eleven = tuned(11);
  ASSERT_GT(one[0], 0.0f);
  ASSERT_GT(one[1], 0.0f);
  const float ring_latency = two[0] - one[0];
  EXPECT_GT(ring_latency, 0.0f);
  EXPECT_NEAR(three[0] - one[0], 2 * ring_latency, 1e-3 * three[0]);
  EXPECT_FLOAT_EQ(two[1], one[1]);   // one batch
  EXPECT_FLOAT_EQ(ten[1], one[1]);
  EXPECT_GT(eleven[1], one[1]);      // two batches
  ncclTunerPlugin_v5.finalize(ctx);
}

// A one-rank communicator: NCCL's table has Ring/Simple at 0 alone (enqueue.cc); the tuner
// leaves it so.
TEST_F(TunerPlugin, AOneRankCommunicatorsTableIsLeftAlone) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* ctx = init_v5(1, 1);
  for (ncclFunc_t coll : {ncclFuncAllReduce, ncclFuncAllGather, ncclFuncBroadcast}) {
    Table t;
    for (int a = 0; a < A; ++a)
      for (int p = 0; p < P; ++p) t[a][p] = float(NCCL_ALGO_PROTO_IGNORE);
    t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 0.0f;
    Table before;
    std::memcpy(before, t, sizeof t);
    int channels = 0;
    EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, coll, 1 << 20, 1, reinterpret_cast<float**>(t), A, P, 0, &channels),
              ncclSuccess);
    EXPECT_TRUE(same(before, t)) << collective_name(coll);
  }
  ncclTunerPlugin_v5.finalize(ctx);
}

// A bad value is the Env's one warning (config/env.h), and the default (on) is used, as
// for every variable.
TEST_F(TunerPlugin, BadSettingIsAWarningOfTheEnvAndTheDefaultIsUsed) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {"TOPOCOLL_TUNER", "sometimes"}});
  ASSERT_EQ(context().env.warnings.size(), 1u);
  EXPECT_EQ(context().env.warnings[0],
            "TOPOCOLL_TUNER=\"sometimes\": expected 1/0, true/false, yes/no or on/off; using 1");
  void* ctx = init_v5(32, 32);
  Table t;
  EXPECT_TRUE(changes(ctx, ncclFuncAllReduce, size_t(256) << 20, t));
  ncclTunerPlugin_v5.finalize(ctx);
}

// The tuner models the topology the process context loaded once: the one the interposer and
// the net plugin of the process use too, not a copy it loaded itself.
TEST_F(TunerPlugin, ModelsTheProcessContextsTopology) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  ASSERT_NE(context().topology, nullptr) << context().topology_error;
  const auto tuner = TopologyTuner::create(32, 32, nullptr);
  ASSERT_TRUE(tuner && tuner->active());
  EXPECT_EQ(tuner->topology(), context().topology.get());
}

TEST_F(TunerPlugin, SwitchedOffChangesNothing) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {"TOPOCOLL_TUNER", "off"}});
  void* ctx = init_v5(32, 32);
  expect_no_change(ctx);
  EXPECT_FALSE(logged(NCCL_LOG_INFO, "TOPOCOLL_TUNER=0").empty());
  ncclTunerPlugin_v5.finalize(ctx);
}

TEST_F(TunerPlugin, NcclAlgoOrProtoSetChangesNothing) {
  for (const char* var : {"NCCL_ALGO", "NCCL_PROTO"}) {
    SCOPED_TRACE(var);
    use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {var, "Ring"}});
    void* ctx = init_v5(32, 32);
    expect_no_change(ctx);
    EXPECT_FALSE(logged(NCCL_LOG_INFO, std::string(var) + "=Ring is set").empty());
    ncclTunerPlugin_v5.finalize(ctx);
  }
}

TEST_F(TunerPlugin, CommunicatorTheTopologyDoesNotDescribeIsLeftAlone) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* ctx = init_v5(16, 16);
  expect_no_change(ctx);
  EXPECT_EQ(logged(NCCL_LOG_INFO, "does not describe it").size(), 1u);
  ncclTunerPlugin_v5.finalize(ctx);
}

// NCCL 2.28's v5 init says how many ranks its smallest and largest node hold: 128 ranks on
// 16 nodes of bigraph-16x8 (8 GPUs each) with 7 to 9 per node match the counts but not the
// hosts, and are left alone; 8 on every node are tuned.
TEST_F(TunerPlugin, NodesHoldingDifferentRankCountsAreLeftAlone) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-16x8")}});
  ncclTunerConstants_v5_t constants = nccl_constants();
  void* uneven = nullptr;
  ncclNvlDomainInfo_v5_t seven_to_nine{16, 7, 9};
  ASSERT_EQ(ncclTunerPlugin_v5.init(&uneven, 1, 128, 16, fake_logger, &seven_to_nine, &constants), ncclSuccess);
  expect_no_change(uneven);
  EXPECT_EQ(logged(NCCL_LOG_INFO, "its nodes hold 7 to 9 ranks").size(), 1u);
  ncclTunerPlugin_v5.finalize(uneven);
  void* even = nullptr;
  ncclNvlDomainInfo_v5_t eight{16, 8, 8};
  ASSERT_EQ(ncclTunerPlugin_v5.init(&even, 2, 128, 16, fake_logger, &eight, &constants), ncclSuccess);
  Table t;
  EXPECT_TRUE(changes(even, ncclFuncAllReduce, size_t(1) << 20, t) || changes(even, ncclFuncAllReduce, 8, t))
      << "8 ranks on every node: tuned";
  EXPECT_EQ(logged(NCCL_LOG_INFO, "tuning NCCL's algorithms for 128 ranks on 16 nodes").size(), 1u);
  ncclTunerPlugin_v5.finalize(even);
}

TEST_F(TunerPlugin, ACommunicatorOnTheJobsHostsIsTuned) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")},
           {"TOPOCOLL_TUNER_HOSTS", "s0,s1,s2,s3,s4,s5,s6,s7,s8,s9,s10,s11,s12,s13,s14,s15"}});
  void* ctx = init_v5(16, 16);
  EXPECT_EQ(logged(NCCL_LOG_INFO, "does not describe it").size(), 0u);
  EXPECT_EQ(logged(NCCL_LOG_INFO, "tuning NCCL's algorithms for 16 ranks on 16 nodes").size(), 1u);
  ncclTunerPlugin_v5.finalize(ctx);
}

// A wrong list leaves the ranks' hosts unknown: nothing is tuned, not even a communicator
// over the whole topology (which without a list would be tuned in the file's host order).
TEST_F(TunerPlugin, AJobHostTheTopologyLacksIsNamedAndNothingIsTuned) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {"TOPOCOLL_TUNER_HOSTS", "s0,s99"}});
  void* ctx = init_v5(32, 32);
  expect_no_change(ctx);
  EXPECT_EQ(logged(NCCL_LOG_WARN, "TOPOCOLL_TUNER_HOSTS names host \"s99\", which topology \"bigraph-32\" does "
                                  "not have: the ranks' hosts are unknown; the tuner changes nothing").size(),
            1u);
  ncclTunerPlugin_v5.finalize(ctx);
}

// A list that names no host (",") was taken for no list, and the whole topology tuned in
// its file's order: the launcher meant a numbering, which is unknown.
TEST_F(TunerPlugin, AHostListNamingNoHostIsAnErrorNotAnUnsetList) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {"TOPOCOLL_TUNER_HOSTS", " , "}});
  void* ctx = init_v5(32, 32);
  expect_no_change(ctx);
  EXPECT_EQ(logged(NCCL_LOG_WARN, "TOPOCOLL_TUNER_HOSTS=\",\" names no host: the ranks' hosts are unknown; the "
                                  "tuner changes nothing").size(),
            1u);
  ncclTunerPlugin_v5.finalize(ctx);
}

// NCCL needs every rank to pick the same algorithm. A rank out of host memory while it builds
// the model or tunes a call must not be left with NCCL's own table while its peers tune:
// init fails (no context), or the call fails with NCCL's table untouched; every allocation
// that does not fail leaves the result as without the failure.
TEST_F(TunerPlugin, RunningOutOfMemoryFailsRatherThanTuneUnlikeThePeers) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  const std::vector<std::pair<ncclFunc_t, size_t>> calls = {
      {ncclFuncAllReduce, size_t(256) << 20}, {ncclFuncAllGather, 4096}, {ncclFuncReduceScatter, size_t(1) << 20}};
  auto tables_of = [&](void* ctx) {
    std::vector<std::vector<float>> out;
    for (const auto& [coll, bytes] : calls) {
      Table t;
      changes(ctx, coll, bytes, t);
      out.emplace_back(&t[0][0], &t[0][0] + A * P);
    }
    return out;
  };
  void* normal_ctx = init_v5(32, 32);
  const auto normal = tables_of(normal_ctx);
  ncclTunerPlugin_v5.finalize(normal_ctx);

  for (const bool persistent : {false, true}) {
    SCOPED_TRACE(persistent ? "every allocation from the k-th on fails" : "the k-th allocation fails");
    int init_failed = 0, tried = 0;
    for (long k = 1;; ++k) {
      void* ctx = reinterpret_cast<void*>(0x1);
      ncclNvlDomainInfo_v5_t nvl{32, 1, 1};
      ncclTunerConstants_v5_t constants = nccl_constants();
      ncclResult_t r = ncclSuccess;
      const bool reached = testing::with_allocation_failing(
          k, persistent, [&] { r = ncclTunerPlugin_v5.init(&ctx, 0x1234, 32, 32, fake_logger, &nvl, &constants); });
      if (!reached) {
        ncclTunerPlugin_v5.finalize(ctx);
        break;
      }
      ++tried;
      if (r != ncclSuccess) {
        EXPECT_EQ(r, ncclSystemError) << "allocation " << k;
        EXPECT_EQ(ctx, nullptr) << "allocation " << k;
        ++init_failed;
        continue;
      }
      ASSERT_NE(ctx, nullptr);
      EXPECT_EQ(tables_of(ctx), normal) << "allocation " << k << " failed and the tuner tunes otherwise";
      ncclTunerPlugin_v5.finalize(ctx);
    }
    EXPECT_GT(tried, 10);
    EXPECT_GT(init_failed, 0);
  }

  // Tuning a call: the first of a size bucket is logged (allocating); the model's predictions
  // allocate nothing today, but a failure there must fail the call, not leave NCCL's table.
  void* ctx = init_v5(32, 32);
  int call_reached = 0;
  for (const bool persistent : {false, true}) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto [coll, bytes] = calls[i];
      for (long k = 1;; ++k) {
        Table t, untouched;
        nccl_table(t, coll);
        nccl_table(untouched, coll);
        int channels = 0;
        ncclResult_t r = ncclSuccess;
        const bool reached = testing::with_allocation_failing(k, persistent, [&] {
          r = ncclTunerPlugin_v5.getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(t), A, P, 0, &channels);
        });
        const std::vector<float> got(&t[0][0], &t[0][0] + A * P);
        if (r != ncclSuccess) {
          EXPECT_EQ(r, ncclSystemError);
          EXPECT_TRUE(same(t, untouched)) << "a failed call leaves NCCL's table as it was";
        } else {
          EXPECT_EQ(got, normal[i]) << collective_name(coll) << " allocation " << k;
        }
        if (!reached) break;
        ++call_reached;
      }
    }
  }
  EXPECT_GT(call_reached, 0) << "the first call of a bucket logs: some failure must reach it";
  ncclTunerPlugin_v5.finalize(ctx);
}

// The table after the tuner follows the model: NCCL then picks the model's fastest entry.
void expect_follows_model(const std::string& name, ncclFunc_t coll, size_t bytes, const Table& t) {
  auto topology = topo::load_topology_file(example_path(name));
  auto fit = fit_communicator(topology, topology.endpoints().size(), topology.hosts().size());
  ASSERT_TRUE(fit.placement);
  sched::NcclAlgorithmModel model(topology, *fit.placement, int(topology.hosts().size()),
                                  sched::default_nccl_latencies());
  Table expect;
  nccl_table(expect, coll);
  for (int a = 0; a < A; ++a)
    for (int p = 0; p < P; ++p)
      if (expect[a][p] >= 0) {
        auto us = predict_us(model, coll, a, p, double(bytes));
        ASSERT_TRUE(us) << "every entry of this table is one the model knows";
        expect[a][p] = float(*us);
      }
  EXPECT_EQ(pick(t), pick(expect));
}

struct Expectation {
  const char* topology;
  ncclFunc_t coll;
  size_t bytes;
  int algo, proto;  // what the model says NCCL should run
};

TEST_F(TunerPlugin, ChoicesFollowTheModelOnBigraphAndNap) {
  // The interesting ones: on bigraph-32 NCCL's rank-order ring shares inter-group links
  // (worst load 4), so for large allreduce the double binary tree wins; on bigraph-16x8 the
  // ring leaves each 8-GPU server once, uncongested, and wins as NCCL expects. Small sizes
  // take LL everywhere; allgather uses PAT's log steps while they are latency-bound.
  const Expectation cases[] = {
      {"bigraph-32", ncclFuncAllReduce, 4096, NCCL_ALGO_TREE, NCCL_PROTO_LL},
      {"bigraph-32", ncclFuncAllReduce, size_t(256) << 20, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE},
      {"bigraph-32", ncclFuncAllGather, 4096, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE},
      {"bigraph-32", ncclFuncAllGather, size_t(256) << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
      {"bigraph-32", ncclFuncBroadcast, 1024, NCCL_ALGO_RING, NCCL_PROTO_LL},
      {"bigraph-32", ncclFuncBroadcast, size_t(64) << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
      {"bigraph-16x8", ncclFuncAllReduce, 4096, NCCL_ALGO_TREE, NCCL_PROTO_LL},
      {"bigraph-16x8", ncclFuncAllReduce, size_t(1) << 30, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
      {"nap-4x8", ncclFuncAllReduce, 4096, NCCL_ALGO_TREE, NCCL_PROTO_LL},
      {"nap-4x8", ncclFuncAllReduce, size_t(256) << 20, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE},
      {"nap-4x8", ncclFuncReduceScatter, size_t(1) << 30, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.topology) + " " + collective_name(c.coll) + " " + std::to_string(c.bytes));
    use_env({{"TOPOCOLL_TOPO_FILE", example_path(c.topology)}});
    auto topology = topo::load_topology_file(example_path(c.topology));
    void* ctx = init_v5(topology.endpoints().size(), topology.hosts().size());
    Table t;
    EXPECT_TRUE(changes(ctx, c.coll, c.bytes, t));
    for (int a = 0; a < A; ++a)
      for (int p = 0; p < P; ++p) {
        Table fresh;
        nccl_table(fresh, c.coll);
        if (fresh[a][p] < 0) {
          EXPECT_EQ(t[a][p], float(NCCL_ALGO_PROTO_IGNORE));
        }
      }
    expect_follows_model(c.topology, c.coll, c.bytes, t);
    EXPECT_EQ(pick(t), std::make_pair(c.algo, c.proto))
        << "picked " << sched::nccl_algorithm_name(pick(t).first) << "/"
        << sched::nccl_protocol_name(pick(t).second);
    ncclTunerPlugin_v5.finalize(ctx);
  }
}

// The interposer's topology-ordered split has its parent's counts and another rank order.
// While it is being made (its placement registered, split_placements.h), NCCL's tuner models
// that order: on bigraph-32 the ring in topology order shares no inter-group link, and wins
// over the tree that the rank-order ring's congestion gives the parent. Two different splits
// of the same counts at once: which one NCCL tunes is unknown, and nothing is changed.
TEST_F(TunerPlugin, TheInterposersSplitIsTunedInItsOwnRankOrder) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  const auto topology = topo::load_topology_file(example_path("bigraph-32"));
  const sched::Placement parent = sched::first_endpoints(topology, 32);
  const std::vector<int> order = sched::topology_aware_ring(topology, parent);
  std::vector<int> split;
  for (int user_rank : order) split.push_back(parent.endpoint_of_rank[std::size_t(user_rank)]);
  const size_t big = size_t(256) << 20;
  Table t;
  void* plain = init_v5(32, 32);
  EXPECT_TRUE(changes(plain, ncclFuncAllReduce, big, t));
  EXPECT_EQ(pick(t).first, NCCL_ALGO_TREE) << "the parent, in rank order";
  ncclTunerPlugin_v5.finalize(plain);
  {
    const SplitPlacements::Scope making({split});
    void* ctx = init_v5(32, 32);
    EXPECT_TRUE(changes(ctx, ncclFuncAllReduce, big, t));
    EXPECT_EQ(pick(t), std::make_pair(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE))
        << "picked " << sched::nccl_algorithm_name(pick(t).first);
    EXPECT_EQ(logged(NCCL_LOG_INFO, "32 ranks on 32 nodes, the interposer's topology-ordered split").size(), 1u);
    ncclTunerPlugin_v5.finalize(ctx);
  }
  std::vector<int> other = split;
  std::swap(other[1], other[2]);
  {
    const SplitPlacements::Scope making({split, other});
    void* ctx = init_v5(32, 32);
    expect_no_change(ctx);
    EXPECT_EQ(logged(NCCL_LOG_INFO, "one of several topology-ordered splits").size(), 1u);
    ncclTunerPlugin_v5.finalize(ctx);
  }
  // Gone with its scope: the next communicator of these counts is the parent's kind again.
  void* after = init_v5(32, 32);
  EXPECT_TRUE(changes(after, ncclFuncAllReduce, big, t));
  EXPECT_EQ(pick(t).first, NCCL_ALGO_TREE);
  ncclTunerPlugin_v5.finalize(after);
}

// A wrong TOPOCOLL_TUNER_HOSTS leaves the interposer's splits untuned too, and is said even
// when the job makes nothing but splits.
TEST_F(TunerPlugin, AWrongHostListLeavesTheInterposersSplitUntunedToo) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}, {"TOPOCOLL_TUNER_HOSTS", "s0,s99"}});
  const auto topology = topo::load_topology_file(example_path("bigraph-32"));
  const sched::Placement parent = sched::first_endpoints(topology, 32);
  std::vector<int> split;
  for (int user_rank : sched::topology_aware_ring(topology, parent))
    split.push_back(parent.endpoint_of_rank[std::size_t(user_rank)]);
  const SplitPlacements::Scope making({split});
  void* ctx = init_v5(32, 32);
  expect_no_change(ctx);
  EXPECT_EQ(logged(NCCL_LOG_WARN, "\"s99\", which topology \"bigraph-32\" does not have").size(), 1u);
  ncclTunerPlugin_v5.finalize(ctx);
}

TEST_F(TunerPlugin, DisabledEntriesAreNeverReEnabled) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("nap-4x8")}});
  void* ctx = init_v5(32, 32);
  for (ncclFunc_t coll : {ncclFuncAllReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                          ncclFuncBroadcast, ncclFuncReduce})
    for (size_t bytes = 1; bytes < (size_t(1) << 34); bytes *= 8) {
      // NCCL_PROTO=^LL style: one protocol off everywhere, and only PAT left for gathers.
      Table t;
      nccl_table(t, coll);
      for (int a = 0; a < A; ++a) t[a][NCCL_PROTO_LL] = float(NCCL_ALGO_PROTO_IGNORE);
      t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = float(NCCL_ALGO_PROTO_IGNORE);
      Table before;
      std::memcpy(before, t, sizeof t);
      int channels = 0;
      ASSERT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(t), A,
                                               P, 0, &channels),
                ncclSuccess);
      for (int a = 0; a < A; ++a)
        for (int p = 0; p < P; ++p) {
          if (before[a][p] < 0) {
            EXPECT_EQ(t[a][p], float(NCCL_ALGO_PROTO_IGNORE));
          } else {
            EXPECT_GE(t[a][p], 0.0f);
          }
        }
    }
  ncclTunerPlugin_v5.finalize(ctx);
}

TEST_F(TunerPlugin, EachDecisionIsLoggedOncePerCollectiveAndSizeBucket) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* ctx = init_v5(32, 32);
  Table t;
  changes(ctx, ncclFuncAllReduce, 1 << 20, t);
  changes(ctx, ncclFuncAllReduce, (1 << 20) + 4096, t);  // same power-of-two bucket
  changes(ctx, ncclFuncAllReduce, 1 << 21, t);
  changes(ctx, ncclFuncAllGather, 1 << 20, t);
  auto decisions = logged(NCCL_LOG_INFO, "on the topology");
  ASSERT_EQ(decisions.size(), 3u);
  for (const auto& d : decisions) EXPECT_TRUE(d.flags & NCCL_TUNING) << d.text;
  EXPECT_NE(decisions[0].text.find("AllReduce 1MB-2MB"), std::string::npos) << decisions[0].text;
  EXPECT_NE(decisions[2].text.find("AllGather"), std::string::npos) << decisions[2].text;
  ncclTunerPlugin_v5.finalize(ctx);
}

TEST_F(TunerPlugin, OlderVersionsTuneTheSameWay) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* c5 = init_v5(32, 32);
  void *c4 = nullptr, *c3 = nullptr, *c2 = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v4.init(32, 32, fake_logger, &c4), ncclSuccess);
  ASSERT_EQ(ncclTunerPlugin_v3.init(32, 32, fake_logger, &c3), ncclSuccess);
  ASSERT_EQ(ncclTunerPlugin_v2.init(32, 32, fake_logger, &c2), ncclSuccess);
  for (ncclFunc_t coll : {ncclFuncAllReduce, ncclFuncAllGather, ncclFuncBroadcast})
    for (size_t bytes : {size_t(4096), size_t(1) << 20, size_t(1) << 28}) {
      SCOPED_TRACE(std::string(collective_name(coll)) + " " + std::to_string(bytes));
      Table t5, t4, t3;
      changes(c5, coll, bytes, t5);
      nccl_table(t4, coll);
      nccl_table(t3, coll);
      int ch = 0;
      ASSERT_EQ(ncclTunerPlugin_v4.getCollInfo(c4, coll, bytes, 1, reinterpret_cast<float**>(t4), A, P, 1, &ch),
                ncclSuccess);
      // v3 on an NCCL without PAT: 6 algorithms.
      float t3_6[6][P];
      for (int a = 0; a < 6; ++a)
        for (int p = 0; p < P; ++p) t3_6[a][p] = t3[a][p];
      ASSERT_EQ(ncclTunerPlugin_v3.getCollInfo(c3, coll, bytes, 1, reinterpret_cast<float**>(t3_6), 6, P, &ch),
                ncclSuccess);
      EXPECT_TRUE(same(t5, t4));
      for (int a = 0; a < 6; ++a)
        for (int p = 0; p < P; ++p) EXPECT_EQ(t3_6[a][p], t5[a][p]);

      // v2 answers with a choice, which NCCL 2.21 runs unchecked: the model's best among what
      // 2.21 runs on every machine — Ring, and Tree for allreduce, in LL or Simple; never PAT
      // (2.21 has 6 algorithms), LL128 (off there unless NVLink) nor a Tree allgather (2.21's
      // NVLS kernel).
      int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF;
      ASSERT_EQ(ncclTunerPlugin_v2.getCollInfo(c2, coll, bytes, 0, 0, 1, &algo, &proto, &ch), ncclSuccess);
      EXPECT_EQ(std::make_pair(algo, proto), pick(t5, [&](int a, int p) {
                  return (a == NCCL_ALGO_RING || (a == NCCL_ALGO_TREE && coll == ncclFuncAllReduce)) &&
                         (p == NCCL_PROTO_LL || p == NCCL_PROTO_SIMPLE);
                }));
      EXPECT_TRUE(algo == NCCL_ALGO_RING || (algo == NCCL_ALGO_TREE && coll == ncclFuncAllReduce)) << algo;
      EXPECT_NE(proto, NCCL_PROTO_LL128);
      // With NVLS or CollNet possible, v2 cannot compare: no opinion.
      algo = NCCL_ALGO_UNDEF;
      proto = NCCL_PROTO_UNDEF;
      ASSERT_EQ(ncclTunerPlugin_v2.getCollInfo(c2, coll, bytes, 0, 1, 1, &algo, &proto, &ch), ncclSuccess);
      EXPECT_EQ(algo, NCCL_ALGO_UNDEF);
      EXPECT_EQ(proto, NCCL_PROTO_UNDEF);
    }
  ncclTunerPlugin_v5.finalize(c5);
  EXPECT_EQ(ncclTunerPlugin_v4.destroy(c4), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v3.destroy(c3), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v2.destroy(c2), ncclSuccess);
}

TEST_F(TunerPlugin, NoOpV2LeavesTheChoiceToNccl) {
  void* c2 = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v2.init(32, 32, fake_logger, &c2), ncclSuccess);
  int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, ch = 0;
  ASSERT_EQ(ncclTunerPlugin_v2.getCollInfo(c2, ncclFuncAllReduce, 1 << 20, 0, 0, 1, &algo, &proto, &ch),
            ncclSuccess);
  EXPECT_EQ(algo, NCCL_ALGO_UNDEF);
  EXPECT_EQ(proto, NCCL_PROTO_UNDEF);
  ncclTunerPlugin_v2.destroy(c2);
}

TEST_F(TunerPlugin, V5UsesNcclsConstants) {
  // NCCL hands its latency constants to v5's init; a huge Tree latency moves the choice.
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  ncclTunerConstants_v5_t constants = nccl_constants();
  for (int p = 0; p < P; ++p) constants.baseLatencies[NCCL_ALGO_TREE][p] = 1e7;
  void* ctx = nullptr;
  ASSERT_EQ(ncclTunerPlugin_v5.init(&ctx, 1, 32, 32, fake_logger, nullptr, &constants), ncclSuccess);
  Table t;
  changes(ctx, ncclFuncAllReduce, size_t(256) << 20, t);
  EXPECT_EQ(pick(t).first, NCCL_ALGO_RING);
  ncclTunerPlugin_v5.finalize(ctx);
}

TEST_F(TunerPlugin, NullArgumentsAreHarmless) {
  use_env({{"TOPOCOLL_TOPO_FILE", example_path("bigraph-32")}});
  void* ctx = init_v5(32, 32);
  int ch = 0;
  EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, nullptr, A, P, 0, &ch), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(nullptr, ncclFuncAllReduce, 1024, 1, nullptr, A, P, 0, &ch), ncclSuccess);
  Table t;
  nccl_table(t, ncclFuncAllReduce);
  EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, reinterpret_cast<float**>(t), 0, 0, 0, &ch),
            ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.getCollInfo(ctx, ncclNumFuncs, 1024, 1, reinterpret_cast<float**>(t), A, P, 0, &ch),
            ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.finalize(ctx), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.finalize(nullptr), ncclSuccess);
  EXPECT_EQ(ncclTunerPlugin_v5.init(nullptr, 0, 32, 32, fake_logger, nullptr, nullptr), ncclInvalidArgument);
}

// A communicator beyond the tuner's budget is refused up front, naming
// its size and the limit, instead of minutes of modelling per communicator.
TEST_F(TunerPlugin, CommunicatorsBeyondTheBudgetAreRefusedUpFront) {
  const ScratchDir scratch("tuner_budget");
  const std::string path = scratch.file("65536.json");
  {
    std::ofstream out(path);
    out << R"({"kind": "bigraph", "shape": {"switches_per_group": 256, "endpoints_per_switch": 128}})";
  }
  use_env({{"TOPOCOLL_TOPO_FILE", path}});
  void* ctx = init_v5(65536, 65536);  // minutes if it modelled: ctest's timeout is the bound, not a clock here
  expect_no_change(ctx);
  auto warns = logged(NCCL_LOG_WARN, "65536 ranks on 65536 nodes");
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_NE(warns[0].text.find("more than the 4096 ranks the tuner models"), std::string::npos) << warns[0].text;
  ncclTunerPlugin_v5.finalize(ctx);
}

}  // namespace
}  // namespace topocoll::plugin::tuner
