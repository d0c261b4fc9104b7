// The tuner's use of the model of NCCL's algorithms (sched/nccl_algorithm_model.h, tested in
// tests/sched/nccl_algorithm_model_test.cpp): which communicators a topology describes, NCCL's
// collective kinds and constants mapped onto the model, and the cost-table rules (disabled
// entries stay disabled, unmodelled ones keep NCCL's times).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "plugin/tuner/communicator_fit.h"
#include "plugin/tuner/cost_table.h"
#include "plugin/tuner/tuner_api_mapping.h"
#include "sched/nccl_algorithm_model.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::plugin::tuner {
namespace {

using testing_support::example_topology;

sched::NcclAlgorithmModel model_of(const topo::Topology& t) {
  auto fit = fit_communicator(t, t.endpoints().size(), t.hosts().size());
  EXPECT_TRUE(fit.placement) << fit.reason;
  return sched::NcclAlgorithmModel(t, *fit.placement, int(t.hosts().size()),
                                   sched::default_nccl_latencies());
}

TEST(TunerFit, WholeClusterFitsPartsDoNot) {
  auto bigraph = example_topology("bigraph-32");
  auto fit = fit_communicator(bigraph, 32, 32);
  ASSERT_TRUE(fit.placement) << fit.reason;
  EXPECT_EQ(fit.placement->nranks(), 32);
  std::set<int> used(fit.placement->endpoint_of_rank.begin(), fit.placement->endpoint_of_rank.end());
  EXPECT_EQ(used.size(), 32u);

  auto part = fit_communicator(bigraph, 16, 16);
  EXPECT_FALSE(part.placement);
  EXPECT_NE(part.reason.find("32 endpoints on 32 hosts"), std::string::npos) << part.reason;
  EXPECT_FALSE(fit_communicator(bigraph, 32, 16).placement);
  EXPECT_FALSE(fit_communicator(bigraph, 1, 1).placement);
  EXPECT_FALSE(fit_communicator(bigraph, 0, 0).placement);

  // 16 servers with 8 GPUs each: NCCL numbers the ranks host by host.
  auto multi = example_topology("bigraph-16x8");
  auto fit8 = fit_communicator(multi, 128, 16);
  ASSERT_TRUE(fit8.placement) << fit8.reason;
  for (int r = 0; r < 128; ++r) {
    const auto& ep = multi.endpoints()[size_t(fit8.placement->endpoint_of_rank[size_t(r)])];
    EXPECT_EQ(ep.host, multi.hosts()[size_t(r / 8)].name) << "rank " << r;
    EXPECT_EQ(ep.gpu, r % 8) << "rank " << r;
  }
  EXPECT_FALSE(fit_communicator(multi, 128, 128).placement);
  EXPECT_FALSE(fit_communicator(multi, 64, 16).placement);

  auto nap = example_topology("nap-4x8");
  EXPECT_TRUE(fit_communicator(nap, 32, 32).placement);
  EXPECT_FALSE(fit_communicator(nap, 32, 4).placement);
}

// A job on part of the cluster names its hosts in rank order (TOPOCOLL_TUNER_HOSTS): a
// communicator over exactly those is tuned, rank r on job host r / ppn; other parts are not.
TEST(TunerFit, TheJobsHostsFitACommunicatorOnPartOfTheCluster) {
  EXPECT_EQ(parse_job_hosts(" s3, s1 ,,s2 \r\n"), (std::vector<std::string>{"s3", "s1", "s2"}));
  EXPECT_TRUE(parse_job_hosts("").empty());

  auto bigraph = example_topology("bigraph-32");
  const std::vector<std::string> job = {"s7", "s0", "s12", "s3"};
  auto fit = fit_communicator(bigraph, 4, 4, job);
  ASSERT_TRUE(fit.placement) << fit.reason;
  ASSERT_EQ(fit.placement->nranks(), 4);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(bigraph.endpoints()[size_t(fit.placement->endpoint_of_rank[size_t(r)])].host, job[size_t(r)]);
  EXPECT_FALSE(fit_communicator(bigraph, 2, 2, job).placement) << "a sub-communicator of the job: which part is unknown";
  EXPECT_FALSE(fit_communicator(bigraph, 8, 4, job).placement) << "s7 has one endpoint, not two";
  EXPECT_TRUE(fit_communicator(bigraph, 32, 32, job).placement) << "the whole cluster still fits";

  // A wrong list leaves the numbering unknown: nothing fits, not even the whole cluster in
  // the file's order.
  for (const size_t n : {size_t(4), size_t(32)}) {
    auto unknown = fit_communicator(bigraph, n, n, {"s7", "nowhere\r", "s1", "s2"});
    EXPECT_FALSE(unknown.placement) << n;
    EXPECT_NE(unknown.hosts_error.find("\"nowhere\\x0d\""), std::string::npos) << unknown.hosts_error;
    auto twice = fit_communicator(bigraph, n, n, {"s7", "s1", "s7", "s2"});
    EXPECT_FALSE(twice.placement) << n;
    EXPECT_NE(twice.hosts_error.find("\"s7\" twice"), std::string::npos) << twice.hosts_error;
  }

  // 8 GPUs a server: ranks host by host, GPUs ascending.
  auto multi = example_topology("bigraph-16x8");
  auto fit8 = fit_communicator(multi, 16, 2, {"s5", "s2"});
  ASSERT_TRUE(fit8.placement) << fit8.reason;
  for (int r = 0; r < 16; ++r) {
    const auto& ep = multi.endpoints()[size_t(fit8.placement->endpoint_of_rank[size_t(r)])];
    EXPECT_EQ(ep.host, r < 8 ? "s5" : "s2") << "rank " << r;
    EXPECT_EQ(ep.gpu, r % 8) << "rank " << r;
  }
}

TEST(TunerApiMapping, OnlyCollectivesTheModelKnowsArePredicted) {
  auto m = model_of(example_topology("nap-4x8"));
  for (ncclFunc_t c : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                       ncclFuncAllReduce}) {
    ASSERT_TRUE(modelled_collective(c)) << collective_name(c);
    EXPECT_EQ(predict_us(m, c, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4096),
              m.predict_us(*modelled_collective(c), NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4096));
    EXPECT_TRUE(predict_us(m, c, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4096)) << collective_name(c);
  }
  for (ncclFunc_t c : {ncclFuncSendRecv, ncclFuncSend, ncclFuncRecv, ncclFuncAlltoAll,
                       ncclFuncScatter, ncclFuncGather}) {
    EXPECT_FALSE(modelled_collective(c)) << collective_name(c);
    EXPECT_FALSE(predict_us(m, c, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4096)) << collective_name(c);
  }
}

