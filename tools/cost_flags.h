// The cost model's command-line settings (--alpha-us, --alpha-msg-us, --gamma-gbs), read the
// same way by plan, bench, simulate (--alpha-us, --gamma-gbs) and accept (the alphas). Bounded, so every prediction stays finite:
// --gamma-gbs 1e-320 made every time NaN (a plan's JSON then held null), --alpha-us 1e308
// made every candidate infinite and `auto` pick at random.
#pragma once

#include <stdexcept>
#include <string>

#include "config/value_grammar.h"
#include "sched/cost_model.h"

namespace topocoll::cli {

// Per-step and per-message overheads up to 1 s; reduction from 1 MB/s to 100 TB/s.
inline constexpr double kMostOverheadUs = 1e6;
inline constexpr double kLeastGammaGbs = 1e-3, kMostGammaGbs = 1e5;

// Sets `cost` from `flag` and its `value` when `flag` is one of the three; false otherwise.
// Throws naming the flag, the value and the range.
inline bool parse_cost_flag(const std::string& flag, const std::string& value, sched::CostParams& cost) {
  if (flag == "--alpha-us") {
    cost.alpha_us = config::number_argument(flag, value, 0, kMostOverheadUs);
  } else if (flag == "--alpha-msg-us") {
    cost.alpha_message_us = config::number_argument(flag, value, 0, kMostOverheadUs);
  } else if (flag == "--gamma-gbs") {
    cost.gamma_us_per_byte = 1.0 / (config::number_argument(flag, value, kLeastGammaGbs, kMostGammaGbs) * 1e3);
  } else {
    return false;
  }
  return true;
}

}  // namespace topocoll::cli
