#include "sched/hierarchical.h"

#include <stdexcept>
#include <vector>

#include "sched/fc_direct.h"
#include "sched/halving_doubling.h"
#include "sched/ring.h"
#include "sched/schedule_builder.h"

namespace topocoll::sched {

namespace {

// Ring reduce-scatter along each dimension in turn, each on the block the previous one
// left to the rank, then the allgathers in reverse. Every member of a line holds the same
// range when the line starts: they share all coordinates already reduced over.
int reduce_scatter_then_allgather(ScheduleBuilder& b, int step, const std::vector<int>& pos, int G,
                                  int M, const std::vector<int>& lines,
                                  const std::vector<int64_t>& strides, Buf src,
                                  const BlockSplit& shard) {
  struct Line {
    std::vector<int> members;
    int64_t base, n;
  };
  const int P = G * M;
  std::vector<int64_t> base(static_cast<size_t>(P)), len(static_cast<size_t>(P));
  for (int g = 0; g < M; ++g)
    for (int l = 0; l < G; ++l) {
      base[size_t(g * G + l)] = shard.begin(l);
      len[size_t(g * G + l)] = shard.size(l);
    }
  std::vector<std::vector<Line>> done(lines.size());
  for (size_t d = 0; d < lines.size(); ++d) {
    const int n_line = lines[d];
    const int64_t stride = strides[d];
    for (int g0 = 0; g0 < M; ++g0) {
      if ((g0 / stride) % n_line != 0) continue;
      for (int l = 0; l < G; ++l) {
        Line line{{}, base[size_t(g0 * G + l)], len[size_t(g0 * G + l)]};
        for (int c = 0; c < n_line; ++c) line.members.push_back(pos[size_t((g0 + c * stride) * G + l)]);
        append_ring_reduce_scatter(b, step, line.members, src, line.base, line.n, d + 1 == lines.size());
        const BlockSplit split{line.n, n_line};
        for (int c = 0; c < n_line; ++c) {  // position c keeps block c+1
          const int q = (g0 + c * stride) * G + l, blk = (c + 1) % n_line;
          base[size_t(q)] = line.base + split.begin(blk);
          len[size_t(q)] = split.size(blk);
        }
        done[d].push_back(std::move(line));
      }
    }
    step += n_line - 1;
    src = Buf::Output;
  }
  for (size_t d = lines.size(); d-- > 0;) {
    for (const Line& line : done[d]) append_ring_allgather(b, step, line.members, line.base, line.n);
    step += lines[d] - 1;
  }
  return step;
}

}  // namespace

Schedule hierarchical_allreduce(int nranks, int64_t count, const HierParams& params,
                                std::span<const int> order) {
  const std::vector<int> pos = resolve_order(nranks, order);
  const int G = params.group_size;
  if (G < 1 || nranks % G != 0)
    throw std::invalid_argument("hierarchical: group_size " + std::to_string(G) +
                                " does not divide " + std::to_string(nranks) + " ranks");
  const int M = nranks / G;
  std::vector<int> dims = params.torus_dims;
  if (dims.empty()) dims.push_back(M);
  int64_t product = 1;
  for (int d : dims) {
    if (d < 1) throw std::invalid_argument("hierarchical: torus dimension " + std::to_string(d) + " < 1");
    product *= d;
  }
  if (product != M)
    throw std::invalid_argument("hierarchical: torus dimensions multiply to " +
                                std::to_string(product) + ", not the " + std::to_string(M) +
                                " groups");

  // Dimensions of length 1 have nothing to exchange; if none is left, the group's
  // reduce-scatter finalizes.
  std::vector<int> lines;
  std::vector<int64_t> strides;
  int64_t stride = 1;  // group-index distance between neighbours along a dimension
  for (int d : dims) {
    if (d > 1) {
      lines.push_back(d);
      strides.push_back(stride);
    }
    stride *= d;
  }

  ScheduleBuilder b(Collective::AllReduce, "hier", nranks, count, count, count, 4 * G + 64);
  if (nranks == 1) {
    b.copy(0, pos[0], {Buf::Output, 0}, {Buf::Input, 0}, count);
    b.finalize(0, pos[0], {Buf::Output, 0}, count);
    b.touch(0);
    return b.finish();
  }
  const BlockSplit shard{count, G};
  std::vector<int> members;
  int step = 0;

  // 1. Reduce-scatter inside every group (the group's only step when there is one group).
  if (G > 1) {
    for (int g = 0; g < M; ++g) {
      members.assign(pos.begin() + int64_t(g) * G, pos.begin() + int64_t(g + 1) * G);
      append_fc_direct_reduce_scatter(b, step, members, Buf::Input, 0, count, lines.empty());
    }
    ++step;
  }

  if (params.reduce_scatter_first && params.inter != InterGroupAlgo::Ring)
    throw std::invalid_argument("hierarchical: reduce_scatter_first needs the ring across groups");

  // 2. Shard l across the groups, one torus dimension at a time.
  Buf src = G > 1 ? Buf::Output : Buf::Input;
  if (params.reduce_scatter_first) {
    step = reduce_scatter_then_allgather(b, step, pos, G, M, lines, strides, src, shard);
    lines.clear();  // done
  }
  for (size_t d = 0; d < lines.size(); ++d) {
    const int len = lines[d];
    const int64_t stride_d = strides[d];
    const bool last = d + 1 == lines.size();
    int used = 0;
    for (int g0 = 0; g0 < M; ++g0) {
      if ((g0 / stride_d) % len != 0) continue;  // g0 starts a line along this dimension
      for (int l = 0; l < G; ++l) {
        members.clear();
        for (int c = 0; c < len; ++c) members.push_back(pos[size_t((g0 + c * stride_d) * G + l)]);
        const int64_t base = shard.begin(l), n = shard.size(l);
        used = params.inter == InterGroupAlgo::Ring
                   ? append_ring_allreduce(b, step, members, src, base, n, last)
                   : append_hd_allreduce(b, step, members, src, base, n, last);
      }
    }
    step += used;
    src = Buf::Output;
  }

  // 3. Allgather inside every group.
  if (G > 1) {
    for (int g = 0; g < M; ++g) {
      members.assign(pos.begin() + int64_t(g) * G, pos.begin() + int64_t(g + 1) * G);
      append_fc_direct_allgather(b, step, members, 0, count);
    }
  }
  return b.finish();
}

}  // namespace topocoll::sched
