#include "sched/verifier.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace topocoll::sched {
namespace {

// Expression ids: kFinal marks "the finished value of element `elem`" (its tree is in the
// identity table); 1..P are the leaves (rank q's contribution is q+1); then interned nodes.
constexpr uint32_t kFinal = 0;

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Expressions {
 public:
  explicit Expressions(int nranks) : nranks_(nranks) {
    add(0, 0, 0, 0, 0, false);  // kFinal placeholder
    for (int q = 0; q < nranks; ++q) {
      add(0, 0, 1, mix(uint64_t(q) * 2 + 1), mix(uint64_t(q) * 2 + 2), false);
      all_h1_ += h1_.back();
      all_h2_ += h2_.back();
    }
    table_keys_.assign(1 << 12, 0);
    table_vals_.assign(1 << 12, 0);
  }

  bool is_leaf(uint32_t e) const { return e >= 1 && e <= uint32_t(nranks_); }
  uint64_t leaves(uint32_t e) const { return lc_[e]; }
  size_t size() const { return lc_.size(); }

  // Binary node, operands in order: (a,b) and (b,a) are two ids. IEEE gives a+b and b+a the
  // same value but not the same bits when both are NaN (x86 keeps the first operand's
  // payload; topocoll's min/max keep the first NaN), so one order everywhere is what
  // bitwise identity takes. Each node also names its commutative form (canonical_: the
  // same tree, each node's operands sorted), which orders cannot tell apart: the set of
  // contributions is proven once on it, not once per order (halving-doubling reduces each
  // half of a pair in the other order, P log P ordered trees over one canonical one).
  uint32_t sum(uint32_t a, uint32_t b) {
    const uint64_t key = (uint64_t(a) << 32) | b;  // a >= 1, so key != 0
    size_t mask = table_keys_.size() - 1;
    size_t i = size_t(mix(key)) & mask;
    while (table_keys_[i] != 0) {
      if (table_keys_[i] == key) return table_vals_[i];
      i = (i + 1) & mask;
    }
    const uint32_t id = add(a, b, lc_[a] + lc_[b], h1_[a] + h1_[b], h2_[a] + h2_[b], false);
    table_keys_[i] = key;
    table_vals_[i] = id;
    if (++table_used_ * 2 > table_keys_.size()) grow();
    uint32_t ca = canonical_[a], cb = canonical_[b];
    if (ca > cb) std::swap(ca, cb);
    // Sorted canonical operands make the node its own commutative form (no recursion past one
    // level: sum(ca, cb) is such a node).
    if (ca != a || cb != b) canonical_[id] = sum(ca, cb);
    return id;
  }

  uint32_t finalized(uint32_t a) {
    if (fin_of_.size() < lc_.size()) fin_of_.resize(lc_.size() * 2, 0);
    if (fin_of_[a] == 0) {
      const uint32_t id = add(a, 0, lc_[a], h1_[a], h2_[a], true);
      fin_of_[a] = id;
      if (canonical_[a] != a) canonical_[id] = finalized(canonical_[a]);
    }
    return fin_of_[a];
  }

  // All P contributions exactly once? Count and multiset hash first; then, within the
  // budget, the exact set of distinct leaves (a DAG walk).
  bool complete(uint32_t e, int64_t& budget, bool& exact) {
    e = canonical_[e];  // the contributions do not depend on the operands' order
    if (state_.size() < lc_.size()) state_.resize(lc_.size() * 2, 0);
    if (state_[e]) return state_[e] == 1;
    bool ok = lc_[e] == uint64_t(nranks_) && h1_[e] == all_h1_ && h2_[e] == all_h2_;
    if (ok) {
      if (budget > 0) {
        ok = distinct_leaves(e, budget) == nranks_;
      } else {
        exact = false;
      }
    }
    state_[e] = ok ? 1 : 2;
    return ok;
  }

  // For error messages: the first rank missing from e, or counted twice (-1 if neither).
  std::string describe_set(uint32_t e) {
    std::vector<int> times(size_t(nranks_), 0);
    std::vector<uint32_t> stack{e};
    while (!stack.empty()) {
      uint32_t x = stack.back();
      stack.pop_back();
      if (is_leaf(x)) {
        ++times[x - 1];
      } else if (fin_[x]) {
        stack.push_back(a_[x]);
      } else if (x != kFinal) {
        stack.push_back(a_[x]);
        stack.push_back(b_[x]);
      }
    }
    std::string out = "holds " + std::to_string(lc_[e]) + " of " + std::to_string(nranks_) +
                      " contributions";
    for (int q = 0; q < nranks_; ++q)
      if (times[size_t(q)] > 1) return out + ", rank " + std::to_string(q) + "'s " +
                                        std::to_string(times[size_t(q)]) + " times";
    for (int q = 0; q < nranks_; ++q)
      if (times[size_t(q)] == 0) return out + ", rank " + std::to_string(q) + "'s missing";
    return out;
  }

 private:
  uint32_t add(uint32_t a, uint32_t b, uint64_t lc, uint64_t h1, uint64_t h2, bool fin) {
    a_.push_back(a);
    b_.push_back(b);
    lc_.push_back(lc);
    h1_.push_back(h1);
    h2_.push_back(h2);
    fin_.push_back(fin);
    canonical_.push_back(uint32_t(lc_.size() - 1));  // its own until sum/finalized say otherwise
    return uint32_t(lc_.size() - 1);
  }
  void grow() {
    std::vector<uint64_t> keys(table_keys_.size() * 2, 0);
    std::vector<uint32_t> vals(keys.size(), 0);
    const size_t mask = keys.size() - 1;
    for (size_t j = 0; j < table_keys_.size(); ++j) {
      if (!table_keys_[j]) continue;
      size_t i = size_t(mix(table_keys_[j])) & mask;
      while (keys[i]) i = (i + 1) & mask;
      keys[i] = table_keys_[j];
      vals[i] = table_vals_[j];
    }
    table_keys_.swap(keys);
    table_vals_.swap(vals);
  }
  int distinct_leaves(uint32_t e, int64_t& budget) {
    if (stamp_.size() < lc_.size()) stamp_.resize(lc_.size() * 2, 0);
    ++epoch_;
    int found = 0;
    stack_.assign(1, e);
    while (!stack_.empty()) {
      uint32_t x = stack_.back();
      stack_.pop_back();
      if (stamp_[x] == epoch_) continue;
      stamp_[x] = epoch_;
      --budget;
      if (is_leaf(x)) {
        ++found;
      } else if (!fin_[x]) {
        stack_.push_back(a_[x]);
        stack_.push_back(b_[x]);
      }
    }
    return found;
  }

  int nranks_;
  std::vector<uint32_t> a_, b_;
  std::vector<uint64_t> lc_, h1_, h2_;
  std::vector<bool> fin_;
  std::vector<uint32_t> canonical_;  // the node's commutative form (itself when operands sorted)
  std::vector<uint32_t> fin_of_;
  std::vector<uint8_t> state_;
  std::vector<uint32_t> stamp_, stack_;
  uint32_t epoch_ = 0;
  uint64_t all_h1_ = 0, all_h2_ = 0;
  std::vector<uint64_t> table_keys_;
  std::vector<uint32_t> table_vals_;
  size_t table_used_ = 0;
};

// A run [lo, hi) of one buffer whose element lo holds value (expr, elem), lo+1 holds
// (expr, elem+1), and so on.
struct Piece {
  int64_t lo, hi, elem;
  uint32_t expr;
};
// The same without a place: what a read returns and a write stores.
struct Seg {
  int64_t len, elem;
  uint32_t expr;
};
using Pieces = std::vector<Piece>;

bool mergeable(const Piece& a, const Piece& b) {
  return a.hi == b.lo && a.expr == b.expr && a.elem + (a.hi - a.lo) == b.elem;
}

// Reads [lo, hi); returns the first uninitialised element or -1.
int64_t read(const Pieces& v, int64_t lo, int64_t hi, std::vector<Seg>& out) {
  out.clear();
  auto it = std::partition_point(v.begin(), v.end(), [&](const Piece& p) { return p.hi <= lo; });
  int64_t at = lo;
  for (; at < hi; ++it) {
    if (it == v.end() || it->lo > at) return at;
    const int64_t end = std::min(hi, it->hi);
    out.push_back({end - at, it->elem + (at - it->lo), it->expr});
    at = end;
  }
  return -1;
}

void write(Pieces& v, int64_t lo, int64_t hi, const std::vector<Seg>& segs, std::vector<Piece>& tmp) {
  size_t first = size_t(std::partition_point(v.begin(), v.end(), [&](const Piece& p) { return p.hi <= lo; }) - v.begin());
  size_t last = first;
  while (last < v.size() && v[last].lo < hi) ++last;
  tmp.clear();
  auto push = [&](const Piece& p) {
    if (!tmp.empty() && mergeable(tmp.back(), p))
      tmp.back().hi = p.hi;
    else
      tmp.push_back(p);
  };
  if (first < last && v[first].lo < lo) {  // the overwritten piece's left remainder
    push({v[first].lo, lo, v[first].elem, v[first].expr});
  } else if (first > 0 && v[first - 1].hi == lo) {  // the left neighbour may merge
    --first;
    push(v[first]);
  }
  int64_t at = lo;
  for (const Seg& s : segs) {
    push({at, at + s.len, s.elem, s.expr});
    at += s.len;
  }
  if (last > first && v[last - 1].hi > hi) {
    const Piece& p = v[last - 1];
    push({hi, p.hi, p.elem + (hi - p.lo), p.expr});
  }
  if (last < v.size() && !tmp.empty() && mergeable(tmp.back(), v[last])) {
    tmp.back().hi = v[last].hi;
    ++last;
  }
  const size_t old = last - first;
  if (tmp.size() == old) {
    std::copy(tmp.begin(), tmp.end(), v.begin() + int64_t(first));
  } else if (tmp.size() < old) {
    std::copy(tmp.begin(), tmp.end(), v.begin() + int64_t(first));
    v.erase(v.begin() + int64_t(first + tmp.size()), v.begin() + int64_t(last));
  } else {
    std::copy(tmp.begin(), tmp.begin() + int64_t(old), v.begin() + int64_t(first));
    v.insert(v.begin() + int64_t(last), tmp.begin() + int64_t(old), tmp.end());
  }
}

// Pieces sorted, non-empty, disjoint and maximally merged (the self-check of the tests).
bool well_formed(const Pieces& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].lo >= v[i].hi) return false;
    if (i > 0 && (v[i - 1].hi > v[i].lo || mergeable(v[i - 1], v[i]))) return false;
  }
  return true;
}

