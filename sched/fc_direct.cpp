#include "sched/fc_direct.h"

#include <vector>

namespace topocoll::sched {

void append_fc_direct_reduce_scatter(ScheduleBuilder& b, int step, std::span<const int> members,
                                     Buf first_src, int64_t base, int64_t n, bool finalize,
                                     int64_t scratch_base) {
  const int N = int(members.size());
  const BlockSplit split{n, N};
  const int64_t slot = split.max_size();
  std::vector<BufRef> srcs;
  for (int p = 0; p < N; ++p) {
    const int r = members[size_t(p)];
    const BufRef mine{Buf::Output, base + split.begin(p)};
    srcs.assign(1, BufRef{first_src, mine.offset});
    for (int i = 1; i < N; ++i) {  // peers in the order p+1, p+2, ...
      const int j = (p + i) % N;
      b.send(step, r, members[size_t(j)], {first_src, base + split.begin(j)}, split.size(j));
      const BufRef in{Buf::Scratch, scratch_base + (i - 1) * slot};
      b.recv(step, r, members[size_t(j)], in, split.size(p));
      srcs.push_back(in);
    }
    if (N > 1) {
      b.reduce(step, r, mine, srcs, split.size(p));
      b.need_scratch(r, scratch_base + (N - 1) * slot);
    } else if (first_src != Buf::Output) {
      b.copy(step, r, mine, srcs[0], split.size(p));
    }
    if (finalize) b.finalize(step, r, mine, split.size(p));
  }
  b.touch(step);
}

void append_fc_direct_allgather(ScheduleBuilder& b, int step, std::span<const int> members,
                                int64_t base, int64_t n) {
  const int N = int(members.size());
  const BlockSplit split{n, N};
  for (int p = 0; p < N; ++p) {
    const int r = members[size_t(p)];
    for (int i = 1; i < N; ++i) {
      const int j = (p + i) % N;
      b.send(step, r, members[size_t(j)], {Buf::Output, base + split.begin(p)}, split.size(p));
      b.recv(step, r, members[size_t(j)], {Buf::Output, base + split.begin(j)}, split.size(j));
    }
  }
  b.touch(step);
}

Schedule fc_direct_allreduce(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  ScheduleBuilder b(Collective::AllReduce, "fc-direct", nranks, count, count, count,
                    4 * int64_t(nranks) + 4);
  append_fc_direct_reduce_scatter(b, 0, members, Buf::Input, 0, count, true);
  if (nranks > 1) append_fc_direct_allgather(b, 1, members, 0, count);
  return b.finish();
}

Schedule fc_direct_reduce_scatter(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int N = nranks;
  ScheduleBuilder b(Collective::ReduceScatter, "fc-direct", N, count, count * N, count,
                    2 * int64_t(N) + 4);
  // Rank r's block is Input[r*count]; the sum lands in Output[0, count).
  const BufRef out{Buf::Output, 0};
  std::vector<BufRef> srcs;
  for (int p = 0; p < N; ++p) {
    const int r = members[size_t(p)];
    srcs.assign(1, BufRef{Buf::Input, int64_t(r) * count});
    for (int i = 1; i < N; ++i) {
      const int j = members[size_t((p + i) % N)];
      b.send(0, r, j, {Buf::Input, int64_t(j) * count}, count);
      const BufRef in{Buf::Scratch, (i - 1) * count};
      b.recv(0, r, j, in, count);
      srcs.push_back(in);
    }
    if (N > 1) {
      // In place, Output aliases Input[r*count]: dst == srcs[0], which Reduce allows.
      b.reduce(0, r, out, srcs, count);
      b.need_scratch(r, (N - 1) * count);
    } else {
      b.copy(0, r, out, srcs[0], count);
    }
    b.finalize(0, r, out, count);
  }
  b.touch(0);
  return b.finish();
}

Schedule fc_direct_allgather(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int N = nranks;
  ScheduleBuilder b(Collective::AllGather, "fc-direct", N, count, count, count * N,
                    2 * int64_t(N) + 2);
  for (int p = 0; p < N; ++p) {
    const int r = members[size_t(p)];
    for (int i = 1; i < N; ++i) {
      const int j = members[size_t((p + i) % N)];
      b.send(0, r, j, {Buf::Input, 0}, count);
      b.recv(0, r, j, {Buf::Output, int64_t(j) * count}, count);
    }
    b.copy(0, r, {Buf::Output, int64_t(r) * count}, {Buf::Input, 0}, count);
  }
  b.touch(0);
  return b.finish();
}

}  // namespace topocoll::sched
