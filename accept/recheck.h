// The cable phase's second look: before a cable is named slow, the slow flows across it run
// once more, each beside only the other rechecked flows of its own (contention-free) round.
// A loaded machine slows a flow now and then and by a little (a healthy bigraph-32 with 32
// ranks on 2 cores once showed a flow at 77 %); a degraded cable slows every flow
// across it, every time. So a flow counts at the faster of its two runs.
#pragma once

#include <utility>
#include <vector>

#include "accept/localization.h"

namespace topocoll::accept {

// The flows to run again, as (round they ran in, their indices in `flows`): alive, below the
// threshold, and across a cable `localization` judged slow. Up to `max_rounds` rounds, in
// the order to run them while the budget lasts: those whose flows came nearest the
// threshold first (a cable at a quarter of its rate is slow beyond doubt; one at 77 % may
// be the machine).
std::vector<std::pair<int, std::vector<int>>> flows_to_recheck(const Localization& localization,
                                                 const std::vector<FlowMeasurement>& flows,
                                                 double threshold, int max_rounds);

// One flow measured in its round and again: what localisation then uses.
struct Recheck {
  FlowMeasurement first, again;
  FlowMeasurement best() const;  // the faster run (a run that failed only when both did)
};

}  // namespace topocoll::accept
