#include "accept/interference.h"

namespace topocoll::accept {

bool judge_interference(const InterferenceCheck& c, double threshold) {
  if (c.alone.dead || c.alone.ratio() < threshold) return false;  // its own cables are slow
  if (c.again.dead) return true;  // fast alone, nothing arrives beside its round
  // Dead in its round once (a connection that failed) says nothing of how it shares: then
  // the run beside its round again alone judges.
  const double beside = c.in_round.dead ? c.again.ratio() : (c.in_round.ratio() + c.again.ratio()) / 2;
  return beside < kSharedCableFraction * c.alone.ratio();
}

bool slow_alone(const InterferenceCheck& c, double threshold) {
  return c.alone.dead || c.alone.ratio() < threshold;
}

}  // namespace topocoll::accept
