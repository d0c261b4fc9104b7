// The wiring phase's re-run check: a shared cable is named, a crowded CPU is not.
#include "accept/interference.h"

#include <gtest/gtest.h>

namespace topocoll::accept {
namespace {

FlowMeasurement at(double ratio, bool dead = false) {
  FlowMeasurement m;
  m.expected_gbps = 0.025;
  m.measured_gbps = dead ? 0 : ratio * m.expected_gbps;
  m.dead = dead;
  return m;
}

InterferenceCheck check(FlowMeasurement in_round, FlowMeasurement alone, FlowMeasurement again) {
  return InterferenceCheck{in_round, alone, again, false};
}

TEST(Interference, AFlowHalvedBesideItsRoundBothTimesSharesACable) {
  EXPECT_TRUE(judge_interference(check(at(0.48), at(0.99), at(0.52)), 0.8));
}

TEST(Interference, UnevenTcpSharesOfOneCableStillCount) {
  // One queue, two flows: 35 % then 62 % of the cable; together about half of alone.
  EXPECT_TRUE(judge_interference(check(at(0.35), at(1.0), at(0.62)), 0.8));
}

TEST(Interference, NothingArrivingBesideItsRoundIsInterference) {
  EXPECT_TRUE(judge_interference(check(at(0.4), at(1.0), at(0, true)), 0.8));
}

TEST(Interference, ACrowdedCpuSlowingAHealthyFlowALittleIsNot) {
  // What a healthy bigraph-32 showed with 32 ranks on 2 cores: 77 % and 79 % beside the
  // round, 100 % alone. Below the cable threshold, but nowhere near a shared cable's half.
  EXPECT_FALSE(judge_interference(check(at(0.77), at(1.0), at(0.79)), 0.8));
}

TEST(Interference, AFlowFastAgainBesideItsRoundWasAPassingDisturbance) {
  EXPECT_FALSE(judge_interference(check(at(0.4), at(1.0), at(0.97)), 0.8));
  // Dead in its round once, fast alone and fast beside it again: a connection that failed,
  // not a shared cable (the mean of 0 and 97 % read as one).
  EXPECT_FALSE(judge_interference(check(at(0, true), at(1.0), at(0.97)), 0.8));
  EXPECT_TRUE(judge_interference(check(at(0, true), at(1.0), at(0.5)), 0.8));
}

TEST(Interference, AFlowSlowAloneIsNotJudgedHere) {
  // Its own cables are slow: the cable phase names them, not the wiring.
  EXPECT_FALSE(judge_interference(check(at(0.3), at(0.5), at(0.3)), 0.8));
  EXPECT_FALSE(judge_interference(check(at(0.3), at(0, true), FlowMeasurement{}), 0.8));
}

TEST(Interference, AFlowSlowAloneIsASlowPath) {
  EXPECT_TRUE(slow_alone(check(at(0.3), at(0.5), at(0.3)), 0.8));
  EXPECT_TRUE(slow_alone(check(at(0.3), at(0, true), FlowMeasurement{}), 0.8));
  EXPECT_FALSE(slow_alone(check(at(0.48), at(0.99), at(0.52)), 0.8));
  EXPECT_FALSE(slow_alone(check(at(0.77), at(0.8), at(0.79)), 0.8));  // at the threshold: fast
}

TEST(Interference, TheFractionIsRelativeToWhatTheFlowReachedAlone) {
  // A flow capped at 85 % by its host even alone, at 55 % beside the round: about 2/3 of
  // alone; at 45 %, about half.
  EXPECT_FALSE(judge_interference(check(at(0.60), at(0.85), at(0.60)), 0.8));
  EXPECT_TRUE(judge_interference(check(at(0.45), at(0.85), at(0.45)), 0.8));
}

}  // namespace
}  // namespace topocoll::accept
