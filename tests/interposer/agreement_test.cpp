// Whether a communicator is served: every rank decides from the same gathered identities,
// so the verdict and its reason are the same everywhere; and the per-call routing decision.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>

#include <nccl.h>

#include "plugin/interposer/route_decision.h"
#include "plugin/interposer/nccl_baseline.h"
#include "plugin/interposer/rank_identity.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "sched/ring_order.h"
#include "tests/common/failing_allocation.h"
#include "topo/generators.h"
#include "topo/topology_fingerprint.h"
#include "topo/topology_json.h"

namespace topocoll::plugin::interposer {
namespace {

topo::Topology bigraph(int switches_per_group, int endpoints_per_switch) {
  topo::BiGraphShape shape;
  shape.switches_per_group = switches_per_group;
  shape.endpoints_per_switch = endpoints_per_switch;
  return topo::generate_bigraph(shape);
}

std::vector<RankIdentity> identities_of(const topo::Topology& t, int n, uint64_t fingerprint = 42,
                                        int compute_capability = 90) {
  ProcessContext loaded;
  loaded.topology = std::make_shared<const topo::Topology>(t);
  loaded.topology_fingerprint = fingerprint;
  std::vector<RankIdentity> ids;
  // Reverse order: communicator rank r runs on endpoint n-1-r.
  for (int r = 0; r < n; ++r) {
    const topo::Endpoint& e = t.endpoints()[std::size_t(n - 1 - r)];
    loaded.host.name = e.host;
    ids.push_back(make_identity(e.gpu, loaded, true, compute_capability, 7));
  }
  return ids;
}

TEST(Agreement, EveryRankFoundGivesThePlacement) {
  const topo::Topology t = bigraph(2, 2);
  const int n = int(t.endpoints().size());
  auto ids = identities_of(t, n);
  ServiceAgreement a = agree_on_service(ids, &t);
  ASSERT_TRUE(a.served) << a.reason;
  ASSERT_EQ(a.placement.nranks(), n);
  for (int r = 0; r < n; ++r) EXPECT_EQ(a.placement.endpoint_of_rank[std::size_t(r)], n - 1 - r);
}

TEST(Agreement, OneRankMissingFromTheTopologyMakesAllFallBack) {
  const topo::Topology t = bigraph(2, 2);
  auto ids = identities_of(t, 8);
  std::snprintf(ids[5].host, sizeof ids[5].host, "%s", "elsewhere");
  ServiceAgreement a = agree_on_service(ids, &t);
  EXPECT_FALSE(a.served);
  EXPECT_NE(a.reason.find("placement failed"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("elsewhere"), std::string::npos) << a.reason;
}

TEST(Agreement, EachReasonNamesTheRank) {
  const topo::Topology t = bigraph(2, 2);
  {
    auto ids = identities_of(t, 8);
    ids[3].flags &= ~RankIdentity::kTopologyLoaded;
    auto a = agree_on_service(ids, &t);
    EXPECT_FALSE(a.served);
    EXPECT_NE(a.reason.find("rank 3"), std::string::npos) << a.reason;
    EXPECT_NE(a.reason.find("no valid topology"), std::string::npos) << a.reason;
  }
  {
    auto ids = identities_of(t, 8);
    ids[2].topology_hash = 7;
    auto a = agree_on_service(ids, &t);
    EXPECT_FALSE(a.served);
    EXPECT_NE(a.reason.find("rank 2"), std::string::npos) << a.reason;
    EXPECT_NE(a.reason.find("different topology"), std::string::npos) << a.reason;
  }
  {
    auto ids = identities_of(t, 8);
    ids[1].flags &= ~RankIdentity::kCanServe;
    auto a = agree_on_service(ids, &t);
    EXPECT_FALSE(a.served);
    EXPECT_NE(a.reason.find("rank 1"), std::string::npos) << a.reason;
  }
  {
    auto ids = identities_of(t, 8);
    ids[6].magic = 0;
    auto a = agree_on_service(ids, &t);
    EXPECT_FALSE(a.served);
    EXPECT_NE(a.reason.find("rank 6"), std::string::npos) << a.reason;
  }
  {
    auto ids = identities_of(t, 8);
    ids[4] = ids[0];  // two ranks claim one GPU
    auto a = agree_on_service(ids, &t);
    EXPECT_FALSE(a.served);
  }
}

// NCCL refuses fp8 reductions by the communicator's lowest compute capability
// (comm->minCompCap), not the rank's own: every rank must reach the same minimum.
// A rank with other routing settings (TOPOCOLL_ALGO, thresholds, scratch cap, split mode,
// pipeline shape) would send calls elsewhere than its peers: the communicator falls back,
// naming the rank.
TEST(Agreement, OtherRoutingSettingsOnOneRankMakeAllFallBack) {
  const topo::Topology t = bigraph(2, 2);
  auto ids = identities_of(t, 8);
  ids[5].settings_hash = 8;
  const ServiceAgreement a = agree_on_service(ids, &t);
  EXPECT_FALSE(a.served);
  EXPECT_NE(a.reason.find("rank 5"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("other routing settings than rank 0"), std::string::npos) << a.reason;
}

TEST(Agreement, TheCommunicatorsLowestComputeCapabilityIsAgreed) {
  const topo::Topology t = bigraph(2, 2);
  auto ids = identities_of(t, 8, 42, 90);
  EXPECT_EQ(agree_on_service(ids, &t).min_compute_capability, 90);
  ids[6].compute_capability = 80;
  ids[2].compute_capability = 100;
  ServiceAgreement a = agree_on_service(ids, &t);
  ASSERT_TRUE(a.served) << a.reason;
  EXPECT_EQ(a.min_compute_capability, 80);
  // A rank whose CUDA could not say counts as the lowest: NCCL's refusals are kept.
  ids[0].compute_capability = 0;
  EXPECT_EQ(agree_on_service(ids, &t).min_compute_capability, 0);
  EXPECT_EQ(make_identity(0, ProcessContext{}, true, -5, 7).compute_capability, 0);
}

TEST(Agreement, ARankThatCouldNotPrepareIsNamedWithItsReason) {
  const topo::Topology t = bigraph(2, 2);
  auto ids = identities_of(t, 8);
  mark_unserved(ids[5], "cudaStreamCreate: out of memory and a much longer tail");
  EXPECT_FALSE(ids[5].flags & RankIdentity::kCanServe);
  EXPECT_EQ(ids[5].unserved_reason[sizeof ids[5].unserved_reason - 1], '\0');
  auto a = agree_on_service(ids, &t);
  EXPECT_FALSE(a.served);
  EXPECT_NE(a.reason.find("rank 5"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("could not prepare topocoll's init: cudaStreamCreate: out of"),
            std::string::npos) << a.reason;
  // A default record marked the same way (the host-error path) is still a valid record.
  RankIdentity bare;
  mark_unserved(bare, "host error in topocoll init");
  ids = identities_of(t, 8);
  ids[2] = bare;
  a = agree_on_service(ids, &t);
  EXPECT_FALSE(a.served);
  EXPECT_NE(a.reason.find("rank 2"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("could not prepare topocoll's init: host error"), std::string::npos)
      << a.reason;
}

// The identity a rank sends carries the process context's host and fingerprint: the one
// topology every face of the process loaded (plugin/process_context.h).
TEST(Identity, CarriesTheProcessContextsHostAndFingerprint) {
  const std::string path = std::string(TOPOCOLL_BINARY_DIR) + "/interposer_good_topology.json";
  const topo::Topology two = bigraph(2, 2);
  std::ofstream(path) << topo::topology_to_json(two).dump();
  const std::string first = two.hosts()[0].name;
  const ProcessContext context = make_process_context(
      config::read_env({{"TOPOCOLL_TOPO_FILE", path}, {"NCCL_HOSTID", first + ".cluster.example"}}));
  ASSERT_NE(context.topology, nullptr) << context.topology_error;
  const RankIdentity id = make_identity(3, context, true, 86, 99);
  EXPECT_EQ(std::string(id.host), first) << "the topology's spelling of the host";
  EXPECT_EQ(id.gpu, 3);
  EXPECT_EQ(id.compute_capability, 86);
  EXPECT_EQ(id.settings_hash, 99u);
  EXPECT_EQ(id.topology_hash, topo::topology_fingerprint(two));
  EXPECT_TRUE(id.flags & RankIdentity::kTopologyLoaded);
  const ProcessContext none = make_process_context(config::read_env({{"NCCL_HOSTID", "node17"}}));
  const RankIdentity unloaded = make_identity(0, none, true, 0, 99);
  EXPECT_EQ(std::string(unloaded.host), "node17");
  EXPECT_FALSE(unloaded.flags & RankIdentity::kTopologyLoaded);
  EXPECT_EQ(unloaded.topology_hash, 0u);
}

TEST(Identity, GpuAsTheHostNumbersIt) {
  EXPECT_EQ(host_gpu_index(0, "3,5"), 3);
  EXPECT_EQ(host_gpu_index(1, "3,5"), 5);
  EXPECT_EQ(host_gpu_index(1, " 3, 5 "), 5) << "whitespace around each index, as every value";
  EXPECT_EQ(host_gpu_index(0, "GPU-1234abcd"), 0);
  // UUIDs: the device's place among the host's GPUs by PCI address, as the driver lists
  // them (lower case, 8-digit domain) while CUDA writes upper case with a 4-digit domain.
  const std::string dir = std::string(TOPOCOLL_BINARY_DIR) + "/interposer_driver_gpus";
  std::filesystem::remove_all(dir);
  for (const char* g : {"00000000:b1:00.0", "00000000:1a:00.0", "00000000:3d:00.0", "not-a-gpu"})
    std::filesystem::create_directories(dir + "/" + g);
  EXPECT_EQ(host_gpu_index(0, "GPU-1234abcd", "0000:3D:00.0", dir), 1);
  EXPECT_EQ(host_gpu_index(0, "GPU-1234abcd", "0000:B1:00.0", dir), 2);
  EXPECT_EQ(host_gpu_index(1, "MIG-5678,GPU-9abc", "0000:1A:00.0", dir), 0);
  EXPECT_EQ(host_gpu_index(0, "MIG-5678,GPU-9abc", "0000:99:00.0", dir), 0);  // not listed: the ordinal
  EXPECT_EQ(host_gpu_index(1, "MIG-5678,GPU-9abc", "", dir), 1);
  EXPECT_EQ(host_gpu_index(1, "MIG-5678,GPU-9abc", "0000:1A:00.0", dir + "/missing"), 1);
  EXPECT_EQ(host_gpu_index(1, "3,5", "0000:1A:00.0", dir), 5);  // integer lists are not affected
  std::filesystem::remove_all(dir);
  EXPECT_EQ(host_gpu_index(2, ""), 2);
}

class RouteDecision : public ::testing::Test {
 protected:
  RouteDecision() : topology_(bigraph(2, 2)), placement_(sched::first_endpoints(topology_, 8)) {}
  RouteRequest input(sched::Collective c, int64_t count) {
    RouteRequest in;
    in.topology = &topology_;
    in.placement = &placement_;
    in.rank = 2;
    in.key = {c, int(ncclFloat32), count};
    in.elem_bytes = 4;
    return in;
  }
  topo::Topology topology_;
  sched::Placement placement_;
};

TEST_F(RouteDecision, OverridesDecide) {
  InterposerConfig cfg;
  cfg.algo = AlgoChoice::Nccl;
  EXPECT_EQ(decide_route(input(sched::Collective::AllReduce, 1 << 20), cfg)->target, RouteTarget::Nccl);
  cfg.algo = AlgoChoice::Schedule;
  cfg.schedule_algo = "hd";
  auto hd = decide_route(input(sched::Collective::AllReduce, 1 << 20), cfg);
  ASSERT_EQ(hd->target, RouteTarget::Schedule) << hd->reason;
  EXPECT_EQ(hd->algo, "hd");
  ASSERT_NE(hd->schedule, nullptr);
  EXPECT_EQ(hd->schedule->nranks, 8);
  EXPECT_EQ(hd->schedule->count, 1 << 20);
  cfg.min_bytes = 8 << 20;  // 4 MiB call is below it
  auto small = decide_route(input(sched::Collective::AllReduce, 1 << 20), cfg);
  EXPECT_EQ(small->target, RouteTarget::Nccl);
  EXPECT_NE(small->reason.find("TOPOCOLL_MIN_BYTES"), std::string::npos);
  cfg.min_bytes = 0;
  cfg.max_bytes = 1 << 10;
  EXPECT_NE(decide_route(input(sched::Collective::AllGather, 1 << 10), cfg)->reason.find("TOPOCOLL_MAX_BYTES"),
            std::string::npos);
  cfg.max_bytes = INT64_MAX;
  cfg.schedule_algo = "hier";
  auto hier = decide_route(input(sched::Collective::AllToAll, 4096), cfg);
  EXPECT_EQ(hier->target, RouteTarget::Nccl);
  // The NAP paper's log-step allreduce leaves 8 ranks with different bits: served when
  // forced, saying so; auto never picks it.
  cfg.schedule_algo = "fc";
  auto fc = decide_route(input(sched::Collective::AllReduce, 256), cfg);
  ASSERT_EQ(fc->target, RouteTarget::Schedule) << fc->reason;
  EXPECT_NE(fc->reason.find("bitwise-identical"), std::string::npos) << fc->reason;
  cfg.schedule_algo = "rd";
  EXPECT_EQ(decide_route(input(sched::Collective::AllReduce, 256), cfg)->reason, "TOPOCOLL_ALGO=rd");
  cfg.algo = AlgoChoice::NcclTopoRing;
  EXPECT_EQ(decide_route(input(sched::Collective::ReduceScatter, 4096), cfg)->target, RouteTarget::NcclTopoRing);
  EXPECT_EQ(decide_route(input(sched::Collective::AllToAll, 4096), cfg)->target, RouteTarget::Nccl);
}

// What the settings decide alone (every rank alike) is decided without allocating: a rank
// out of host memory sends such a call to NCCL as its peers do, and a call that needs
// planning is left to it (null).
TEST_F(RouteDecision, WhatTheSettingsDecideAllocatesNothing) {
  sched::Placement one = sched::first_endpoints(topology_, 1);
  RouteRequest single = input(sched::Collective::AllReduce, 1 << 20);
  single.placement = &one;
  struct Case {
    const char* reason;
    InterposerConfig cfg;
    RouteRequest in;
  };
  std::vector<Case> cases(4);
  cases[0] = {"TOPOCOLL_ALGO=nccl", {}, input(sched::Collective::AllReduce, 1 << 20)};
  cases[0].cfg.algo = AlgoChoice::Nccl;
  cases[1] = {"below TOPOCOLL_MIN_BYTES", {}, input(sched::Collective::AllGather, 1 << 10)};
  cases[1].cfg.min_bytes = 1 << 20;
  cases[2] = {"above TOPOCOLL_MAX_BYTES", {}, input(sched::Collective::ReduceScatter, 1 << 20)};
  cases[2].cfg.max_bytes = 1 << 20;
  cases[3] = {"single-rank communicator", {}, single};
  for (const Case& c : cases) {
    std::shared_ptr<const Route> settled, decided;
    EXPECT_FALSE(testing::with_allocation_failing(1, [&] {
      settled = route_settled_by_config(c.in, c.cfg);
      decided = decide_route(c.in, c.cfg);
    })) << c.reason << ": an allocation";
    ASSERT_NE(settled, nullptr) << c.reason;
    EXPECT_EQ(settled->target, RouteTarget::Nccl);
    EXPECT_EQ(settled->reason, c.reason);
    EXPECT_EQ(decided, settled) << c.reason;
  }
  EXPECT_EQ(route_settled_by_config(input(sched::Collective::AllReduce, 1 << 20), InterposerConfig{}), nullptr)
      << "auto plans it";
}

// Reduce-scatter and allgather on the topology-ordered split pay for permuting their
// blocks (one copy of the whole buffer, read and written); allreduce needs none.
TEST_F(RouteDecision, TopologyOrderedSplitChargesTheBlockPermutation) {
  const std::vector<int> ring = sched::topology_aware_ring(topology_, placement_);
  bool identity = true;
  for (std::size_t j = 0; j < ring.size(); ++j) identity = identity && ring[j] == int(j);
  ASSERT_FALSE(identity) << "this topology's ring must differ from the rank order";
  InterposerConfig cfg;
  cfg.algo = AlgoChoice::NcclTopoRing;
  const int64_t count = 1 << 16;
  for (auto c : {sched::Collective::AllReduce, sched::Collective::ReduceScatter,
                 sched::Collective::AllGather}) {
    const RouteRequest in = input(c, count);
    sched::PlanRequest r;
    r.collective = c;
    r.algo = "ring-topo";
    r.bytes = sched::size_of_count(c, count, 4, 8);
    r.elem_size = 4;
    r.endpoints = placement_.endpoint_of_rank;
    r.cost.alpha_us = 1.0;  // NCCL's in-kernel step, as the planner charges it
    r.verify = false;
    const double ring_us = sched::make_plan(topology_, r).predicted_us;
    const double copy_us = c == sched::Collective::AllReduce
                               ? 0.0
                               : 2.0 * double(r.bytes) * sched::CostParams{}.gamma_us_per_byte;
    EXPECT_NEAR(decide_route(in, cfg)->predicted_us, ring_us + copy_us, 1e-9) << int(c);
  }
}

TEST_F(RouteDecision, AutoIsDeterministicAndNeverPredictsWorseThanNccl) {
  InterposerConfig cfg;
  for (auto c : {sched::Collective::AllReduce, sched::Collective::ReduceScatter,
                 sched::Collective::AllGather, sched::Collective::AllToAll})
    for (int64_t count : {1, 1000, 1 << 16, 1 << 22}) {
      auto a = decide_route(input(c, count), cfg);
      auto b = decide_route(input(c, count), cfg);
      EXPECT_EQ(a->algo, b->algo);
      EXPECT_EQ(a->target, b->target);
      if (a->target != RouteTarget::Nccl) {
        EXPECT_LE(a->predicted_us, a->nccl_us) << a->reason;
      }
      EXPECT_FALSE(a->reason.empty());
    }
}

// Out of host memory at any point of planning: the decision throws, and never comes back as
// another route (NCCL, say) that this rank alone would take while its peers, which planned
// the same call with memory to spare, serve it. Each rank plans without knowing its peers'
// lot, so a failure here cannot be a decision (route_for marks the communicator failed).
TEST_F(RouteDecision, RunningOutOfMemoryWhilePlanningNeverChangesTheRoute) {
  for (const AlgoChoice algo : {AlgoChoice::Auto, AlgoChoice::Schedule}) {
    InterposerConfig cfg;
    cfg.algo = algo;
    cfg.schedule_algo = "hd";
    // Auto then takes the planner's schedule here (no topology-ordered split to weigh):
    // the route is planning's to decide.
    cfg.auto_margin = 1.0;
    cfg.ring_comm = RingCommMode::Off;
    for (auto c : {sched::Collective::AllReduce, sched::Collective::ReduceScatter, sched::Collective::AllGather}) {
      const RouteRequest in = input(c, 1 << 20);
      const std::shared_ptr<const Route> normal = decide_route(in, cfg);
      ASSERT_EQ(normal->target, RouteTarget::Schedule) << normal->reason;
      for (const bool persistent : {false, true}) {
        int failed = 0, tried = 0;
        // The k-th allocation fails (alone, or with every one after it), for every k, until
        // planning makes fewer than k.
        for (long k = 1;; ++k) {
          std::shared_ptr<const Route> route;
          bool threw = false;
          const bool reached = testing::with_allocation_failing(k, persistent, [&] {
            try {
              route = decide_route(in, cfg);
            } catch (const std::bad_alloc&) {
              threw = true;
            }
          });
          if (!reached) break;
          ++tried;
          if (threw) {
            ++failed;
            continue;
          }
          ASSERT_NE(route, nullptr);
          EXPECT_EQ(route->target, normal->target) << "allocation " << k << ": " << route->reason;
          EXPECT_EQ(route->algo, normal->algo) << "allocation " << k << ": " << route->reason;
          EXPECT_EQ(route->reason, normal->reason) << "allocation " << k;
          EXPECT_DOUBLE_EQ(route->predicted_us, normal->predicted_us) << "allocation " << k;
          EXPECT_DOUBLE_EQ(route->nccl_us, normal->nccl_us) << "allocation " << k;
      }
      EXPECT_GT(tried, 10) << "planning allocates; the failures must reach it";
      EXPECT_GT(failed, 0);
      }
    }
  }
}

// Auto compares against NCCL's best algorithm/protocol (the tuner's model of Ring, Tree,
// PAT with LL/LL128/Simple) and leaves NCCL only with TOPOCOLL_AUTO_MARGIN to spare.
TEST_F(RouteDecision, AutoLeavesNcclOnlyWithTheMarginOverNcclsBest) {
  InterposerConfig cfg;
  EXPECT_DOUBLE_EQ(cfg.auto_margin, 1.3);
  int taken = 0;
  for (auto c : {sched::Collective::AllReduce, sched::Collective::ReduceScatter,
                 sched::Collective::AllGather})
    for (int64_t count : {1, 1000, 1 << 16, 1 << 20, 1 << 24}) {
      const RouteRequest in = input(c, count);
      const double bytes = double(sched::size_of_count(c, count, 4, 8));
      const auto best = nccl_best(topology_, placement_, c, bytes);
      ASSERT_TRUE(best.has_value());
      auto p = decide_route(in, cfg);
      EXPECT_LE(p->nccl_us, best->us + 1e-9) << "NCCL's best must bound what topocoll beats";
      if (p->target != RouteTarget::Nccl) {
        ++taken;
        EXPECT_LE(p->predicted_us * 1.3, p->nccl_us + 1e-9) << p->reason;
      }
      InterposerConfig strict = cfg;
      strict.auto_margin = 1000.0;
      EXPECT_EQ(decide_route(in, strict)->target, RouteTarget::Nccl) << "margin 1000: " << p->reason;
    }
  (void)taken;
}

}  // namespace
}  // namespace topocoll::plugin::interposer
