// Benchmark of one collective schedule on a host-backend group, nccl-tests style: warm-up,
// timed iterations; the warm-up iterations' and one final iteration's results checked against
// the exact expected data (exec/collective_check.h), the median iteration time of the slowest rank reported,
// algbw/busbw computed as nccl-tests does (doc/PERFORMANCE.md there: busbw = algbw *
// 2(n-1)/n for allreduce, (n-1)/n for reduce-scatter, allgather and all-to-all).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/bootstrap.h"
#include "exec/host_backend.h"
#include "kernels/datatype.h"
#include "sched/schedule.h"

namespace topocoll::exec {

struct BenchmarkSettings {
  kernels::DataType dtype = kernels::DataType::Float32;
  kernels::ReduceOp op = kernels::ReduceOp::Sum;
  int iters = 20;
  int warmup = 2;
  bool check = true;  // verify the warm-up iterations and one after the timed ones
  // Large sizes run fewer iterations (at least 2) so one case takes about this long.
  double target_seconds = 1.0;
};

struct BenchmarkRow {
  std::string algo;
  sched::Collective collective = sched::Collective::AllReduce;
  int nranks = 0;
  int64_t bytes = 0;  // nccl-tests "size"
  int64_t count = 0;  // nccl-tests "count"
  kernels::DataType dtype = kernels::DataType::Float32;
  kernels::ReduceOp op = kernels::ReduceOp::Sum;
  int iters = 0;
  double time_us = 0;  // median iteration time of the slowest rank
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = -1;  // wrong elements over all ranks and checked iterations; -1 = not checked
  // From the planner when a topology was given; negative when unknown.
  double predicted_us = -1;
  double max_link_load = -1;
};

// Memory a benchmark rank reuses across cases; it only grows.
struct BenchmarkBuffers {
  std::vector<unsigned char> input, output, scratch;
};

// Runs on every rank of the group with the same schedule (checked through the bootstrap:
// a rank whose schedule differs makes every rank throw). Returns the row every rank agrees
// on; its size is what the schedule's count moves (nccl-tests' size of it).
BenchmarkRow measure_collective(const sched::Schedule& schedule, const std::string& algo,
                                const BenchmarkSettings& settings,
                                HostBackend& backend, BootstrapClient& group,
                                BenchmarkBuffers& buffers);

// Fingerprint of a schedule (ops of every rank), to check that ranks agree on a plan.
uint64_t schedule_fingerprint(const sched::Schedule& schedule);

}  // namespace topocoll::exec
