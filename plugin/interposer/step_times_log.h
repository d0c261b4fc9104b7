// TOPOCOLL_STEP_TIMES: a served communicator's step timeline (exec/step_timeline.h) and the
// INFO lines its read collectives become, so a profile comes from NCCL's own log:
//
//   comm 0x.. rank 0/16 step times of allreduce 1048576 B ring-topo (30 steps, 18803.2 us
//   in all), steps 0-15 (us@bytes sent): 626.1@65536 612.0@65536 ...
//
// One line per kStepsPerLine steps (NCCL's log lines are cut at 1 KiB); perf/gpu's record
// script reads them back (docs/fabric.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/step_timeline.h"
#include "sched/schedule.h"

namespace topocoll::plugin::interposer {

constexpr std::size_t kStepsPerLine = 16;

// What `rank` sends in each step of `schedule`, in bytes.
std::vector<uint64_t> step_bytes_sent(const sched::Schedule& schedule, int rank, std::size_t elem_bytes);

// The lines one read collective is logged as (without NCCL's and topocoll's prefixes).
std::vector<std::string> step_times_lines(const void* comm, int rank, int nranks,
                                          const exec::StepTimes& times);

// A timeline whose collectives are logged at INFO (TUNING) and whose problems are warnings.
std::unique_ptr<exec::StepTimeline> make_logged_step_timeline(const void* comm, int rank, int nranks);

}  // namespace topocoll::plugin::interposer
