// A bad TOPOCOLL_PIPELINE_CHUNK_BYTES was printed three times, with a prefix of its
// own. The process's environment is read once (config/env.h): the warning comes once, with
// the prefix every warning has, however many readers ask. Alone in its binary: it must be
// the process's first read of the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "config/env.h"
#include "exec/pipeline.h"

namespace topocoll::exec {
namespace {

TEST(PipelineWarning, PrintedOnceWithTheCommonPrefix) {
  ::setenv("TOPOCOLL_PIPELINE_CHUNK_BYTES", "1K", 1);
  ::testing::internal::CaptureStderr();
  const PipelineOptions nccl = PipelineOptions::process_default();
  const PipelineOptions host = PipelineOptions::host_default();
  PipelineOptions::process_default();
  PipelineOptions::host_default();
  config::env();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "topocoll: WARN TOPOCOLL_PIPELINE_CHUNK_BYTES=\"1K\": expected 0 (off) or a size from 64K to 1G (like "
            "4096, 64K or 2GiB); using the default (4M on the NCCL backend, 0 (off) on the host backend)\n");
  EXPECT_EQ(nccl.shape.chunk_bytes, PipelineOptions::kDefaultChunkBytes);
  EXPECT_FALSE(host.shape.enabled());
}

}  // namespace
}  // namespace topocoll::exec