TEST(TunerApiMapping, ConstantsFromNcclReplaceTheDefaults) {
  auto t = example_topology("nap-4x8");
  auto fit = fit_communicator(t, 32, 32);
  ASSERT_TRUE(fit.placement);
  ncclTunerConstants_v5_t c{};
  sched::NcclLatencies d = sched::default_nccl_latencies();
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) {
      c.baseLatencies[a][p] = d.base[a][p];
      c.hwLatencies[0][a][p] = d.intra_host[a][p];
      c.hwLatencies[2][a][p] = d.inter_host[a][p];
    }
  sched::NcclAlgorithmModel same(t, *fit.placement, 32, nccl_latencies_from(c));
  sched::NcclAlgorithmModel defaults(t, *fit.placement, 32, sched::default_nccl_latencies());
  EXPECT_DOUBLE_EQ(*predict_us(same, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096),
                   *predict_us(defaults, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096));
  c.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL] += 1000;
  sched::NcclAlgorithmModel slower(t, *fit.placement, 32, nccl_latencies_from(c));
  EXPECT_NEAR(*predict_us(slower, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096) -
                  *predict_us(defaults, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096),
              1000, 1e-6);
}

// A table as NCCL 2.28 fills it for `coll` (times are placeholders), with some entries off.
void fill_table(float (&table)[kNumAlgorithms][kNumProtocols], ncclFunc_t coll, std::mt19937& rng) {
  std::uniform_real_distribution<float> time(1, 1000);
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) table[a][p] = float(NCCL_ALGO_PROTO_IGNORE);
  for (int p = 0; p < kNumProtocols; ++p) table[NCCL_ALGO_RING][p] = time(rng);
  if (coll == ncclFuncAllReduce) {
    for (int p = 0; p < kNumProtocols; ++p) table[NCCL_ALGO_TREE][p] = time(rng);
    table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] = time(rng);
  }
  if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter)
    table[NCCL_ALGO_PAT][NCCL_PROTO_SIMPLE] = time(rng);
  // NCCL_ALGO / NCCL_PROTO style exclusions and protocols off on this hardware.
  std::bernoulli_distribution off(0.3);
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p)
      if (off(rng)) table[a][p] = float(NCCL_ALGO_PROTO_IGNORE);
}

