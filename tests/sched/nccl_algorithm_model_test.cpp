// The model of NCCL's own algorithms on a topology (sched/nccl_algorithm_model.h): the
// double binary tree, the fabric terms the cost model gives for NCCL's rank-order ring /
// tree / PAT on the example BiGraph and NAP networks, and which combinations NCCL can run.
// The tuner's use of it (cost tables, NCCL's constants) is tests/plugin/tuner_model_test.cpp.
#include "sched/nccl_algorithm_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::sched {
namespace {

using testing_support::example_topology;

// Every endpoint, in NCCL's rank numbering (host by host, GPUs ascending), which is the
// order the examples list their endpoints in.
NcclAlgorithmModel model_of(const topo::Topology& t) {
  return NcclAlgorithmModel(t, first_endpoints(t, int(t.endpoints().size())),
                            int(t.hosts().size()), default_nccl_latencies());
}

// Microseconds per byte of one uncongested link of `gbps`.
double us_per_byte(double gbps) { return 1.0 / (gbps * 125.0); }

TEST(NcclBtree, TwoTreesSpanEveryNodeAndShareFewInnerNodes) {
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

TEST(NcclAlgorithmModel, RankOrderRingCongestsBigraph32) {
  // On bigraph-32 NCCL's ring in rank order puts several hops on one inter-group link;
  // the link-load analysis inside the cost model shows it as a slower hop than one link's rate.
  auto t = example_topology("bigraph-32");
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

TEST(NcclAlgorithmModel, MultiGpuServersRingCrossesNetworkOncePerHost) {
  // 8 GPUs per server with NVSwitch: the rank-order ring leaves each server once, so its
  // slowest hop is one 100 Gb/s NIC, uncongested.
  auto m = model_of(example_topology("bigraph-16x8"));
  EXPECT_NEAR(m.ring().us_per_byte, us_per_byte(100), 1e-12);
  EXPECT_TRUE(m.pat_steps().empty()) << "PAT is NCCL's one-GPU-per-node algorithm";
  EXPECT_FALSE(m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclSimple, 1 << 20));
}

TEST(NcclAlgorithmModel, WhatNcclCanRun) {
  auto m = model_of(example_topology("nap-4x8"));
  for (NcclCollective c : {NcclCollective::Broadcast, NcclCollective::Reduce, NcclCollective::AllGather, NcclCollective::ReduceScatter,
                       NcclCollective::AllReduce})
    for (int p = 0; p < kNumNcclProtocols; ++p)
      EXPECT_TRUE(m.predict_us(c, kNcclRing, p, 4096)) << int(c);
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    EXPECT_TRUE(m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 4096));
    EXPECT_FALSE(m.predict_us(NcclCollective::AllGather, kNcclTree, p, 4096));
    EXPECT_FALSE(m.predict_us(NcclCollective::AllReduce, kNcclPat, p, 4096));
  }
  EXPECT_TRUE(m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclSimple, 4096));
  EXPECT_TRUE(m.predict_us(NcclCollective::ReduceScatter, kNcclPat, kNcclSimple, 4096));
  EXPECT_FALSE(m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclLL, 4096));
  for (int a : {kNcclCollNetDirect, kNcclCollNetChain, kNcclNvls, kNcclNvlsTree})
    EXPECT_FALSE(m.predict_us(NcclCollective::AllReduce, a, kNcclSimple, 4096)) << nccl_algorithm_name(a);
  EXPECT_FALSE(m.predict_us(NcclCollective::AllReduce, kNcclRing, 7, 4096));
}

