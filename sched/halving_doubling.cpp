#include "sched/halving_doubling.h"

#include <bit>
#include <stdexcept>
#include <vector>

namespace topocoll::sched {
namespace {

int floor_log2(int x) {
  int k = 0;
  while ((2 << k) <= x) ++k;
  return k;
}

// A contiguous run of elements: the unit of one transfer.
struct Run {
  int64_t offset;
  int64_t len;
};

// Blocks (count elements each) of the virtual ranks [lo, hi) of the core, each core rank v
// also carrying the block of its folded partner q+v; adjacent blocks merge into one run.
// Both ends of a transfer call this with the same arguments, so their ops match.
void block_runs(std::span<const int> members, int q, int lo, int hi, int64_t count,
                std::vector<Run>& runs) {
  runs.clear();
  auto add = [&](int rank) {
    const int64_t off = int64_t(rank) * count;
    if (!runs.empty() && runs.back().offset + runs.back().len == off)
      runs.back().len += count;
    else
      runs.push_back({off, count});
  };
  const int P = int(members.size());
  for (int v = lo; v < hi; ++v) {
    add(members[size_t(v)]);
    if (q + v < P) add(members[size_t(q + v)]);
  }
}

}  // namespace

int append_hd_allreduce(ScheduleBuilder& b, int first_step, std::span<const int> members,
                        Buf first_src, int64_t base, int64_t n, bool finalize,
                        int64_t scratch_base) {
  const int P = int(members.size());
  if (P == 1) {
    b.single_rank_result(first_step, members[0], first_src, base, n, finalize);
    return 1;
  }
  const int k = floor_log2(P);
  const int q = 1 << k;
  const int extras = P - q;
  const BufRef tmp{Buf::Scratch, scratch_base};
  int step = first_step;
  std::vector<Buf> src(size_t(q), first_src);  // where core rank v's current value lives

  if (extras > 0) {  // MPICH pre step: q+e folds its whole vector into e
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, x, c, {first_src, base}, n);
      b.recv(step, c, x, tmp, n);
      b.reduce(step, c, {Buf::Output, base}, {BufRef{first_src, base}, tmp}, n);
      b.need_scratch(c, scratch_base + n);
      src[size_t(e)] = Buf::Output;
    }
    b.touch(step++);
  }

  // Recursive halving over q uneven blocks, distance 1 first; v keeps the lower half when
  // bit s of v is 0, so after k steps it holds block bitrev(v), and every range it sends or
  // keeps is a contiguous run of blocks.
  const BlockSplit split{n, q};
  std::vector<int> lo(size_t(q), 0), hi(size_t(q), q);
  for (int s = 0; s < k; ++s, ++step) {
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)], partner = members[size_t(v ^ (1 << s))];
      const int mid = (lo[size_t(v)] + hi[size_t(v)]) / 2;
      const bool upper = (v >> s) & 1;
      const int klo = upper ? mid : lo[size_t(v)], khi = upper ? hi[size_t(v)] : mid;
      const int glo = upper ? lo[size_t(v)] : mid, ghi = upper ? mid : hi[size_t(v)];
      const int64_t keep_off = base + split.begin(klo), keep_n = split.begin(khi) - split.begin(klo);
      b.send(step, r, partner, {src[size_t(v)], base + split.begin(glo)},
             split.begin(ghi) - split.begin(glo));
      b.recv(step, r, partner, tmp, keep_n);
      // op(lower's, upper's) on both ranks of the pair: every element's tree has one shape,
      // whichever rank reduces it (bitwise identity needs one operand order, sched/verifier.h),
      // so the verifier's trees are shared again. The upper rank's destination is its second
      // source, which a Reduce allows.
      const BufRef mine{src[size_t(v)], keep_off};
      if (upper)
        b.reduce(step, r, {Buf::Output, keep_off}, {tmp, mine}, keep_n);
      else
        b.reduce(step, r, {Buf::Output, keep_off}, {mine, tmp}, keep_n);
      b.need_scratch(r, scratch_base + keep_n);
      src[size_t(v)] = Buf::Output;
      lo[size_t(v)] = klo;
      hi[size_t(v)] = khi;
      // Block complete: finalize it once, before it is distributed.
      if (s == k - 1 && finalize)
        b.finalize(step, r, {Buf::Output, base + split.begin(klo)}, split.size(klo));
    }
    b.touch(step);
  }

  // Recursive doubling, the mirror: distance q/2 first.
  for (int s = k - 1; s >= 0; --s, ++step) {
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)], partner = members[size_t(v ^ (1 << s))];
      const int l = lo[size_t(v)], h = hi[size_t(v)], w = h - l;
      const bool upper = (v >> s) & 1;
      const int plo = upper ? l - w : h, phi = upper ? l : h + w;  // the partner's range
      b.send(step, r, partner, {Buf::Output, base + split.begin(l)},
             split.begin(h) - split.begin(l));
      b.recv(step, r, partner, {Buf::Output, base + split.begin(plo)},
             split.begin(phi) - split.begin(plo));
      lo[size_t(v)] = upper ? plo : l;
      hi[size_t(v)] = upper ? h : phi;
    }
    b.touch(step);
  }

  if (extras > 0) {  // MPICH post step: the folded ranks get the result
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, c, x, {Buf::Output, base}, n);
      b.recv(step, x, c, {Buf::Output, base}, n);
    }
    b.touch(step++);
  }
  return step - first_step;
}