struct Msg {
  int src, dst;
  int64_t count;
  uint32_t seg_begin, seg_end;
  uint32_t op;  // index in the sender's step
  bool used;
};

// A physical range of one rank's memory.
struct Range {
  int space;  // 0 input, 1 output (or the aliased buffer in place), 2 scratch
  int64_t lo, hi;
};

class Verifier {
 public:
  Verifier(const Schedule& s, const VerifyOptions& o)
      : s_(s), o_(o), P_(s.nranks), exprs_(s.nranks) {}

  VerifyResult run() {
    res_.bitwise_identical = true;
    if (!check_shape()) return finish();
    budget_ = o_.exact_check_budget;
    state_.assign(size_t(P_) * 3, {});
    for (int r = 0; r < P_; ++r) init_input(r);
    sent_.assign(size_t(P_), 0);
    received_.assign(size_t(P_), 0);
    const int steps = s_.num_steps();
    res_.stats.steps = steps;
    for (int st = 0; st < steps; ++st)
      if (!step(st)) return finish();
    if (!check_outputs()) return finish();
    res_.ok = res_.error.empty();
    return finish();
  }

 private:
  VerifyResult finish() {
    res_.stats.expressions = int64_t(exprs_.size()) - P_ - 1;
    for (int r = 0; r < P_ && !sent_.empty(); ++r) {
      res_.stats.max_send_elems_per_rank = std::max(res_.stats.max_send_elems_per_rank, sent_[size_t(r)]);
      res_.stats.max_recv_elems_per_rank = std::max(res_.stats.max_recv_elems_per_rank, received_[size_t(r)]);
      res_.stats.total_send_elems += sent_[size_t(r)];
    }
    res_.stats.max_send_bytes_per_rank = res_.stats.max_send_elems_per_rank * o_.element_bytes;
    if (!res_.ok) res_.bitwise_identical = false;
    return res_;
  }

