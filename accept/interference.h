// The wiring phase's second check, for fabrics whose switches send no ICMP: a flow slow in
// its round though each of its cables was fast for another flow is measured alone, then
// beside its round once more. A cable the file keeps apart from the round but that the
// round really shares halves the flow (TCP flows through one queue share it, if unevenly);
// a crowded machine's CPU slows it a little and differently each time.
#pragma once

#include "accept/localization.h"

namespace topocoll::accept {

struct InterferenceCheck {
  FlowMeasurement in_round, alone, again;
  bool interference = false;  // fast alone, and beside its round about half of that, twice
};

// Beside its round, as a fraction of alone, below which the flow shares a cable: two flows
// on one cable leave the slower at most 1/2, and the mean of two runs stays near 1/2 however
// unevenly TCP splits the cable; a healthy fabric on a loaded 2-core machine was seen at
// 0.77-0.79 beside a round of 16 flows. 2/3 lies between, nearer the shared case.
inline constexpr double kSharedCableFraction = 2.0 / 3.0;

// Judges a check whose `alone` and `again` were measured (`again` only when fast alone):
// interference when fast alone (at least `threshold` of the expected rate) and, beside its
// round, both times together below kSharedCableFraction of what it reached alone.
bool judge_interference(const InterferenceCheck& check, double threshold);

// Slow alone as well as in its round, though each of its cables carried a flow at full rate
// elsewhere: not a slow cable and not a shared one, but a path the file does not describe
// (a route, an ECMP member, an MTU or a NIC setting). Two slow runs, as a slow cable needs.
bool slow_alone(const InterferenceCheck& check, double threshold);

}  // namespace topocoll::accept