// The entries the model does not know (NVLS here: NCCL's view of an NVSwitch) keep NCCL's
// times. Where NCCL picks one of them the table stays whole; otherwise, with one of them
// enabled, the model's times are scaled so NCCL's pick keeps NCCL's time, and NCCL's own
// comparison against the unmodelled entries stands.
TEST(TunerCostTable, DisabledEntriesStayDisabledUnmodelledKeepNcclTimes) {
  std::mt19937 rng(7);
  for (const char* name : {"bigraph-32", "nap-4x8", "bigraph-16x8"}) {
    auto m = model_of(example_topology(name));
    for (ncclFunc_t c : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather,
                         ncclFuncReduceScatter, ncclFuncAllReduce, ncclFuncSendRecv})
      for (double bytes : {0.0, 1.0, 1000.0, 65536.0, 3e6, 1e9, 1.7e10}) {
        float table[kNumAlgorithms][kNumProtocols];
        fill_table(table, c, rng);
        float before[kNumAlgorithms][kNumProtocols];
        std::copy(&table[0][0], &table[0][0] + kNumAlgorithms * kNumProtocols, &before[0][0]);
        CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
        const CostTable nccls(reinterpret_cast<float**>(before), kNumAlgorithms, kNumProtocols);
        const auto nccl_pick = nccls.best();
        const bool pick_modelled = nccl_pick && predict_us(m, c, nccl_pick->first, nccl_pick->second, bytes);
        bool any_unmodelled = false;
        for (int a = 0; a < kNumAlgorithms; ++a)
          for (int p = 0; p < kNumProtocols; ++p) any_unmodelled |= before[a][p] >= 0 && !predict_us(m, c, a, p, bytes);
        double scale = 1.0;
        if (pick_modelled && any_unmodelled) {
          const double at_pick = *predict_us(m, c, nccl_pick->first, nccl_pick->second, bytes);
          if (at_pick > 0) scale = before[nccl_pick->first][nccl_pick->second] / at_pick;
        }
        apply_model(view, m, c, bytes);
        for (int a = 0; a < kNumAlgorithms; ++a)
          for (int p = 0; p < kNumProtocols; ++p) {
            SCOPED_TRACE(std::string(name) + " " + collective_name(c) + " " +
                         sched::nccl_algorithm_name(a) + "/" + sched::nccl_protocol_name(p) +
                         " bytes=" + std::to_string(bytes));
            if (before[a][p] < 0) {
              EXPECT_EQ(table[a][p], float(NCCL_ALGO_PROTO_IGNORE));
            } else {
              EXPECT_TRUE(std::isfinite(table[a][p]));
              EXPECT_GE(table[a][p], 0.0f);
              auto predicted = predict_us(m, c, a, p, bytes);
              if (predicted && pick_modelled) {
                EXPECT_FLOAT_EQ(table[a][p], float(*predicted * scale));
              } else {
                EXPECT_EQ(table[a][p], before[a][p]) << (predicted ? "NCCL picked an entry the model does not know" : "");
              }
            }
          }
      }
  }
}

// NVLSTree on an NVSwitch system, which NCCL picked below its Ring and Tree: the model knows
// nothing of NVLink SHARP, so NCCL's pick stands. Where NCCL picks Ring instead (NVLS enabled
// above it), the model's Tree, faster than the ring on bigraph-32's congested rank order, is
// measured against NVLS on NCCL's scale: it wins, and NVLS keeps NCCL's time.
TEST(TunerCostTable, EntriesTheModelDoesNotKnowAreComparedOnNcclsScale) {
  auto m = model_of(example_topology("bigraph-32"));
  const double bytes = 256e6;
  float table[kNumAlgorithms][kNumProtocols];
  auto reset = [&] {
    for (auto& row : table)
      for (float& t : row) t = float(NCCL_ALGO_PROTO_IGNORE);
  };
  reset();
  table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 30000;
  table[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 32000;
  table[NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE] = 20000;
  CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
  EXPECT_EQ(apply_model(view, m, ncclFuncAllReduce, bytes), 0);
  EXPECT_EQ(view.best(), std::make_pair(NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE));

  reset();
  table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 30000;
  table[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 32000;
  table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] = 45000;
  const double ring = *predict_us(m, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, bytes);
  const double tree = *predict_us(m, ncclFuncAllReduce, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, bytes);
  ASSERT_LT(tree, ring) << "the model's tree beats its congested ring";
  EXPECT_GT(apply_model(view, m, ncclFuncAllReduce, bytes), 0);
  EXPECT_FLOAT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 30000.0f) << "NCCL's pick keeps NCCL's time";
  EXPECT_FLOAT_EQ(table[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE], float(tree * 30000 / ring));
  EXPECT_EQ(table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE], 45000.0f);
  EXPECT_EQ(view.best(), std::make_pair(NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE));
}

