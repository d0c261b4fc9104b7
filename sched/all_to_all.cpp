#include "sched/all_to_all.h"

#include <vector>

#include "sched/schedule_builder.h"

namespace topocoll::sched {

Schedule direct_all_to_all(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int N = nranks;
  ScheduleBuilder b(Collective::AllToAll, "fc-direct", N, count, count * N, count * N, 2 * int64_t(N) + 2);
  for (int i = 1; i < N || i == 1; ++i) {
    const int step = i - 1;
    for (int p = 0; p < N; ++p) {
      const int r = members[size_t(p)];
      if (N > 1) {
        const int to = members[size_t((p + i) % N)], from = members[size_t((p - i + N) % N)];
        b.send(step, r, to, {Buf::Input, int64_t(to) * count}, count);
        b.recv(step, r, from, {Buf::Output, int64_t(from) * count}, count);
      }
      if (i == 1) b.copy(0, r, {Buf::Output, int64_t(r) * count}, {Buf::Input, int64_t(r) * count}, count);
    }
    b.touch(step);
  }
  return b.finish();
}

Schedule ring_all_to_all(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int N = nranks;
  ScheduleBuilder b(Collective::AllToAll, "ring", N, count, count * N, count * N, 3 * int64_t(N) + 2);
  auto at = [&](int pos) { return members[size_t(((pos % N) + N) % N)]; };
  // Two staging areas of N-1 blocks, alternating: a step forwards from one while it
  // receives into the other.
  const int64_t area = int64_t(N > 1 ? N - 1 : 0) * count;
  auto stage = [&](int t) { return BufRef{Buf::Scratch, (t % 2) * area}; };
  struct Run {
    int64_t offset, len;
  };
  std::vector<Run> runs;
  for (int t = 1; t < N || t == 1; ++t) {
    const int step = t - 1;
    for (int p = 0; p < N; ++p) {
      const int r = at(p);
      if (N > 1) {
        const int next = at(p + 1), prev = at(p - 1);
        if (t == 1) {
          // First hop: the own input blocks for positions p+1 .. p+N-1, in that order,
          // one op per run of adjacent input blocks; the receiver packs them.
          auto runs_of = [&](int src) {
            runs.clear();
            for (int d = src + 1; d < src + N; ++d) {
              const int64_t off = int64_t(at(d)) * count;
              if (!runs.empty() && runs.back().offset + runs.back().len == off)
                runs.back().len += count;
              else
                runs.push_back({off, count});
            }
          };
          runs_of(p);
          for (const Run& x : runs) b.send(step, r, next, {Buf::Input, x.offset}, x.len);
          runs_of(p - 1);
          int64_t packed = 0;
          for (const Run& x : runs) {
            b.recv(step, r, prev, {Buf::Scratch, stage(t).offset + packed}, x.len);
            packed += x.len;
          }
        } else {
          // Forward what arrived last step, minus the block that was for this position.
          const int64_t n = int64_t(N - t) * count;
          b.send(step, r, next, {Buf::Scratch, stage(t - 1).offset + count}, n);
          b.recv(step, r, prev, stage(t), n);
        }
        // The first received block was sent by position p-t and is addressed to p.
        b.copy(step, r, {Buf::Output, int64_t(at(p - t)) * count}, stage(t), count);
        b.need_scratch(r, 2 * area);
      }
      if (t == 1) b.copy(0, r, {Buf::Output, int64_t(r) * count}, {Buf::Input, int64_t(r) * count}, count);
    }
    b.touch(step);
  }
  return b.finish();
}

}  // namespace topocoll::sched
