// The lines TOPOCOLL_STEP_TIMES logs (plugin/interposer/step_times_log.h): their exact form,
// which perf/gpu/fabric_nccl_record.py reads back, and the bytes each step sends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plugin/interposer/step_times_log.h"
#include "sched/schedule_builder.h"

namespace topocoll::plugin::interposer {
namespace {

TEST(StepTimesLog, OneLineNamesTheCollectiveTheTotalAndEveryStepsTimeAndBytes) {
  exec::StepTimes t{"allreduce 1048576 B ring-topo", {626.14, 12.0}, {65536, 0}};
  const auto lines = step_times_lines(reinterpret_cast<const void*>(0x1234), 3, 16, t);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "comm 0x1234 rank 3/16 step times of allreduce 1048576 B ring-topo (2 steps, 638.1 us in all), "
            "steps 0-1 (us@bytes sent): 626.1@65536 12.0@0");
}

TEST(StepTimesLog, LongCollectivesAreCutIntoLinesOfSixteenSteps) {
  exec::StepTimes t{"allgather 64 B ring", std::vector<double>(33, 1.0), std::vector<uint64_t>(33, 2)};
  const auto lines = step_times_lines(nullptr, 0, 34, t);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("(33 steps, 33.0 us in all), steps 0-15 (us@bytes sent):"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("steps 16-31 (us@bytes sent):"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("steps 32-32 (us@bytes sent): 1.0@2"), std::string::npos) << lines[2];
  for (const std::string& l : lines) EXPECT_LT(l.size(), 900u) << "NCCL's log cuts lines at 1 KiB";
  // Sixteen of the longest values still fit.
  exec::StepTimes wide{"reducescatter 1099511627776 B hd-naive", std::vector<double>(16, 9999999.9),
                       std::vector<uint64_t>(16, 1099511627776ull)};
  EXPECT_LT(step_times_lines(nullptr, 1023, 1024, wide)[0].size(), 900u);
}

TEST(StepTimesLog, StepBytesAreWhatTheRankSendsInEachStep) {
  sched::ScheduleBuilder b(sched::Collective::AllReduce, "test", 2, 4, 4, 4);
  for (int r = 0; r < 2; ++r) {
    b.send(0, r, 1 - r, {sched::Buf::Input, 0}, 3);
    b.recv(0, r, 1 - r, {sched::Buf::Scratch, 0}, 3);
    b.copy(1, r, {sched::Buf::Output, 0}, {sched::Buf::Input, 0}, 4);
    b.send(2, r, 1 - r, {sched::Buf::Output, 0}, 1);
    b.recv(2, r, 1 - r, {sched::Buf::Scratch, 0}, 1);
    b.need_scratch(r, 3);
  }
  const sched::Schedule s = b.finish();
  EXPECT_EQ(step_bytes_sent(s, 1, 8), (std::vector<uint64_t>{24, 0, 8}));
}

}  // namespace
}  // namespace topocoll::plugin::interposer