Schedule hd_allreduce(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int k = floor_log2(nranks);
  ScheduleBuilder b(Collective::AllReduce, "hd", nranks, count, count, count, 5 * k + 5);
  append_hd_allreduce(b, 0, members, Buf::Input, 0, count, true);
  return b.finish();
}

Schedule hd_reduce_scatter(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks, k = floor_log2(P), q = 1 << k, extras = P - q;
  ScheduleBuilder b(Collective::ReduceScatter, "hd", P, count, count * P, count, 5 * k + 6);
  const int64_t total = count * P;
  const BufRef out{Buf::Output, 0};
  if (P == 1) {
    b.single_rank_result(0, members[0], Buf::Input, 0, count, /*finalize=*/true);
    return b.finish();
  }
  // Partial sums in Scratch[0, total) laid out like the input; receives land packed in
  // Scratch[total, ...). The input is only read, so in-place calls are safe.
  const int64_t recv_base = total;
  std::vector<Buf> src(size_t(q), Buf::Input);
  int step = 0;
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, x, c, {Buf::Input, 0}, total);
      b.recv(step, c, x, {Buf::Scratch, recv_base}, total);
      b.reduce(step, c, {Buf::Scratch, 0}, {BufRef{Buf::Input, 0}, BufRef{Buf::Scratch, recv_base}},
               total);
      b.need_scratch(c, recv_base + total);
      src[size_t(e)] = Buf::Scratch;
    }
    b.touch(step++);
  }
  std::vector<Run> give, keep;
  for (int s = 0; s < k; ++s, ++step) {
    const int dist = q >> (s + 1);  // distance q/2 first: halves stay contiguous
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)], partner = members[size_t(v ^ dist)];
      const int lo = v & ~(2 * dist - 1), mid = lo + dist, hi = lo + 2 * dist;
      const bool upper = v & dist;
      block_runs(members, q, upper ? lo : mid, upper ? mid : hi, count, give);
      block_runs(members, q, upper ? mid : lo, upper ? hi : mid, count, keep);
      for (const Run& g : give) b.send(step, r, partner, {src[size_t(v)], g.offset}, g.len);
      int64_t packed = 0;
      for (const Run& kr : keep) {
        b.recv(step, r, partner, {Buf::Scratch, recv_base + packed}, kr.len);
        packed += kr.len;
      }
      packed = 0;
      for (const Run& kr : keep) {  // op(lower's, upper's), as in append_hd_allreduce
        const BufRef mine{src[size_t(v)], kr.offset}, theirs{Buf::Scratch, recv_base + packed};
        if (upper)
          b.reduce(step, r, {Buf::Scratch, kr.offset}, {theirs, mine}, kr.len);
        else
          b.reduce(step, r, {Buf::Scratch, kr.offset}, {mine, theirs}, kr.len);
        packed += kr.len;
      }
      b.need_scratch(r, recv_base + packed);
      src[size_t(v)] = Buf::Scratch;
    }
    b.touch(step);
  }
  // Core rank v now holds its own block and its folded partner's.
  --step;  // the copies and finalizes run after the last halving step's reduces
  for (int v = 0; v < q; ++v) {
    const int r = members[size_t(v)];
    b.copy(step, r, out, {Buf::Scratch, int64_t(r) * count}, count);
    b.finalize(step, r, out, count);
    if (q + v < P) b.finalize(step, r, {Buf::Scratch, int64_t(members[size_t(q + v)]) * count}, count);
  }
  ++step;
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, c, x, {Buf::Scratch, int64_t(x) * count}, count);
      b.recv(step, x, c, out, count);
    }
    b.touch(step++);
  }
  return b.finish();
}