  bool fail(std::string msg) {
    if (res_.error.empty()) res_.error = std::move(msg);
    res_.ok = false;
    return false;
  }

  static std::string range_name(BufRef b, int64_t n) {
    return std::string(to_string(b.buf)) + "[" + std::to_string(b.offset) + "," +
           std::to_string(b.offset + n) + ")";
  }
  std::string where(int r, int st, size_t i, const Op& op) const {
    std::string d = "rank " + std::to_string(r) + " step " + std::to_string(st) + " op " +
                    std::to_string(i) + " (" + std::string(to_string(op.kind));
    switch (op.kind) {
      case OpKind::Send: d += " to " + std::to_string(op.peer) + " from " + range_name(op.src(), op.count); break;
      case OpKind::Recv: d += " from " + std::to_string(op.peer) + " into " + range_name(op.dst, op.count); break;
      case OpKind::Reduce:
      case OpKind::Copy:
        d += " " + range_name(op.dst, op.count) + " <-";
        for (int k = 0; k < std::max<int>(1, op.nsrc) && k < kMaxReduceInputs; ++k)
          d += " " + range_name(op.srcs[size_t(k)], op.count);
        break;
      case OpKind::Finalize: d += " " + range_name(op.dst, op.count); break;
    }
    return d + ")";
  }