// NCCL 2.28 src/graph/tuning.cc: at one GPU per node every ring step is a network step
// priced at the Tree's NET latency; on several GPUs per node a step inside a node costs at
// least the network overhead (1 us, 3 us for Simple).
TEST(NcclAlgorithmModel, RingLatenciesAreNcclsFormula) {
  const NcclLatencies l = default_nccl_latencies();
  const auto one = model_of(example_topology("bigraph-32"));
  for (int p = 0; p < kNumNcclProtocols; ++p)
    EXPECT_NEAR(*one.predict_us(NcclCollective::AllReduce, kNcclRing, p, 0),
                l.base[kNcclRing][p] + 2 * 31 * (l.inter_host[kNcclTree][p] + one.ring().latency_us), 1e-9)
        << nccl_protocol_name(p);
  const auto eight = model_of(example_topology("bigraph-16x8"));  // 16 hosts of 8 GPUs
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    const double intra = std::max(l.intra_host[kNcclRing][p], p == kNcclSimple ? 3.0 : 1.0);
    EXPECT_NEAR(*eight.predict_us(NcclCollective::AllGather, kNcclRing, p, 0),
                l.base[kNcclRing][p] + 15 * (l.inter_host[kNcclRing][p] + eight.ring().latency_us) +
                    (127 - 15) * intra,
                1e-9)
        << nccl_protocol_name(p);
  }
}

// A group of numPipeOps collectives (nbytes their sum): a ring pays its latency once per op,
// the other algorithms once per batch of 10 (NCCL_MAX_DEV_WORK_BATCH_COLLS).
TEST(NcclAlgorithmModel, GroupedCollectivesPayTheLatencyAsNcclCounts) {
  const auto m = model_of(example_topology("bigraph-32"));
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    const double ring_lat = *m.predict_us(NcclCollective::AllReduce, kNcclRing, p, 0);
    const double ring = *m.predict_us(NcclCollective::AllReduce, kNcclRing, p, 1e6);
    EXPECT_NEAR(*m.predict_us(NcclCollective::AllReduce, kNcclRing, p, 1e6, 4), ring + 3 * ring_lat, 1e-6);
    const double tree_lat = *m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 0);
    const double tree = *m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 1e6);
    EXPECT_NEAR(*m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 1e6, 10), tree, 1e-6);
    EXPECT_NEAR(*m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 1e6, 11), tree + tree_lat, 1e-6);
    EXPECT_NEAR(*m.predict_us(NcclCollective::AllReduce, kNcclTree, p, 1e6, 0), tree, 1e-6);  // as 1
  }
  const double pat_lat = *m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclSimple, 0);
  EXPECT_NEAR(*m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclSimple, 1e6, 25),
              *m.predict_us(NcclCollective::AllGather, kNcclPat, kNcclSimple, 1e6) + 2 * pat_lat, 1e-6);
}

TEST(NcclAlgorithmModel, TimesGrowWithSizeAndProtocolsTradeLatencyForBandwidth) {
  for (const char* name : {"bigraph-32", "nap-4x8", "bigraph-16x8", "nap-16x8"}) {
    SCOPED_TRACE(name);
    auto m = model_of(example_topology(name));
    for (int a : {kNcclRing, kNcclTree}) {
      double prev[kNumNcclProtocols] = {0, 0, 0};
      for (double bytes = 1; bytes <= double(1ull << 32); bytes *= 4)
        for (int p = 0; p < kNumNcclProtocols; ++p) {
          double t = *m.predict_us(NcclCollective::AllReduce, a, p, bytes);
          EXPECT_TRUE(std::isfinite(t));
          EXPECT_GE(t, prev[p]);
          prev[p] = t;
        }
      // LL: lowest latency, worst bandwidth; Simple the other way round.
      EXPECT_LT(*m.predict_us(NcclCollective::AllReduce, a, kNcclLL, 8),
                *m.predict_us(NcclCollective::AllReduce, a, kNcclSimple, 8));
      EXPECT_LT(*m.predict_us(NcclCollective::AllReduce, a, kNcclSimple, 1e9),
                *m.predict_us(NcclCollective::AllReduce, a, kNcclLL, 1e9));
    }
  }
}

}  // namespace
}  // namespace topocoll::sched
