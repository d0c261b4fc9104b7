// Planner: topology + ranks + collective + algorithm + size -> placement, schedule,
// verification, per-step link loads and predicted time. The algorithms are the registry's
// (sched/algorithm_registry.h); `auto` plans every one the registry lets it weigh for the
// collective and keeps the one the cost model predicts fastest. This is the one entry point
// the CLI, the tuner and the interposer use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sched/cost_model.h"
#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

// make_plan refuses more ranks than this on a NAP topology (std::invalid_argument naming
// both): its multipath routes make planning grow with ranks x paths.
inline constexpr int kMaxNapPlanRanks = 1024;

// Why `auto` passes over an allreduce schedule that does not claim bitwise-identical results
// on every rank (Schedule::claims_bitwise_identical: the NAP paper's shifted log-step).
inline constexpr std::string_view kNotBitwiseIdentical =
    "the ranks would not end with bitwise-identical results (each reduces in its own order)";

struct PlanRequest {
  Collective collective = Collective::AllReduce;
  // A name of the registry (sched/algorithm_registry.h, docs/plan-format.md), or auto.
  std::string algo = "auto";
  // nccl-tests "size": allreduce the vector; reduce-scatter and allgather the whole
  // (P x per-rank) buffer; all-to-all each rank's whole send buffer.
  int64_t bytes = 0;
  size_t elem_size = 4;
  int nranks = 0;              // ranks on endpoints 0..nranks-1; 0 = every endpoint
  std::vector<int> endpoints;  // explicit rank -> endpoint (overrides nranks)
  CostParams cost;
  bool verify = true;          // run the symbolic verifier (when the build has one)
  bool keep_link_detail = true;  // per-link loads per step (off for very large plans)
};

// One algorithm `auto` considered.
struct PlanCandidate {
  std::string algo;
  bool applicable = false;
  std::string why_not;  // when not applicable
  double predicted_us = 0;
  double max_link_load = 0;
};

struct Plan {
  std::string algo;  // the algorithm planned (auto resolved)
  Collective collective = Collective::AllReduce;
  int64_t bytes = 0;
  size_t elem_size = 4;
  Placement placement;
  std::vector<int> order;  // position / virtual rank -> communicator rank the generator used
  RankOrder order_quality;  // HD orders: load reached and lower bound
  Schedule schedule;
  bool verified = false;  // the verifier ran and accepted the schedule
  std::string verification;  // its verdict, or why it did not run
  LinkLoad link_load;
  CostEstimate cost;
  double predicted_us = 0;
  double busbw_gbs = 0;
  std::vector<PlanCandidate> candidates;  // auto: every algorithm considered
};

// Throws std::invalid_argument naming the bad request field (unknown algorithm, an
// algorithm that does not apply to the collective or topology, bad sizes or ranks).
Plan make_plan(const topo::Topology& topology, const PlanRequest& request);

// The element count NCCL would pass for a request (see PlanRequest::bytes).
int64_t plan_count(const PlanRequest& request, int nranks);

// "allreduce", "reduce_scatter", "allgather", "alltoall" (also with '-' or no separator).
bool parse_collective(std::string_view name, Collective& out);

}  // namespace topocoll::sched
