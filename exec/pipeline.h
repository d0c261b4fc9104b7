// Pipelining of large steps: a step whose messages are large is cut into rounds, and the
// local ops of round j (the reduce of what it received) run while round j+1's pieces move
// (EFLOPS-style HD steps reduce half the buffer after every exchange; without this the
// wire idles during every reduce and the reducer during every transfer).
//
//   pieces     every Send/Recv of b bytes is posted as shape.pieces(b) pieces
//              (sched/pipelining.h); both sides cut alike, so pieces match in order.
//   rounds     piece j of every message is posted in round j; each round is one transfer
//              batch. A local op is cut into as many pieces as the step's longest message,
//              and each local piece runs after the earliest round after which nothing it
//              touches is still in flight: the latest round whose transfer pieces overlap
//              its bytes (a read of a received range, or a write to a range still being
//              sent), and no earlier than a local piece before it that it depends on. The
//              step's semantics (all transfers, then the local ops in order) are kept by
//              construction, so results stay bitwise those of the uncut step.
//   overlap    a backend that can run local ops behind later transfers
//              (Backend::overlaps_local_ops: the host backend's worker thread, the NCCL
//              backend's second stream) gets the rounds; any other one posts every piece
//              in one batch and runs the local ops whole, as an uncut step.
//
// The analysis is per rank and per step, done once when an Execution is built (a plan
// cache or a benchmark reuses it); a step too large to analyse cheaply, or one where no
// local piece could start before the last round, is not cut into rounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/env.h"
#include "sched/pipelining.h"
#include "sched/schedule.h"

namespace topocoll::exec {

// TOPOCOLL_PIPELINE_CHUNK_BYTES (0 = off, else 64 KiB .. 1 GiB) and
// TOPOCOLL_PIPELINE_MAX_CHUNKS (2..64; default 8). Must be the same on every rank.
// Unset, the chunk is 4 MiB on the NCCL backend, where the reduce kernels and the transfers
// use different engines (the model, sched/cost_model.h, gains R (C-1)/C of a step's reduce
// time R and pays (C-1) alphas for C rounds: with kernels at ~1500 GB/s the reduce is
// small beside the wire, so rounds stay few), and 0 on the host backend: on a host the reduce and the socket
// copies compete for the same cores, and with no core to spare the rounds only add their
// per-round costs (8 ranks on 2 cores: ring and hd 6-30 % slower at 16-64 MiB,
// perf/results/host-vs-openmpi.md); set it where a host has cores to spare.
struct PipelineOptions {
  static constexpr std::size_t kDefaultChunkBytes = std::size_t(4) << 20;
  static constexpr int kDefaultMaxChunks = 8;
  sched::PipelineShape shape{kDefaultChunkBytes, kDefaultMaxChunks};

  // TOPOCOLL_PIPELINE_* of `env` (config/env.h validated them); the chunk, when unset,
  // `default_chunk_bytes`.
  static PipelineOptions from_env(const config::Env& env, std::size_t default_chunk_bytes = kDefaultChunkBytes);
  // From the process's Env (config::env(): read and warned about once): for the NCCL
  // backend (unset: 4 MiB) and for the host backend (unset: off).
  static PipelineOptions process_default();
  static PipelineOptions host_default();
  static PipelineOptions off() { return PipelineOptions{sched::PipelineShape{0, 1}}; }
};

// A sub-range [begin, end) of one op of a step (an index into the step's ops).
struct OpPiece {
  uint32_t op = 0;
  int64_t begin = 0, end = 0;
};

// One rank's step, cut. pieces_cut == false: every message is one piece (run it whole).
struct StepCut {
  bool pieces_cut = false;
  // Each message's piece count, per op of the step (1 for local ops).
  std::vector<uint16_t> pieces;
  // transfers[j]: the pieces of round j, in op order. Uncut steps have none. A step run
  // without overlap posts every round in one batch, in this same order, so both sides of
  // a pair post their pieces alike whichever way each runs the step.
  std::vector<std::vector<OpPiece>> transfers;
  // Rounds of local pieces (empty: not overlapped, run the local ops whole after every
  // transfer): local_ops[j] runs after round j's transfers completed, in this order.
  std::vector<std::vector<OpPiece>> local_ops;
  bool overlapped() const { return !local_ops.empty(); }
};

// Byte address of an op's range (what the analysis compares; Input may alias Output).
struct ResolvedRange {
  uintptr_t begin = 0;  // byte address of element 0 of the op's range
  bool writes = false;
};

// Cuts step `step` of `program`. `resolve(ref)` gives the byte address of a BufRef;
// elem_bytes the element size.
template <typename Resolve>
StepCut cut_step(const sched::RankProgram& program, int step, std::size_t elem_bytes,
                 const sched::PipelineShape& shape, Resolve&& resolve);

namespace detail {
// The op's ranges as (address of element 0, writes?), at most kMaxReduceInputs + 1.
struct OpRanges {
  ResolvedRange r[sched::kMaxReduceInputs + 1];
  int n = 0;
};
StepCut cut_step_resolved(const sched::RankProgram& program, int step, std::size_t elem_bytes,
                          const sched::PipelineShape& shape, const std::vector<OpRanges>& ranges);
}  // namespace detail

template <typename Resolve>
StepCut cut_step(const sched::RankProgram& program, int step, std::size_t elem_bytes,
                 const sched::PipelineShape& shape, Resolve&& resolve) {
  std::vector<detail::OpRanges> ranges;
  for (const sched::Op& o : program.step(step)) {
    detail::OpRanges& r = ranges.emplace_back();
    auto add = [&](const sched::BufRef& ref, bool writes) {
      r.r[r.n++] = ResolvedRange{resolve(ref), writes};
    };
    switch (o.kind) {
      case sched::OpKind::Send: add(o.src(), false); break;
      case sched::OpKind::Recv: add(o.dst, true); break;
      case sched::OpKind::Reduce:
        add(o.dst, true);
        for (int k = 0; k < o.nsrc; ++k) add(o.srcs[k], false);
        break;
      case sched::OpKind::Copy:
        add(o.dst, true);
        add(o.src(), false);
        break;
      case sched::OpKind::Finalize: add(o.dst, true); break;
    }
  }
  return detail::cut_step_resolved(program, step, elem_bytes, shape, ranges);
}

}  // namespace topocoll::exec
