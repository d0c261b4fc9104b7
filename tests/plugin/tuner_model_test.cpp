// The tuner's model of NCCL's own algorithms on a topology (plugin/tuner/): which
// communicators a topology describes, the double binary tree, the fabric terms the cost model
// gives for NCCL's rank-order ring / tree / PAT on the example BiGraph and NAP networks, and
// the cost-table rules (disabled entries stay disabled, unmodelled ones keep NCCL's times).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "plugin/tuner/communicator_fit.h"
#include "plugin/tuner/cost_table.h"
#include "plugin/tuner/nccl_algorithm_model.h"
#include "topo/topology_json.h"

namespace topocoll::plugin::tuner {
namespace {

topo::Topology example(const std::string& name) {
  return topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/" + name + ".json");
}

NcclAlgorithmModel model_of(const topo::Topology& t) {
  auto fit = fit_communicator(t, t.endpoints().size(), t.hosts().size());
  EXPECT_TRUE(fit.placement) << fit.reason;
  return NcclAlgorithmModel(t, *fit.placement, int(t.hosts().size()), default_nccl_latencies());
}

// Microseconds per byte of one uncongested link of `gbps`.
double us_per_byte(double gbps) { return 1.0 / (gbps * 125.0); }

TEST(TunerBtree, TwoTreesSpanEveryNodeAndShareFewInnerNodes) {
  for (int n = 1; n <= 70; ++n) {
    std::vector<int> interior_count(size_t(n), 0);
    for (int t = 0; t < 2; ++t) {
      auto parent = btree_parents(n, t);
      ASSERT_EQ(int(parent.size()), n);
      int roots = 0;
      std::vector<int> children(size_t(n), 0);
      for (int v = 0; v < n; ++v) {
        int p = parent[size_t(v)];
        if (p < 0) { ++roots; continue; }
        ASSERT_LT(p, n);
        ASSERT_NE(p, v);
        ++children[size_t(p)];
        // Walking up ends at the root within n steps (no cycle).
        int steps = 0;
        for (int u = v; u >= 0 && steps <= n; u = parent[size_t(u)]) ++steps;
        ASSERT_LE(steps, n) << "cycle in tree " << t << " of " << n;
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
      for (int v = 0; v < n; ++v) {
        EXPECT_LE(children[size_t(v)], 2) << "binary tree, n=" << n;
        interior_count[size_t(v)] += children[size_t(v)] > 0;
      }
      // Depth is logarithmic.
      int depth = 0;
      for (int v = 0; v < n; ++v) {
        int d = 0;
        for (int u = parent[size_t(v)]; u >= 0; u = parent[size_t(u)]) ++d;
        depth = std::max(depth, d);
      }
      if (n > 1) {
        EXPECT_LE(depth, int(std::ceil(std::log2(n))) + 1) << "n=" << n;
      }
    }
    // The point of two trees: a node forwarding in one is a leaf in the other (NCCL's
    // construction leaves at most one node inner in both, for odd n).
    int both = int(std::count(interior_count.begin(), interior_count.end(), 2));
    EXPECT_LE(both, 1) << "n=" << n;
  }
}

TEST(TunerFit, WholeClusterFitsPartsDoNot) {
  auto bigraph = example("bigraph-32");
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
  auto multi = example("bigraph-16x8");
  auto fit8 = fit_communicator(multi, 128, 16);
  ASSERT_TRUE(fit8.placement) << fit8.reason;
  for (int r = 0; r < 128; ++r) {
    const auto& ep = multi.endpoints()[size_t(fit8.placement->endpoint_of_rank[size_t(r)])];
    EXPECT_EQ(ep.host, multi.hosts()[size_t(r / 8)].name) << "rank " << r;
    EXPECT_EQ(ep.gpu, r % 8) << "rank " << r;
  }
  EXPECT_FALSE(fit_communicator(multi, 128, 128).placement);
  EXPECT_FALSE(fit_communicator(multi, 64, 16).placement);

  auto nap = example("nap-4x8");
  EXPECT_TRUE(fit_communicator(nap, 32, 32).placement);
  EXPECT_FALSE(fit_communicator(nap, 32, 4).placement);
}

TEST(TunerModel, RankOrderRingCongestsBigraph32) {
  // On bigraph-32 NCCL's ring in rank order puts several hops on one inter-group link;
  // the link-load analysis inside the cost model shows it as a slower hop than one link's rate.
  auto t = example("bigraph-32");
  auto m = model_of(t);
  const double link = us_per_byte(100);
  EXPECT_GT(m.ring().us_per_byte, 1.5 * link) << "rank-order ring should share links";
  EXPECT_NEAR(m.ring().us_per_byte / link, std::round(m.ring().us_per_byte / link), 1e-6)
      << "equal flows: a whole number of flows on the worst link";
  EXPECT_GT(m.ring().latency_us, 0);
  EXPECT_EQ(m.tree_depth(), 5);  // 32 nodes
  EXPECT_EQ(m.pat_steps().size(), 5u);
  // Uncongested, a tree moves 2x the buffer through each NIC: 2 / link rate per byte.
  EXPECT_GE(m.tree().us_per_byte, 2 * link * (1 - 1e-9));
}

TEST(TunerModel, MultiGpuServersRingCrossesNetworkOncePerHost) {
  // 8 GPUs per server with NVSwitch: the rank-order ring leaves each server once, so its
  // slowest hop is one 100 Gb/s NIC, uncongested.
  auto m = model_of(example("bigraph-16x8"));
  EXPECT_NEAR(m.ring().us_per_byte, us_per_byte(100), 1e-12);
  EXPECT_TRUE(m.pat_steps().empty()) << "PAT is NCCL's one-GPU-per-node algorithm";
  EXPECT_FALSE(m.predict_us(ncclFuncAllGather, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE, 1 << 20));
}

TEST(TunerModel, WhatNcclCanRun) {
  auto m = model_of(example("nap-4x8"));
  for (ncclFunc_t c : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                       ncclFuncAllReduce})
    for (int p = 0; p < kNumProtocols; ++p)
      EXPECT_TRUE(m.predict_us(c, NCCL_ALGO_RING, p, 4096)) << collective_name(c);
  for (int p = 0; p < kNumProtocols; ++p) {
    EXPECT_TRUE(m.predict_us(ncclFuncAllReduce, NCCL_ALGO_TREE, p, 4096));
    EXPECT_FALSE(m.predict_us(ncclFuncAllGather, NCCL_ALGO_TREE, p, 4096));
    EXPECT_FALSE(m.predict_us(ncclFuncAllReduce, NCCL_ALGO_PAT, p, 4096));
  }
  EXPECT_TRUE(m.predict_us(ncclFuncAllGather, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE, 4096));
  EXPECT_TRUE(m.predict_us(ncclFuncReduceScatter, NCCL_ALGO_PAT, NCCL_PROTO_SIMPLE, 4096));
  EXPECT_FALSE(m.predict_us(ncclFuncAllGather, NCCL_ALGO_PAT, NCCL_PROTO_LL, 4096));
  for (int a : {NCCL_ALGO_COLLNET_DIRECT, NCCL_ALGO_COLLNET_CHAIN, NCCL_ALGO_NVLS, NCCL_ALGO_NVLS_TREE})
    EXPECT_FALSE(m.predict_us(ncclFuncAllReduce, a, NCCL_PROTO_SIMPLE, 4096)) << algorithm_name(a);
  EXPECT_FALSE(m.predict_us(ncclFuncSendRecv, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 4096));
  EXPECT_FALSE(m.predict_us(ncclFuncAllReduce, NCCL_ALGO_RING, 7, 4096));
}

TEST(TunerModel, TimesGrowWithSizeAndProtocolsTradeLatencyForBandwidth) {
  for (const char* name : {"bigraph-32", "nap-4x8", "bigraph-16x8", "nap-16x8"}) {
    SCOPED_TRACE(name);
    auto m = model_of(example(name));
    for (int a : {NCCL_ALGO_RING, NCCL_ALGO_TREE}) {
      double prev[kNumProtocols] = {0, 0, 0};
      for (double bytes = 1; bytes <= double(1ull << 32); bytes *= 4)
        for (int p = 0; p < kNumProtocols; ++p) {
          double t = *m.predict_us(ncclFuncAllReduce, a, p, bytes);
          EXPECT_TRUE(std::isfinite(t));
          EXPECT_GE(t, prev[p]);
          prev[p] = t;
        }
      // LL: lowest latency, worst bandwidth; Simple the other way round.
      EXPECT_LT(*m.predict_us(ncclFuncAllReduce, a, NCCL_PROTO_LL, 8),
                *m.predict_us(ncclFuncAllReduce, a, NCCL_PROTO_SIMPLE, 8));
      EXPECT_LT(*m.predict_us(ncclFuncAllReduce, a, NCCL_PROTO_SIMPLE, 1e9),
                *m.predict_us(ncclFuncAllReduce, a, NCCL_PROTO_LL, 1e9));
    }
  }
}

TEST(TunerModel, ConstantsFromNcclReplaceTheDefaults) {
  auto t = example("nap-4x8");
  auto fit = fit_communicator(t, 32, 32);
  ASSERT_TRUE(fit.placement);
  ncclTunerConstants_v5_t c{};
  NcclLatencies d = default_nccl_latencies();
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) {
      c.baseLatencies[a][p] = d.base[a][p];
      c.hwLatencies[0][a][p] = d.intra_host[a][p];
      c.hwLatencies[2][a][p] = d.inter_host[a][p];
    }
  NcclAlgorithmModel same(t, *fit.placement, 32, nccl_latencies_from(c));
  NcclAlgorithmModel defaults(t, *fit.placement, 32, default_nccl_latencies());
  EXPECT_DOUBLE_EQ(*same.predict_us(ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096),
                   *defaults.predict_us(ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096));
  c.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL] += 1000;
  NcclAlgorithmModel slower(t, *fit.placement, 32, nccl_latencies_from(c));
  EXPECT_NEAR(*slower.predict_us(ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096) -
                  *defaults.predict_us(ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096),
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

TEST(TunerCostTable, DisabledEntriesStayDisabledUnmodelledKeepNcclTimes) {
  std::mt19937 rng(7);
  for (const char* name : {"bigraph-32", "nap-4x8", "bigraph-16x8"}) {
    auto m = model_of(example(name));
    for (ncclFunc_t c : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather,
                         ncclFuncReduceScatter, ncclFuncAllReduce, ncclFuncSendRecv})
      for (double bytes : {0.0, 1.0, 1000.0, 65536.0, 3e6, 1e9, 1.7e10}) {
        float table[kNumAlgorithms][kNumProtocols];
        fill_table(table, c, rng);
        float before[kNumAlgorithms][kNumProtocols];
        std::copy(&table[0][0], &table[0][0] + kNumAlgorithms * kNumProtocols, &before[0][0]);
        CostTable view(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
        apply_model(view, m, c, bytes);
        for (int a = 0; a < kNumAlgorithms; ++a)
          for (int p = 0; p < kNumProtocols; ++p) {
            SCOPED_TRACE(std::string(name) + " " + collective_name(c) + " " + algorithm_name(a) +
                         "/" + protocol_name(p) + " bytes=" + std::to_string(bytes));
            if (before[a][p] < 0) {
              EXPECT_EQ(table[a][p], float(NCCL_ALGO_PROTO_IGNORE));
            } else {
              EXPECT_TRUE(std::isfinite(table[a][p]));
              EXPECT_GE(table[a][p], 0.0f);
              auto predicted = m.predict_us(c, a, p, bytes);
              if (predicted) {
                EXPECT_FLOAT_EQ(table[a][p], float(*predicted));
              } else {
                EXPECT_EQ(table[a][p], before[a][p]);
              }
            }
          }
      }
  }
}

TEST(TunerCostTable, SmallerTablesOfOlderNcclAreRespected) {
  // NCCL 2.21/2.22 (tuner v3) had 6 algorithms: no PAT row. Nothing past the table is touched.
  auto m = model_of(example("bigraph-32"));
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
  EXPECT_FALSE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1e300));
  EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 10.0f);
  EXPECT_TRUE(view.set_enabled(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1.0));
  EXPECT_EQ(view.best(), std::make_pair(NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));
}

}  // namespace
}  // namespace topocoll::plugin::tuner
