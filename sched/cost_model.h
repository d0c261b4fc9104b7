// Cost model: alpha-beta-gamma per link with sharing (docs/plan-format.md, "Cost model").
//
//  flow time  = sum of link and switch latencies on its path
//             + max over its links of  min(B_l, n_l * b) / rate_l
//    where b is the flow's bytes on that path (bytes * fraction), B_l all bytes the step puts
//    on link l and n_l the number of flow portions on it: with equal portions each of the
//    n_l flows gets 1/n_l of the rate; a small flow among large ones finishes after n_l of
//    its own size, a large one after the link drained everything. A striped flow takes the
//    slowest of its paths.
//  step time  = alpha + max(alpha_message * (most messages one rank sends plus receives),
//                             slowest flow)
//             + gamma * (most bytes one rank reduces or copies)
//    (message handling is CPU work that overlaps the wire; alpha is the serial part)
//  pipelined step (exec/pipeline.h): a step whose largest message is cut into C > 1 pieces
//    and that reduces or copies runs C rounds, the local ops of round j overlapping the
//    transfers of round j + 1, a pipeline of C stages of two kinds:
//      t = max(alpha_message * messages, latency + wire / C)   one round's transfers
//      r = gamma * bytes / C                                  one round's local ops
//      time = C * alpha + t + (C - 1) * max(t, r) + r
//    (C = 1 gives the step time above). A cut step without local ops posts every piece in
//    one batch: alpha + max(alpha_message * messages * C, slowest flow) + 0.
//  total      = sum of steps (steps with no transfer and no local op cost nothing).
#pragma once

#include <cstdint>
#include <vector>

#include "sched/link_load.h"
#include "sched/pipelining.h"
#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

struct CostParams {
  double alpha_us = 3.0;  // software overhead per step (post, completion, launch)
  // Software cost of each message a rank sends or receives in a step. NCCL batches a step's
  // peers in one group (0); a host transport pays system calls and thread wake-ups per
  // message, which on a few cores shared by many ranks is what small steps cost.
  double alpha_message_us = 0;
  // Reduction cost per byte of reduce input: a GPU reduces at ~1500 GB/s of memory traffic.
  double gamma_us_per_byte = 1.0 / 1.5e6;
  bool include_latency = true;  // link and switch latencies from the topology
  // How the engine cuts large steps (exec/pipeline.h); off by default, set it to the
  // engine's (exec::PipelineOptions) to predict what runs.
  PipelineShape pipeline{};
};

struct StepCost {
  double time_us = 0;
  double transfer_us = 0;  // slowest flow, latency included
  double reduce_us = 0;
  double message_us = 0;  // alpha_message x the busiest rank's messages (uncut)
  int rounds = 1;         // pipelined rounds (1: not pipelined)
  int slowest_flow_src = -1, slowest_flow_dst = -1;  // communicator ranks
};

struct CostEstimate {
  double total_us = 0;
  std::vector<StepCost> steps;
};

CostEstimate estimate_cost(const Schedule& schedule, const Placement& placement,
                           size_t elem_size, RouteCache& routes, const CostParams& params = {});

// Link loads and cost in one pass over the schedule (what the planner uses).
struct ScheduleAnalysis {
  LinkLoad load;
  CostEstimate cost;
};
ScheduleAnalysis analyze_schedule(const Schedule& schedule, const Placement& placement,
                                  size_t elem_size, RouteCache& routes,
                                  const CostParams& params = {}, LinkLoadOptions options = {});

}  // namespace topocoll::sched
