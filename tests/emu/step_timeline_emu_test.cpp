// The step timeline (exec/step_timeline.h) on the CUDA runtime emulation: which interval is
// each step's, that nothing is read before its last event completed, that a failed or
// half-marked collective is dropped (with one warning for CUDA failures), bounded memory,
// and that timing never leaves a CUDA error behind for the application.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "exec/step_timeline.h"
#include "tests/emu/emu_runtime.h"

namespace topocoll::exec {
namespace {

struct Collected {
  std::vector<StepTimes> read;
  std::vector<std::string> warnings;
  StepTimeline timeline{[this](const StepTimes& t) { read.push_back(t); },
                        [this](const std::string& w) { warnings.push_back(w); }};
};

class StreamFixture : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess); }
  void TearDown() override {
    cudaStreamDestroy(stream);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "timing left a CUDA error behind";
  }
  // One collective of `step_bytes.size()` steps, every boundary marked, ended whole.
  void time_one(StepTimeline& timeline, const char* label, std::vector<uint64_t> step_bytes) {
    const std::size_t boundaries = step_bytes.size() + 1;
    StepTimeline::Recording* r = timeline.begin(label, std::move(step_bytes));
    ASSERT_NE(r, nullptr);
    for (std::size_t k = 0; k < boundaries; ++k) r->mark(int(k), stream);
    timeline.end(r, true);
  }
  // Device work of at least `ms` on the stream.
  void work(int ms) {
    emu::enqueue(stream, [ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); });
  }
  cudaStream_t stream = nullptr;
};

using StepTimelineEmu = StreamFixture;

// Step k lies between boundaries k and k + 1: the work enqueued there is step k's.
TEST_F(StepTimelineEmu, EachStepIsTheIntervalBetweenItsTwoBoundaries) {
  Collected c;
  StepTimeline::Recording* r = c.timeline.begin("allreduce 96 B test", {10, 20, 30});
  ASSERT_NE(r, nullptr);
  r->mark(0, stream);
  r->mark(1, stream);
  work(30);
  r->mark(2, stream);
  r->mark(3, stream);
  c.timeline.end(r, true);
  EXPECT_EQ(c.timeline.unread(), 1u);
  c.timeline.harvest();
  ASSERT_EQ(c.read.size(), 1u);
  const StepTimes& t = c.read[0];
  EXPECT_EQ(t.label, "allreduce 96 B test");
  EXPECT_EQ(t.step_bytes, (std::vector<uint64_t>{10, 20, 30}));
  ASSERT_EQ(t.step_us.size(), 3u);
  EXPECT_GE(t.step_us[1], 30000.0) << "step 1 holds the 30 ms of work";
  for (double us : t.step_us) EXPECT_GE(us, 0.0);
  EXPECT_EQ(c.timeline.unread(), 0u);
  EXPECT_TRUE(c.warnings.empty());
}

// A collective still running is left for a later harvest (nothing waits), and collectives
// are read in the order they ran.
TEST_F(StepTimelineEmu, ACollectiveStillRunningIsReadLaterInOrder) {
  Collected c;
  time_one(c.timeline, "first", {1});
  emu::fail_next_call("cudaEventQuery", cudaErrorNotReady);
  c.timeline.harvest();
  EXPECT_TRUE(c.read.empty()) << "read before its last event completed";
  EXPECT_EQ(c.timeline.unread(), 1u);
  emu::fail_next_call("cudaEventQuery", cudaErrorNotReady);  // at the harvest of begin()
  time_one(c.timeline, "second", {1});
  EXPECT_TRUE(c.read.empty());
  emu::fail_next_call("cudaEventQuery", cudaErrorNotReady);
  c.timeline.harvest();
  EXPECT_TRUE(c.read.empty()) << "the oldest is still running: nothing after it is read either";
  EXPECT_EQ(c.timeline.unread(), 2u);
  c.timeline.harvest();
  ASSERT_EQ(c.read.size(), 2u);
  EXPECT_EQ(c.read[0].label, "first");
  EXPECT_EQ(c.read[1].label, "second");
}

