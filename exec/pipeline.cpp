#include "exec/pipeline.h"

#include <algorithm>

namespace topocoll::exec {

PipelineOptions PipelineOptions::from_env(const config::Env& env, std::size_t default_chunk_bytes) {
  PipelineOptions o;
  o.shape.chunk_bytes = env.pipeline_chunk_bytes ? std::size_t(*env.pipeline_chunk_bytes) : default_chunk_bytes;
  o.shape.max_chunks = env.pipeline_max_chunks;
  return o;
}

PipelineOptions PipelineOptions::process_default() { return from_env(config::env(), kDefaultChunkBytes); }

PipelineOptions PipelineOptions::host_default() { return from_env(config::env(), 0); }

namespace detail {
namespace {

using sched::Op;
using sched::OpKind;

// One piece of one op, with the byte spans it reads and writes.
struct Piece {
  uint32_t op;
  int64_t begin, end;  // elements of the op's range
  int round;           // transfers: the round it moves in; local ops: the round it runs after
};

bool is_transfer(const Op& o) { return o.kind == OpKind::Send || o.kind == OpKind::Recv; }

// Whether two pieces touch a common byte, at least one of them writing it.
bool conflict(const OpRanges& a, const Piece& pa, const OpRanges& b, const Piece& pb,
              std::size_t elem) {
  for (int i = 0; i < a.n; ++i)
    for (int k = 0; k < b.n; ++k) {
      if (!a.r[i].writes && !b.r[k].writes) continue;
      const uintptr_t a0 = a.r[i].begin + uintptr_t(pa.begin) * elem;
      const uintptr_t a1 = a.r[i].begin + uintptr_t(pa.end) * elem;
      const uintptr_t b0 = b.r[k].begin + uintptr_t(pb.begin) * elem;
      const uintptr_t b1 = b.r[k].begin + uintptr_t(pb.end) * elem;
      if (a0 < b1 && b0 < a1) return true;
    }
  return false;
}

// Beyond this many piece pairs a step is run uncut (its analysis would cost more than a
// plan is worth; the fully connected schedules of thousands of ranks get there).
constexpr std::size_t kMaxPairs = std::size_t(1) << 18;

}  // namespace

StepCut cut_step_resolved(const sched::RankProgram& program, int step, std::size_t elem_bytes,
                          const sched::PipelineShape& shape, const std::vector<OpRanges>& ranges) {
  const auto ops = program.step(step);
  StepCut cut;
  cut.pieces.assign(ops.size(), 1);
  int rounds = 1;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (is_transfer(ops[i]) && ops[i].count > 0) {
      cut.pieces[i] = uint16_t(shape.pieces(std::size_t(ops[i].count) * elem_bytes));
      rounds = std::max<int>(rounds, cut.pieces[i]);
    }
  if (rounds == 1) return cut;
  cut.pieces_cut = true;

  const int64_t align = std::max<int64_t>(1, int64_t(16 / std::max<std::size_t>(1, elem_bytes)));
  std::vector<Piece> transfers, locals;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (o.count == 0) continue;
    const int n = is_transfer(o) ? cut.pieces[i] : rounds;
    for (int j = 0; j < n; ++j) {
      const Piece p{uint32_t(i), sched::piece_begin(o.count, n, j, align),
                    sched::piece_begin(o.count, n, j + 1, align), is_transfer(o) ? j : 0};
      if (p.end > p.begin) (is_transfer(o) ? transfers : locals).push_back(p);
    }
  }
  // Round-major: piece j of every message, in op order, then piece j + 1. Both paths post
  // in this order, so two messages to one peer match piece for piece whichever path the
  // peer takes.
  cut.transfers.resize(rounds);
  for (const Piece& t : transfers) cut.transfers[t.round].push_back({t.op, t.begin, t.end});
  if (locals.empty() || locals.size() * (transfers.size() + locals.size()) > kMaxPairs) return cut;

  // Each local piece runs after the last round that moves a byte it touches, and not before
  // a piece of an earlier local op it depends on (ops of a step run in order).
  int earliest = rounds;
  for (std::size_t x = 0; x < locals.size(); ++x) {
    Piece& l = locals[x];
    for (const Piece& t : transfers)
      if (t.round > l.round && conflict(ranges[l.op], l, ranges[t.op], t, elem_bytes))
        l.round = t.round;
    for (std::size_t y = 0; y < x; ++y)
      if (locals[y].op != l.op && locals[y].round > l.round &&
          conflict(ranges[l.op], l, ranges[locals[y].op], locals[y], elem_bytes))
        l.round = locals[y].round;
    earliest = std::min(earliest, l.round);
  }
  if (earliest >= rounds - 1) return cut;  // nothing could overlap a transfer

  cut.local_ops.resize(rounds);
  // Bucketed in op order: within a round, an earlier op's pieces still run first.
  for (const Piece& l : locals) cut.local_ops[l.round].push_back({l.op, l.begin, l.end});
  return cut;
}

}  // namespace detail
}  // namespace topocoll::exec
