#include "sched/nap_log_step.h"

#include <vector>

#include "sched/schedule_builder.h"

namespace topocoll::sched {

Schedule log_step_allreduce(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks;
  int k = 0;
  while ((2 << k) <= P) ++k;
  const int q = 1 << k, extras = P - q;
  ScheduleBuilder b(Collective::AllReduce, "fc", P, count, count, count, 3 * k + 5);
  const BufRef out{Buf::Output, 0}, tmp{Buf::Scratch, 0};
  std::vector<Buf> src(size_t(q), Buf::Input);
  int step = 0;
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, x, c, {Buf::Input, 0}, count);
      b.recv(step, c, x, tmp, count);
      b.reduce(step, c, out, {BufRef{Buf::Input, 0}, tmp}, count);
      src[size_t(e)] = Buf::Output;
    }
    b.touch(step++);
  }
  // Paper step S = s+1: distance 2^(S-1).
  for (int s = 0; s < k; ++s, ++step) {
    const int d = 1 << s;
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)];
      b.send(step, r, members[size_t((v + d) % q)], {src[size_t(v)], 0}, count);
      b.recv(step, r, members[size_t((v - d + q) % q)], tmp, count);
      if (q == 2 && v == 1) {
        // Two core ranks: both add position 0's value to position 1's, in that order, so
        // their bits agree (NaN payloads too, which a+b and b+a keep differently); the
        // sum lands where the operand arrived and is copied out at the end.
        b.reduce(step, r, tmp, {tmp, BufRef{src[size_t(v)], 0}}, count);
        src[size_t(v)] = Buf::Scratch;
      } else {
        b.reduce(step, r, out, {BufRef{src[size_t(v)], 0}, tmp}, count);
        src[size_t(v)] = Buf::Output;
      }
    }
    b.touch(step);
  }
  // Every core rank finalizes its own (differently ordered) sum once.
  const int fin_step = step > 0 ? step - 1 : 0;
  for (int v = 0; v < q; ++v) {
    const int r = members[size_t(v)];
    if (k == 0 || src[size_t(v)] == Buf::Scratch) b.copy(fin_step, r, out, {src[size_t(v)], 0}, count);
    b.finalize(fin_step, r, out, count);
    b.need_scratch(r, P > 1 ? count : 0);
  }
  b.touch(fin_step);
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, c, x, out, count);
      b.recv(step, x, c, out, count);
    }
    b.touch(step++);
  }
  // Two core ranks add the same two operands in one order; from four on the trees differ
  // per rank.
  b.set_bitwise_identical(q <= 2);
  return b.finish();
}

Schedule log_step_allgather(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks;
  ScheduleBuilder b(Collective::AllGather, "fc", P, count, count, count * P, 64);
  auto block = [&](int pos) -> int64_t { return int64_t(members[size_t(((pos % P) + P) % P)]) * count; };
  // Runs of the blocks of positions last-n+1 .. last (in that order), merged when adjacent.
  struct Run {
    int64_t offset, len;
  };
  std::vector<Run> runs;
  auto window = [&](int last, int n) {
    runs.clear();
    for (int j = last - n + 1; j <= last; ++j) {
      const int64_t off = block(j);
      if (!runs.empty() && runs.back().offset + runs.back().len == off)
        runs.back().len += count;
      else
        runs.push_back({off, count});
    }
  };
  int step = 0;
  for (int have = 1; have < P; have *= 2, ++step) {
    const int n = have <= P - have ? have : P - have;  // the last step sends only what is missing
    for (int p = 0; p < P; ++p) {
      const int r = members[size_t(p)];
      const int to = members[size_t((p + have) % P)], from = members[size_t((p - have + P) % P)];
      if (step == 0) {
        b.send(step, r, to, {Buf::Input, 0}, count);  // own block is copied after the transfers
      } else {
        window(p, n);
        for (const Run& x : runs) b.send(step, r, to, {Buf::Output, x.offset}, x.len);
      }
      // The sender at p-have sends the n blocks ending at its own position.
      window(p - have, n);
      for (const Run& x : runs) b.recv(step, r, from, {Buf::Output, x.offset}, x.len);
      if (step == 0) b.copy(0, r, {Buf::Output, block(p)}, {Buf::Input, 0}, count);
    }
    b.touch(step);
  }
  if (P == 1) {
    b.copy(0, members[0], {Buf::Output, 0}, {Buf::Input, 0}, count);
    b.touch(0);
  }
  return b.finish();
}

}  // namespace topocoll::sched
