#include "sched/ring.h"

#include <vector>

#include "sched/all_to_all.h"

namespace topocoll::sched {
namespace {
int mod(int64_t a, int64_t m) { return int(((a % m) + m) % m); }
}  // namespace

int append_ring_reduce_scatter(ScheduleBuilder& b, int first_step, std::span<const int> members,
                               Buf first_src, int64_t base, int64_t n, bool finalize,
                               int64_t scratch_base) {
  const int P = int(members.size());
  if (P == 1) {
    b.single_rank_result(first_step, members[0], first_src, base, n, finalize);
    return 1;
  }
  const BlockSplit split{n, P};
  const BufRef tmp{Buf::Scratch, scratch_base};
  // At step t position p sends block p-t and reduces block p-t-1 into place.
  for (int t = 0; t < P - 1; ++t) {
    const int step = first_step + t;
    for (int p = 0; p < P; ++p) {
      const int r = members[size_t(p)];
      const int next = members[size_t(mod(p + 1, P))];
      const int prev = members[size_t(mod(p - 1, P))];
      const int sb = mod(p - t, P), rb = mod(p - t - 1, P);
      b.send(step, r, next, {t == 0 ? first_src : Buf::Output, base + split.begin(sb)},
             split.size(sb));
      b.recv(step, r, prev, tmp, split.size(rb));
      b.reduce(step, r, {Buf::Output, base + split.begin(rb)},
               {BufRef{first_src, base + split.begin(rb)}, tmp}, split.size(rb));
      // After the last step, position p holds the full block p+1.
      if (t == P - 2 && finalize)
        b.finalize(step, r, {Buf::Output, base + split.begin(rb)}, split.size(rb));
      b.need_scratch(r, scratch_base + split.max_size());
    }
    b.touch(step);
  }
  return P - 1;
}

int append_ring_allgather(ScheduleBuilder& b, int first_step, std::span<const int> members,
                          int64_t base, int64_t n) {
  const int P = int(members.size());
  const BlockSplit split{n, P};
  // At step t position p passes on block p+1-t and receives block p-t.
  for (int t = 0; t < P - 1; ++t) {
    const int step = first_step + t;
    for (int p = 0; p < P; ++p) {
      const int r = members[size_t(p)];
      const int next = members[size_t(mod(p + 1, P))];
      const int prev = members[size_t(mod(p - 1, P))];
      const int sb = mod(p + 1 - t, P), rb = mod(p - t, P);
      b.send(step, r, next, {Buf::Output, base + split.begin(sb)}, split.size(sb));
      b.recv(step, r, prev, {Buf::Output, base + split.begin(rb)}, split.size(rb));
    }
    b.touch(step);
  }
  return P - 1;
}

int append_ring_allreduce(ScheduleBuilder& b, int first_step, std::span<const int> members,
                          Buf first_src, int64_t base, int64_t n, bool finalize,
                          int64_t scratch_base) {
  const int rs = append_ring_reduce_scatter(b, first_step, members, first_src, base, n, finalize,
                                            scratch_base);
  if (members.size() == 1) return rs;
  return rs + append_ring_allgather(b, first_step + rs, members, base, n);
}

Schedule ring_allreduce(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  ScheduleBuilder b(Collective::AllReduce, "ring", nranks, count, count, count, 5);
  append_ring_allreduce(b, 0, members, Buf::Input, 0, count, true);
  return b.finish();
}

Schedule ring_reduce_scatter(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks;
  ScheduleBuilder b(Collective::ReduceScatter, "ring", P, count, count * P, count, 4 * P);
  const BufRef out{Buf::Output, 0};
  if (P == 1) {
    b.single_rank_result(0, members[0], Buf::Input, 0, count, /*finalize=*/true);
    return b.finish();
  }
  // Ring block j travels p = j, j+1, ..., and is complete at position j-1, so it is the
  // input block of rank members[j-1]. Partial sums live in Scratch[0, count); a step's
  // receive lands in Scratch[count, 2*count). A send reads the partial sum before the
  // step's reduce overwrites it (IR step semantics).
  auto in_block = [&](int j) -> int64_t { return int64_t(members[size_t(mod(j - 1, P))]) * count; };
  const BufRef acc{Buf::Scratch, 0}, tmp{Buf::Scratch, count};
  for (int t = 0; t < P - 1; ++t) {
    for (int p = 0; p < P; ++p) {
      const int r = members[size_t(p)];
      const int sb = mod(p - t, P), rb = mod(p - t - 1, P);
      b.send(t, r, members[size_t(mod(p + 1, P))], t == 0 ? BufRef{Buf::Input, in_block(sb)} : acc,
             count);
      b.recv(t, r, members[size_t(mod(p - 1, P))], tmp, count);
      const BufRef dst = t == P - 2 ? out : acc;
      b.reduce(t, r, dst, {BufRef{Buf::Input, in_block(rb)}, tmp}, count);
      if (t == P - 2) b.finalize(t, r, out, count);
      b.need_scratch(r, 2 * count);
    }
    b.touch(t);
  }
  return b.finish();
}

Schedule ring_allgather(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks;
  ScheduleBuilder b(Collective::AllGather, "ring", P, count, count, count * P, 2 * P + 1);
  auto out_block = [&](int pos) -> BufRef {
    return {Buf::Output, int64_t(members[size_t(mod(pos, P))]) * count};
  };
  for (int t = 0; t < (P == 1 ? 1 : P - 1); ++t) {
    for (int p = 0; p < P; ++p) {
      const int r = members[size_t(p)];
      // Step 0 sends the own block from Input: its copy into Output runs after the
      // step's transfers (IR step semantics).
      if (P > 1) {
        b.send(t, r, members[size_t(mod(p + 1, P))],
               t == 0 ? BufRef{Buf::Input, 0} : out_block(p - t), count);
        b.recv(t, r, members[size_t(mod(p - 1, P))], out_block(p - t - 1), count);
      }
      if (t == 0) b.copy(0, r, out_block(p), {Buf::Input, 0}, count);
    }
    b.touch(t);
  }
  return b.finish();
}

Schedule ring_schedule(Collective collective, int nranks, int64_t count, std::span<const int> order) {
  switch (collective) {
    case Collective::AllReduce: return ring_allreduce(nranks, count, order);
    case Collective::ReduceScatter: return ring_reduce_scatter(nranks, count, order);
    case Collective::AllGather: return ring_allgather(nranks, count, order);
    case Collective::AllToAll: break;
  }
  return ring_all_to_all(nranks, count, order);
}

}  // namespace topocoll::sched