// NCCL 2.28 multiplies Ring by 1024 for fp8 reductions on more than 8 ranks; the tuner keeps
// that relegation (it cannot see the datatype) and leaves an ordinary table's Ring alone,
// however far NCCL's times are from the model's (here up to 4x either way).
TEST(TunerCostTable, NcclsRelegatedRingStaysRelegated) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> disagreement(-2, 2);  // log2 of NCCL's time over the model's
  const auto bigraph = example_topology("bigraph-32");
  const auto m = model_of(bigraph);
  for (ncclFunc_t c : {ncclFuncAllReduce, ncclFuncAllGather})
    for (double bytes : {4096.0, 1e6, 1e9})
      for (bool relegated : {false, true}) {
        SCOPED_TRACE(std::string(collective_name(c)) + " bytes=" + std::to_string(bytes) +
                     (relegated ? " relegated" : " as NCCL computes it"));
        float table[kNumAlgorithms][kNumProtocols];
        for (auto& row : table)
          for (float& v : row) v = float(NCCL_ALGO_PROTO_IGNORE);
        for (int a = 0; a < kNumAlgorithms; ++a)
          for (int p = 0; p < kNumProtocols; ++p)
            if (auto t = predict_us(m, c, a, p, bytes))
              table[a][p] = float(*t * std::exp2(disagreement(rng)) * (relegated && a == NCCL_ALGO_RING ? 1024 : 1));
        CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
        EXPECT_EQ(ring_relegated(view, m, c, bytes, 1), relegated);
        apply_model(view, m, c, bytes);
        for (int p = 0; p < kNumProtocols; ++p) {
          EXPECT_FLOAT_EQ(table[NCCL_ALGO_RING][p], float(*predict_us(m, c, NCCL_ALGO_RING, p, bytes) * (relegated ? 1024 : 1)));
        }
        EXPECT_NE(view.best()->first, relegated ? NCCL_ALGO_RING : -1);
      }
  // 8 ranks or fewer: NCCL relegates nothing, so nothing is read as relegation.
  sched::NcclAlgorithmModel small(bigraph, sched::first_endpoints(bigraph, 8), 8, sched::default_nccl_latencies());
  float table[kNumAlgorithms][kNumProtocols];
  for (auto& row : table)
    for (float& v : row) v = float(NCCL_ALGO_PROTO_IGNORE);
  for (int p = 0; p < kNumProtocols; ++p) {
    table[NCCL_ALGO_RING][p] = float(*predict_us(small, ncclFuncAllReduce, NCCL_ALGO_RING, p, 1e6) * 1024);
    table[NCCL_ALGO_TREE][p] = float(*predict_us(small, ncclFuncAllReduce, NCCL_ALGO_TREE, p, 1e6));
  }
  CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
  EXPECT_FALSE(ring_relegated(view, small, ncclFuncAllReduce, 1e6, 1));
}

TEST(TunerCostTable, SmallerTablesOfOlderNcclAreRespected) {
  // NCCL 2.21/2.22 (tuner v3) had 6 algorithms: no PAT row. Nothing past the table is touched.
  auto m = model_of(example_topology("bigraph-32"));
  float storage[8][kNumProtocols];
  for (auto& row : storage)
    for (float& v : row) v = 5.0f;
  for (int p = 0; p < kNumProtocols; ++p) storage[7][p] = storage[6][p] = 123.0f;
  CostTable view(reinterpret_cast<float**>(storage), 6, kNumProtocols);
  apply_model(view, m, ncclFuncAllGather, 1 << 20);
  for (int p = 0; p < kNumProtocols; ++p) {
    EXPECT_EQ(storage[6][p], 123.0f);
    EXPECT_EQ(storage[7][p], 123.0f);
  }
  CostTable none(nullptr, 7, 3);
  EXPECT_EQ(apply_model(none, m, ncclFuncAllReduce, 1 << 20), 0);
  EXPECT_FALSE(none.best());
}

TEST(TunerCostTable, BestIsNcclsRule) {
  float table[kNumAlgorithms][kNumProtocols];
  for (auto& row : table)
    for (float& v : row) v = float(NCCL_ALGO_PROTO_IGNORE);
  CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
  EXPECT_FALSE(view.best());
  table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 10;
  table[NCCL_ALGO_TREE][NCCL_PROTO_LL] = 4;
  table[NCCL_ALGO_PAT][NCCL_PROTO_SIMPLE] = 4;  // tie: the first one wins, as in NCCL
  EXPECT_EQ(view.best(), std::make_pair(NCCL_ALGO_TREE, NCCL_PROTO_LL));
  EXPECT_FALSE(view.set_enabled(NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE, 1.0));
  EXPECT_FALSE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, -2.0));
  EXPECT_FALSE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, std::nan("")));
  EXPECT_FALSE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, INFINITY));
  EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 10.0f);
  // NCCL looks only below 1 hour (3.6e9 us): a longer prediction is written just under it.
  EXPECT_TRUE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1e300));
  EXPECT_LT(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 3600000000.0f);
  EXPECT_GE(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 3.4e9f);
  EXPECT_TRUE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1.0));
  EXPECT_EQ(view.best(), std::make_pair(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
}

}  // namespace
}  // namespace topocoll::plugin::tuner