// A collective that failed is dropped quietly (its own error is what the caller reports); one
// whose timing failed, or whose boundaries were not all marked, is dropped with a warning,
// once per timeline.
TEST_F(StepTimelineEmu, FailedOrHalfMarkedCollectivesAreDroppedWithOneWarning) {
  Collected c;
  StepTimeline::Recording* failed = c.timeline.begin("failed", {1, 1});
  failed->mark(0, stream);
  c.timeline.end(failed, false);

  StepTimeline::Recording* half = c.timeline.begin("half", {1, 1});
  half->mark(0, stream);
  half->mark(1, stream);
  c.timeline.end(half, true);
  c.timeline.harvest();
  EXPECT_TRUE(c.read.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("half"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("step boundary 2 was never marked"), std::string::npos) << c.warnings[0];

  StepTimeline::Recording* broken = c.timeline.begin("broken", {1});
  emu::fail_next_call("cudaEventRecord", cudaErrorLaunchFailure);
  broken->mark(0, stream);
  broken->mark(1, stream);
  c.timeline.end(broken, true);
  c.timeline.harvest();
  EXPECT_TRUE(c.read.empty());
  EXPECT_EQ(c.warnings.size(), 1u) << "one warning per timeline";

  // The timeline goes on timing the next collective.
  time_one(c.timeline, "fine", {1});
  c.timeline.drain();
  ASSERT_EQ(c.read.size(), 1u);
  EXPECT_EQ(c.read[0].label, "fine");
}

TEST_F(StepTimelineEmu, BoundariesOutOfOrderDropTheCollective) {
  Collected c;
  StepTimeline::Recording* r = c.timeline.begin("allreduce 8 B skipped", {4, 4});
  r->mark(0, stream);
  r->mark(2, stream);
  r->mark(1, stream);
  c.timeline.end(r, true);
  c.timeline.harvest();
  EXPECT_TRUE(c.read.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("step boundary 2 marked after 1"), std::string::npos) << c.warnings[0];
}

TEST_F(StepTimelineEmu, ACudaFailureIsNamedInTheWarning) {
  Collected c;
  StepTimeline::Recording* r = c.timeline.begin("allgather 4 B x", {4});
  emu::fail_next_call("cudaEventRecord", cudaErrorLaunchFailure);
  r->mark(0, stream);
  r->mark(1, stream);
  c.timeline.end(r, true);
  c.timeline.harvest();
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("allgather 4 B x"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("cudaEventRecord failed"), std::string::npos) << c.warnings[0];
}

TEST_F(StepTimelineEmu, NoEventsMeansNoTimingNotAFailedCollective) {
  Collected c;
  EXPECT_EQ(c.timeline.begin("no steps", {}), nullptr);
  emu::fail_next_call("cudaEventCreateWithFlags", cudaErrorMemoryAllocation);
  EXPECT_EQ(c.timeline.begin("no events", {1, 2}), nullptr);
  ASSERT_EQ(c.warnings.size(), 0u) << "warned at the next harvest, outside the lock";
  c.timeline.harvest();
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("cudaEventCreateWithFlags failed"), std::string::npos) << c.warnings[0];
  c.timeline.end(nullptr, true);  // what a caller does with a null recording: nothing
  time_one(c.timeline, "after", {1});
  c.timeline.drain();
  EXPECT_EQ(c.read.size(), 1u);
}

// Memory stays bounded: at kMaxUnread collectives not yet ended no further one is timed.
TEST_F(StepTimelineEmu, AtMostMaxUnreadCollectivesAreHeld) {
  Collected c;
  std::vector<StepTimeline::Recording*> open;
  for (std::size_t i = 0; i < StepTimeline::kMaxUnread; ++i) {
    open.push_back(c.timeline.begin("open", {1}));
    ASSERT_NE(open.back(), nullptr);
  }
  EXPECT_EQ(c.timeline.begin("one too many", {1}), nullptr) << "not timed, and nothing waited";
  for (StepTimeline::Recording* r : open) {
    r->mark(0, stream);
    r->mark(1, stream);
    c.timeline.end(r, true);
  }
  // Ended and complete: the next begin reads them all first.
  StepTimeline::Recording* next = c.timeline.begin("next", {1});
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(c.read.size(), StepTimeline::kMaxUnread);
  c.timeline.end(next, false);
  EXPECT_EQ(c.timeline.unread(), 1u);
  c.timeline.harvest();
  EXPECT_EQ(c.timeline.unread(), 0u);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("go untimed"), std::string::npos) << c.warnings[0];
}

// Another stream of this thread being captured into a CUDA graph in the default (global)
// mode: querying and waiting for the timeline's events must neither fail nor invalidate it.
TEST_F(StepTimelineEmu, ReadingEventsLeavesAGraphCaptureValid) {
  cudaStream_t capturing = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
  // The emulation enforces the rule: a plain query now would invalidate the capture.
  {
    cudaEvent_t e = nullptr;
    ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e), cudaErrorStreamCaptureUnsupported);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(capturing, &graph), cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
    cudaEventDestroy(e);
  }
  Collected c;
  time_one(c.timeline, "before", {1});
  ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal), cudaSuccess);
  c.timeline.harvest();
  time_one(c.timeline, "during", {1});
  c.timeline.drain();
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess) << "the timeline invalidated the capture";
  EXPECT_NE(graph, nullptr);
  EXPECT_EQ(c.read.size(), 2u);
  EXPECT_TRUE(c.warnings.empty());
  cudaGraphDestroy(graph);
  cudaStreamDestroy(capturing);
}

}  // namespace
}  // namespace topocoll::exec
