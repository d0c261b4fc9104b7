// How the engine cuts a step's messages into pieces (exec/pipeline.h), shared with the cost
// model (sched/cost_model.h) so the planner predicts what the engine runs.
//
// A message of b bytes travels as pieces(b) pieces: floor(b / chunk_bytes), at least 1 and
// at most max_chunks. The count depends only on the message's size and the shape, so the
// sender and the receiver cut it the same way without telling each other (the shape must be
// the same on every rank: a mismatch is a size-mismatch error, never a wrong result).
// Piece j of a message of n elements is [split(j), split(j + 1)) with the split points
// rounded down to a multiple of `align` elements (16 bytes: the reduce kernels stay
// vectorised on every piece, see kernels/thread_loops.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace topocoll::sched {

struct PipelineShape {
  std::size_t chunk_bytes = 0;  // 0: steps are never cut
  int max_chunks = 8;

  bool enabled() const { return chunk_bytes > 0 && max_chunks > 1; }
  int pieces(std::size_t bytes) const {
    if (!enabled() || bytes < 2 * chunk_bytes) return 1;
    return int(std::min<std::size_t>(bytes / chunk_bytes, std::size_t(max_chunks)));
  }
};

// Element index where piece j (0 <= j <= n) of `count` elements cut into n pieces begins.
inline int64_t piece_begin(int64_t count, int n, int j, int64_t align) {
  if (j <= 0) return 0;
  if (j >= n) return count;
  const int64_t even = int64_t((__int128(count) * j) / n);
  return align > 1 ? even / align * align : even;
}

}  // namespace topocoll::sched