Schedule hd_allgather(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int P = nranks, k = floor_log2(P), q = 1 << k, extras = P - q;
  ScheduleBuilder b(Collective::AllGather, "hd", P, count, count, count * P, 2 * k + 6);
  const BufRef in{Buf::Input, 0};
  auto own = [&](int r) { return BufRef{Buf::Output, int64_t(r) * count}; };
  int step = 0;
  // Every rank copies its input into place in the first step, after that step's
  // transfers (which therefore read the own block from Input).
  auto copy_inputs = [&] {
    for (int r = 0; r < P; ++r) b.copy(0, r, own(r), in, count);
    b.touch(0);
  };
  if (extras > 0) {
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      b.send(step, x, c, in, count);
      b.recv(step, c, x, own(x), count);
    }
    copy_inputs();
    ++step;
  }
  std::vector<Run> mine, theirs;
  for (int s = 0; s < k; ++s, ++step) {
    const int dist = 1 << s;  // distance 1 first: the held range doubles contiguously
    for (int v = 0; v < q; ++v) {
      const int r = members[size_t(v)], pv = v ^ dist, partner = members[size_t(pv)];
      const int lo = v & ~(dist - 1), plo = pv & ~(dist - 1);
      if (step == 0) {
        // Own block still in Input; the first step moves single blocks (no folded
        // partner exists when there is no pre step).
        b.send(step, r, partner, in, count);
        b.recv(step, r, partner, own(partner), count);
        continue;
      }
      block_runs(members, q, lo, lo + dist, count, mine);
      block_runs(members, q, plo, plo + dist, count, theirs);
      for (const Run& m : mine) b.send(step, r, partner, {Buf::Output, m.offset}, m.len);
      for (const Run& t : theirs) b.recv(step, r, partner, {Buf::Output, t.offset}, t.len);
    }
    if (step == 0) copy_inputs();
    b.touch(step);
  }
  if (P == 1) copy_inputs();
  if (extras > 0) {  // post step: core e hands everything but x's own block to x
    for (int e = 0; e < extras; ++e) {
      const int x = members[size_t(q + e)], c = members[size_t(e)];
      const int64_t xo = int64_t(x) * count, total = count * P;
      b.send(step, c, x, {Buf::Output, 0}, xo);
      b.send(step, c, x, {Buf::Output, xo + count}, total - xo - count);
      b.recv(step, x, c, {Buf::Output, 0}, xo);
      b.recv(step, x, c, {Buf::Output, xo + count}, total - xo - count);
    }
    b.touch(step++);
  }
  return b.finish();
}

std::vector<int> bit_reversed_order(std::span<const int> order) {
  const int n = int(order.size());
  const int k = std::countr_zero(unsigned(n));
  std::vector<int> reversed(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    unsigned r = 0;
    for (int b = 0; b < k; ++b) r |= ((unsigned(v) >> b) & 1u) << (k - 1 - b);
    reversed[size_t(v)] = order[r];
  }
  return reversed;
}

Schedule hd_schedule(Collective collective, int nranks, int64_t count, std::span<const int> order) {
  switch (collective) {
    case Collective::AllReduce: return hd_allreduce(nranks, count, order);
    case Collective::ReduceScatter: return hd_reduce_scatter(nranks, count, order);
    case Collective::AllGather: return hd_allgather(nranks, count, order);
    case Collective::AllToAll: break;
  }
  throw std::invalid_argument("halving-doubling has no all-to-all form");
}

}  // namespace topocoll::sched