  bool check_shape() {
    if (P_ < 1) return fail("schedule has nranks " + std::to_string(P_));
    if (int64_t(s_.programs.size()) != P_)
      return fail("schedule has " + std::to_string(s_.programs.size()) + " programs for " +
                  std::to_string(P_) + " ranks");
    const int64_t c = s_.count;
    int64_t in = c, out = c;
    switch (s_.collective) {
      case Collective::AllReduce: break;
      case Collective::ReduceScatter: in = c * P_; break;
      case Collective::AllGather: out = c * P_; break;
      case Collective::AllToAll: in = out = c * P_; break;
    }
    if (c < 0 || s_.input_count != in || s_.output_count != out)
      return fail(std::string(to_string(s_.collective)) + " of count " + std::to_string(c) +
                  " needs input/output counts " + std::to_string(in) + "/" + std::to_string(out) +
                  ", schedule says " + std::to_string(s_.input_count) + "/" +
                  std::to_string(s_.output_count));
    if (o_.aliasing == Aliasing::InPlace && s_.collective == Collective::AllToAll)
      return fail("in-place all-to-all is not defined (NCCL aliases only allreduce, "
                  "reduce-scatter and allgather buffers)");
    const int steps = s_.num_steps();
    for (int r = 0; r < P_; ++r) {
      const RankProgram& p = s_.programs[size_t(r)];
      if (p.num_steps() != steps)
        return fail("rank " + std::to_string(r) + " has " + std::to_string(p.num_steps()) +
                    " steps, rank 0 has " + std::to_string(steps));
      if (p.scratch_elems < 0) return fail("rank " + std::to_string(r) + " has negative scratch");
      if (!p.step_begin.empty() && (p.step_begin.front() != 0 || p.step_begin.back() != p.ops.size()))
        return fail("rank " + std::to_string(r) + " step_begin does not cover its ops");
      for (int st = 0; st < steps; ++st)
        if (p.step_begin[size_t(st)] > p.step_begin[size_t(st) + 1])
          return fail("rank " + std::to_string(r) + " step_begin decreases at step " + std::to_string(st));
      res_.stats.ops += int64_t(p.ops.size());
    }
    return true;
  }

  Pieces& buf(int r, int space) { return state_[size_t(r) * 3 + size_t(space)]; }

  void store(int r, const Range& rg, const std::vector<Seg>& segs) {
    Pieces& v = buf(r, rg.space);
    write(v, rg.lo, rg.hi, segs, tmp_);
    if (o_.self_check && !well_formed(v)) fail("verifier self-check: rank " + std::to_string(r) + " buffer state broken");
  }

  // Logical buffer range -> physical, with the bounds check. Returns false on error.
  bool phys(int r, BufRef b, int64_t n, Range& out, std::string& err) const {
    int64_t size = 0;
    switch (b.buf) {
      case Buf::Input: size = s_.input_count; break;
      case Buf::Output: size = s_.output_count; break;
      case Buf::Scratch: size = s_.programs[size_t(r)].scratch_elems; break;
      default: err = "names an unknown buffer"; return false;
    }
    if (n < 0) { err = "has a negative count"; return false; }
    if (b.offset < 0 || b.offset > size || n > size - b.offset) {
      err = "range " + range_name(b, n) + " is out of bounds (" + std::string(to_string(b.buf)) +
            " has " + std::to_string(size) + " elements)";
      return false;
    }
    out.lo = b.offset;
    out.space = b.buf == Buf::Input ? 0 : b.buf == Buf::Output ? 1 : 2;
    if (o_.aliasing == Aliasing::InPlace && b.buf != Buf::Scratch) {
      out.space = 1;
      if (s_.collective == Collective::ReduceScatter && b.buf == Buf::Output) out.lo += int64_t(r) * s_.count;
      if (s_.collective == Collective::AllGather && b.buf == Buf::Input) out.lo += int64_t(r) * s_.count;
    }
    out.hi = out.lo + n;
    return true;
  }

