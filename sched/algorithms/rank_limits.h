// Rank limits the algorithm entries share (sched/algorithms/*.cpp), with the refusal each
// gives: schedules whose IR grows as P^2 stop where it would no longer fit in memory.
#pragma once

#include <cstdint>
#include <string>

#include "sched/schedule.h"

namespace topocoll::sched {

// Rings have 2(P-1) steps: their IR grows as P^2 (about 1 GB at 1024 ranks).
inline constexpr int kMaxRingRanks = 1024;
// `auto` stops weighing rings earlier, where HD and the hierarchical schedules win anyway.
inline constexpr int kMaxAutoRingRanks = 512;
// Whole-buffer algorithms move P^2 transfers per step; beyond this their schedules would
// not fit in memory, and the network would not favour them anyway.
inline constexpr int kMaxDirectRanks = 1024;

inline std::string ring_rank_refusal(int nranks) {
  if (nranks <= kMaxRingRanks) return "";
  const int64_t gib = int64_t(nranks) * 2 * nranks * 3 * int64_t(sizeof(Op)) >> 30;
  return "more than " + std::to_string(kMaxRingRanks) +
         " ranks (2(P-1) steps: the schedule would need ~" + std::to_string(gib) + " GiB)";
}

inline std::string direct_rank_refusal(int nranks) {
  if (nranks <= kMaxDirectRanks) return "";
  return "more than " + std::to_string(kMaxDirectRanks) + " ranks (P^2 transfers per step)";
}

}  // namespace topocoll::sched
