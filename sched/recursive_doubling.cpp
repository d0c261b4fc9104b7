#include "sched/recursive_doubling.h"

#include <vector>

#include "sched/schedule_builder.h"

namespace topocoll::sched {

Schedule rd_allreduce(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks;
  int k = 0;
  while ((2 << k) <= P) ++k;
  const int q = 1 << k, extras = P - q;
  ScheduleBuilder b(Collective::AllReduce, "rd", P, count, count, count, 3 * k + 6);
  const BufRef out{Buf::Output, 0}, scratch0{Buf::Scratch, 0}, scratch1{Buf::Scratch, count};
  auto same = [](BufRef a, BufRef c) { return a.buf == c.buf && a.offset == c.offset; };
  // Where each core rank's running value lives: Input until its first reduction.
  std::vector<BufRef> value(size_t(q), BufRef{Buf::Input, 0});
  int step = 0;
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, x, c, {Buf::Input, 0}, count);
      b.recv(step, c, x, scratch0, count);
      b.reduce(step, c, out, {BufRef{Buf::Input, 0}, scratch0}, count);
      value[size_t(e)] = out;
    }
    b.touch(step++);
  }
  for (int s = 0; s < k; ++s, ++step) {
    const int d = 1 << s;
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)], partner = v ^ d;
      const BufRef mine = value[size_t(v)];
      const BufRef incoming = same(mine, scratch0) ? scratch1 : scratch0;
      b.send(step, r, members[size_t(partner)], mine, count);
      b.recv(step, r, members[size_t(partner)], incoming, count);
      if (v < partner) {
        // Lower half: op(mine, incoming), in place unless mine is the (read-only) input.
        const BufRef dst = mine.buf == Buf::Input ? out : mine;
        b.reduce(step, r, dst, {mine, incoming}, count);
        value[size_t(v)] = dst;
      } else {
        // Upper half: op(incoming, mine), into the buffer that just arrived.
        b.reduce(step, r, incoming, {incoming, mine}, count);
        value[size_t(v)] = incoming;
      }
    }
    b.touch(step);
  }
  const int fin_step = step > 0 ? step - 1 : 0;
  for (int v = 0; v < q; ++v) {
    const int r = members[size_t(v)];
    if (!same(value[size_t(v)], out)) b.copy(fin_step, r, out, value[size_t(v)], count);
    b.finalize(fin_step, r, out, count);
    b.need_scratch(r, P > 1 ? 2 * count : 0);
  }
  b.touch(fin_step);
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, c, x, out, count);
      b.recv(step, x, c, out, count);
      b.need_scratch(x, 0);
    }
    b.touch(step++);
  }
  b.set_bitwise_identical(true);
  return b.finish();
}

}  // namespace topocoll::sched