  void init_input(int r) {
    Range in;
    if (s_.input_count == 0 || !phys(r, {Buf::Input, 0}, s_.input_count, in, err_)) return;
    Piece p{in.lo, in.hi, 0, uint32_t(r + 1)};
    if (s_.collective == Collective::AllGather) {  // already the final value of its output place
      p.expr = kFinal;
      p.elem = int64_t(r) * s_.count;
    }
    buf(r, in.space).push_back(p);
  }

  static bool overlaps(const Range& a, const Range& b) {
    return a.space == b.space && a.lo < b.hi && b.lo < a.hi;
  }

  bool step(int st) {
    msgs_.clear();
    pool_.clear();
    // A: validate every op, read every send (sends see memory as before the step).
    spans_.resize(size_t(P_));
    for (int r = 0; r < P_; ++r) {
      std::span<const Op> ops = spans_[size_t(r)] = s_.programs[size_t(r)].step(st);
      xfer_.clear();
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        Range rg;
        switch (op.kind) {
          case OpKind::Send:
          case OpKind::Recv: {
            if (op.peer < 0 || op.peer >= P_ || op.peer == r)
              return fail(where(r, st, i, op) + ": peer " + std::to_string(op.peer) + " is not another rank");
            const bool is_send = op.kind == OpKind::Send;
            if (!phys(r, is_send ? op.src() : op.dst, op.count, rg, err_)) return fail(where(r, st, i, op) + ": " + err_);
            if (!is_send && op.dst.buf == Buf::Input) return fail(where(r, st, i, op) + ": writes Input");
            xfer_.push_back({rg, is_send, uint32_t(i)});
            if (is_send) {
              const int64_t bad = read(buf(r, rg.space), rg.lo, rg.hi, segs_);
              if (bad >= 0)
                return fail(where(r, st, i, op) + ": reads uninitialised element " +
                            std::to_string(bad - rg.lo + op.src().offset) + " of " + std::string(to_string(op.src().buf)));
              const uint32_t b = uint32_t(pool_.size());
              pool_.insert(pool_.end(), segs_.begin(), segs_.end());
              msgs_.push_back({r, op.peer, op.count, b, uint32_t(pool_.size()), uint32_t(i), false});
              sent_[size_t(r)] += op.count;
            }
            break;
          }
          case OpKind::Reduce:
          case OpKind::Copy:
          case OpKind::Finalize:
            break;  // checked where they run (phase C), which reads each op once
          default:
            return fail(where(r, st, i, op) + ": unknown op kind");
        }
      }
      res_.stats.max_transfers_per_rank_step = std::max<int64_t>(res_.stats.max_transfers_per_rank_step, int64_t(xfer_.size()));
      if (!check_transfer_overlaps(r, st, ops)) return false;
    }
    // B: match receives with sends, per (sender, receiver) pair in posting order.
    // (A rank's receives only change its own memory, and every send was read above.)
    bucket_begin_.assign(size_t(P_) + 1, 0);
    for (const Msg& m : msgs_) ++bucket_begin_[size_t(m.dst) + 1];
    for (int r = 0; r < P_; ++r) bucket_begin_[size_t(r) + 1] += bucket_begin_[size_t(r)];
    order_.resize(msgs_.size());
    {
      fill_.assign(bucket_begin_.begin(), bucket_begin_.end() - 1);
      for (uint32_t m = 0; m < msgs_.size(); ++m) order_[fill_[size_t(msgs_[m].dst)]++] = m;  // stable: by sender, then op
    }
    for (int r = 0; r < P_; ++r) {
      std::span<const Op> ops = spans_[size_t(r)];
      const uint32_t b = bucket_begin_[size_t(r)], e = bucket_begin_[size_t(r) + 1];
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        if (op.kind != OpKind::Recv) continue;
        // The first unused message from op.peer (messages of a bucket are in sender order).
        auto it = std::partition_point(order_.begin() + b, order_.begin() + e,
                                       [&](uint32_t m) { return msgs_[m].src < op.peer; });
        while (it != order_.begin() + e && msgs_[*it].src == op.peer && msgs_[*it].used) ++it;
        if (it == order_.begin() + e || msgs_[*it].src != op.peer)
          return fail(where(r, st, i, op) + ": no matching send from rank " + std::to_string(op.peer) + " in this step");
        Msg& m = msgs_[*it];
        if (m.count != op.count)
          return fail(where(r, st, i, op) + ": the matching send (rank " + std::to_string(m.src) + " step " +
                      std::to_string(st) + " op " + std::to_string(m.op) + ") carries " +
                      std::to_string(m.count) + " elements");
        m.used = true;
        Range rg;
        phys(r, op.dst, op.count, rg, err_);
        segs_.assign(pool_.begin() + m.seg_begin, pool_.begin() + m.seg_end);
        store(r, rg, segs_);
        received_[size_t(r)] += op.count;
      }
      for (uint32_t k = b; k < e; ++k)  // every message to r must have been received
        if (!msgs_[order_[k]].used) {
          const Msg& m = msgs_[order_[k]];
          return fail(where(m.src, st, m.op, s_.programs[size_t(m.src)].step(st)[m.op]) + ": rank " +
                      std::to_string(m.dst) + " posts no matching recv in this step");
        }
      // C: then the rank's local ops, in order (they touch only its own memory, so they
      // can run right after its receives).
      for (size_t i = 0; i < ops.size(); ++i)
        if (!local_op(r, st, i, ops[i])) return false;
      for (int sp = 0; sp < 3; ++sp)
        res_.stats.max_pieces = std::max<int64_t>(res_.stats.max_pieces, int64_t(buf(r, sp).size()));
    }
    return true;
  }

  struct Xfer {
    Range rg;
    bool send;
    uint32_t op;
  };

  // A step's receives may not overlap its sends nor each other (sends may share sources).
  bool check_transfer_overlaps(int r, int st, std::span<const Op> ops) {
    if (xfer_.size() < 2) return true;
    std::sort(xfer_.begin(), xfer_.end(), [](const Xfer& a, const Xfer& b) {
      return a.rg.space != b.rg.space ? a.rg.space < b.rg.space : a.rg.lo < b.rg.lo;
    });
    int space = -1;
    int64_t max_any = 0, max_recv = 0;
    uint32_t any_op = 0, recv_op = 0;
    for (const Xfer& x : xfer_) {
      if (x.rg.lo == x.rg.hi) continue;
      if (x.rg.space != space) {
        space = x.rg.space;
        max_any = max_recv = INT64_MIN;
      }
      const bool clash = x.send ? max_recv > x.rg.lo : max_any > x.rg.lo;
      if (clash) {
        const uint32_t other = x.send ? recv_op : any_op;
        return fail(where(r, st, x.op, ops[x.op]) + ": overlaps " + where(r, st, other, ops[other]) +
                    " in the same step");
      }
      if (x.rg.hi > max_any) { max_any = x.rg.hi; any_op = x.op; }
      if (!x.send && x.rg.hi > max_recv) { max_recv = x.rg.hi; recv_op = x.op; }
    }
    return true;
  }

  // Structure and bounds of a local op.
  bool check_local(int r, int st, size_t i, const Op& op) {
    Range rg;
    switch (op.kind) {
      case OpKind::Reduce:
        if (op.nsrc < 2 || op.nsrc > kMaxReduceInputs)
          return fail(where(r, st, i, op) + ": reduce needs 2.." + std::to_string(kMaxReduceInputs) +
                      " sources, has " + std::to_string(op.nsrc));
        [[fallthrough]];
      case OpKind::Copy:
      case OpKind::Finalize: {
        if (op.dst.buf == Buf::Input) return fail(where(r, st, i, op) + ": writes Input");
        if (!phys(r, op.dst, op.count, rg, err_)) return fail(where(r, st, i, op) + ": " + err_);
        const int n = op.kind == OpKind::Reduce ? op.nsrc : op.kind == OpKind::Copy ? 1 : 0;
        for (int k = 0; k < n; ++k)
          if (!phys(r, op.srcs[size_t(k)], op.count, rg, err_)) return fail(where(r, st, i, op) + ": " + err_);
        if (op.kind == OpKind::Finalize && (s_.collective == Collective::AllGather ||
                                            s_.collective == Collective::AllToAll))
          return fail(where(r, st, i, op) + ": finalize in a collective without reduction");
        return true;
      }
      default:
        return fail(where(r, st, i, op) + ": unknown op kind");
    }
  }

  bool local_op(int r, int st, size_t i, const Op& op) {
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return true;
    if (!check_local(r, st, i, op)) return false;
    Range dst;
    phys(r, op.dst, op.count, dst, err_);
    if (op.count == 0) return true;
    if (op.kind == OpKind::Copy) {
      Range src;
      phys(r, op.src(), op.count, src, err_);
      if (overlaps(src, dst) && src.lo != dst.lo)
        return fail(where(r, st, i, op) + ": source and destination partly overlap");
      const int64_t bad = read(buf(r, src.space), src.lo, src.hi, segs_);
      if (bad >= 0) return fail(where(r, st, i, op) + ": reads uninitialised element at offset " + std::to_string(bad - src.lo));
      store(r, dst, segs_);
      return true;
    }
    if (op.kind == OpKind::Finalize) {
      const int64_t bad = read(buf(r, dst.space), dst.lo, dst.hi, segs_);
      if (bad >= 0) return fail(where(r, st, i, op) + ": finalizes uninitialised element at offset " + std::to_string(bad - dst.lo));
      for (Seg& sg : segs_) {
        if (sg.expr == kFinal) return fail(where(r, st, i, op) + ": value finalized twice");
        bool exact = true;
        if (!exprs_.complete(sg.expr, budget_, exact))
          return fail(where(r, st, i, op) + ": finalizes an incomplete value for elements [" +
                      std::to_string(sg.elem) + "," + std::to_string(sg.elem + sg.len) + "): " +
                      exprs_.describe_set(sg.expr));
        if (!exact) res_.stats.exact_contributions = false;
        note_final(r, sg.elem, sg.elem + sg.len, exprs_.finalized(sg.expr));
        sg.expr = kFinal;
      }
      store(r, dst, segs_);
      return true;
    }
    // Reduce: dst = srcs[0] op srcs[1] op ..., element by element, left to right.
    const int n = op.nsrc;
    srcs_.resize(size_t(n));
    for (int k = 0; k < n; ++k) {
      Range src;
      phys(r, op.srcs[size_t(k)], op.count, src, err_);
      if (overlaps(src, dst) && src.lo != dst.lo)
        return fail(where(r, st, i, op) + ": source " + std::to_string(k) + " partly overlaps the destination");
      const int64_t bad = read(buf(r, src.space), src.lo, src.hi, srcs_[size_t(k)]);
      if (bad >= 0)
        return fail(where(r, st, i, op) + ": source " + std::to_string(k) + " reads uninitialised element at offset " +
                    std::to_string(bad - src.lo));
    }
    out_.clear();
    pos_.assign(size_t(n), {0, 0});  // (segment index, offset in it)
    for (int64_t done = 0; done < op.count;) {
      int64_t len = op.count - done;
      for (int k = 0; k < n; ++k) {
        const Seg& sg = srcs_[size_t(k)][pos_[size_t(k)].first];
        len = std::min(len, sg.len - pos_[size_t(k)].second);
      }
      const Seg& s0 = srcs_[0][pos_[0].first];
      const int64_t elem = s0.elem + pos_[0].second;
      uint32_t e = s0.expr;
      for (int k = 0; k < n; ++k) {
        const Seg& sg = srcs_[size_t(k)][pos_[size_t(k)].first];
        const int64_t ek = sg.elem + pos_[size_t(k)].second;
        if (sg.expr == kFinal)
          return fail(where(r, st, i, op) + ": source " + std::to_string(k) + " is already finalized (element " +
                      std::to_string(ek) + ")");
        if (ek != elem)
          return fail(where(r, st, i, op) + ": combines element " + std::to_string(elem) + " with element " +
                      std::to_string(ek) + " (source " + std::to_string(k) + ")");
        if (k > 0) e = exprs_.sum(e, sg.expr);
      }
      if (!out_.empty() && out_.back().expr == e && out_.back().elem + out_.back().len == elem)
        out_.back().len += len;
      else
        out_.push_back({len, elem, e});
      for (int k = 0; k < n; ++k) {
        auto& p = pos_[size_t(k)];
        p.second += len;
        if (p.second == srcs_[size_t(k)][p.first].len) { ++p.first; p.second = 0; }
      }
      done += len;
    }
    store(r, dst, out_);
    return true;
  }

  // One tree per finished element across all ranks, or the schedule is not bitwise identical.
  void note_final(int r, int64_t lo, int64_t hi, uint32_t tree) {
    auto insert = [&](int64_t a, int64_t b) { finals_.emplace(a, FinalEntry{b, tree, r}); };
    auto it = finals_.upper_bound(lo);
    if (it != finals_.begin()) {
      --it;
      if (it->second.hi <= lo) ++it;
    }
    int64_t cur = lo;
    while (it != finals_.end() && it->first < hi) {
      if (it->first > cur) insert(cur, it->first);
      if (it->second.tree != tree && res_.bitwise_identical) {
        res_.bitwise_identical = false;
        const int64_t a = std::max(lo, it->first), b = std::min(hi, it->second.hi);
        res_.identity_note = "elements [" + std::to_string(a) + "," + std::to_string(b) + "): rank " +
                             std::to_string(it->second.rank) + " and rank " + std::to_string(r) +
                             " finalize sums reduced in different orders";
      }
      cur = std::max(cur, it->second.hi);
      ++it;
    }
    if (cur < hi) insert(cur, hi);
  }

  bool check_outputs() {
    const int64_t c = s_.count;
    for (int r = 0; r < P_; ++r) {
      Range out;
        if (s_.output_count == 0) continue;
      phys(r, {Buf::Output, 0}, s_.output_count, out, err_);
      const int64_t bad = read(buf(r, out.space), out.lo, out.hi, segs_);
      const std::string who = "rank " + std::to_string(r) + " output";
      if (bad >= 0) return fail(who + " element " + std::to_string(bad - out.lo) + " is never written");
      int64_t y = 0;
      for (const Seg& sg : segs_) {
        const std::string at = who + "[" + std::to_string(y) + "," + std::to_string(y + sg.len) + ")";
        switch (s_.collective) {
          case Collective::AllReduce:
          case Collective::ReduceScatter: {
            const int64_t want = s_.collective == Collective::AllReduce ? y : int64_t(r) * c + y;
            if (sg.expr != kFinal)
              return fail(at + " is not finalized: " + exprs_.describe_set(sg.expr));
            if (sg.elem != want)
              return fail(at + " holds element " + std::to_string(sg.elem) + ", wants " + std::to_string(want));
            break;
          }
          case Collective::AllGather:
            if (sg.expr != kFinal || sg.elem != y)
              return fail(at + " does not hold the gathered input " +
                          (sg.expr == kFinal ? "(holds output element " + std::to_string(sg.elem) + ")"
                                             : std::string("(holds a reduction)")));
            break;
          case Collective::AllToAll: {
            const int64_t q = c > 0 ? y / c : 0;
            const bool ok = exprs_.is_leaf(sg.expr) && int64_t(sg.expr) - 1 == q && y + sg.len <= (q + 1) * c &&
                            sg.elem == int64_t(r) * c + (y - q * c);
            if (!ok)
              return fail(at + " should hold rank " + std::to_string(q) + "'s input[" +
                          std::to_string(int64_t(r) * c + (y - q * c)) + ",...)");
            break;
          }
        }
        y += sg.len;
      }
    }
    if (!res_.bitwise_identical && s_.claims_bitwise_identical)
      return fail("schedule claims bitwise-identical results but " + res_.identity_note);
    return true;
  }

  struct FinalEntry {
    int64_t hi;
    uint32_t tree;
    int rank;
  };

  const Schedule& s_;
  const VerifyOptions& o_;
  const int P_;
  Expressions exprs_;
  VerifyResult res_;
  int64_t budget_ = 0;
  std::vector<Pieces> state_;
  std::vector<int64_t> sent_, received_;
  std::vector<Msg> msgs_;
  std::vector<Seg> pool_, segs_, out_;
  std::vector<std::vector<Seg>> srcs_;
  std::vector<std::pair<size_t, int64_t>> pos_;
  std::vector<Piece> tmp_;
  std::vector<Xfer> xfer_;
  std::vector<uint32_t> bucket_begin_, order_, fill_;
  std::string err_;  // the last phys() complaint
  std::vector<std::span<const Op>> spans_;  // this step's ops of every rank
  std::map<int64_t, FinalEntry> finals_;
};

}  // namespace

VerifyResult verify(const Schedule& schedule, const VerifyOptions& options) {
  Verifier v(schedule, options);
  return v.run();
}

VerifyResult verify_as_served(const Schedule& schedule, VerifyOptions options) {
  options.aliasing = Aliasing::OutOfPlace;
  VerifyResult out_of_place = verify(schedule, options);
  if (!out_of_place.ok || schedule.collective == Collective::AllToAll) return out_of_place;
  options.aliasing = Aliasing::InPlace;
  if (const VerifyResult in_place = verify(schedule, options); !in_place.ok) {
    out_of_place.ok = false;
    out_of_place.error = "in place: " + in_place.error;
  }
  return out_of_place;
}

}  // namespace topocoll::sched
