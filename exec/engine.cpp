#include "exec/engine.h"

#include "kernels/avg_scalar.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace topocoll::exec {

using sched::Buf;
using sched::BufRef;
using sched::Op;
using sched::OpKind;

std::size_t scratch_bytes(const sched::RankProgram& program, kernels::DataType dtype) {
  return std::size_t(program.scratch_elems) * kernels::datatype_size(dtype);
}

namespace {

// Avg that pre-multiplies: a floating type in a collective that reduces (allgather and
// all-to-all only move data, whatever op they were given).
bool premultiplies(const sched::Schedule& schedule, kernels::DataType dtype, kernels::ReduceOp op) {
  const bool reduces = schedule.collective == sched::Collective::AllReduce ||
                       schedule.collective == sched::Collective::ReduceScatter;
  return reduces && op == kernels::ReduceOp::Avg && kernels::avg_premultiplies(dtype);
}

}  // namespace

std::size_t avg_staging_bytes(const sched::Schedule& schedule, kernels::DataType dtype,
                              kernels::ReduceOp op) {
  if (!premultiplies(schedule, dtype, op)) return 0;
  if (schedule.input_count <= schedule.output_count) return 0;  // staged in the output
  return std::size_t(schedule.input_count) * kernels::datatype_size(dtype);
}

std::size_t scratch_bytes(const sched::Schedule& schedule, int rank, kernels::DataType dtype,
                          kernels::ReduceOp op) {
  // The staging area starts at a 16-byte boundary so the kernels stay vectorised.
  const std::size_t own = scratch_bytes(schedule.programs[std::size_t(rank)], dtype);
  const std::size_t staging = avg_staging_bytes(schedule, dtype, op);
  return staging ? (own + 15) / 16 * 16 + staging : own;
}

std::size_t max_scratch_bytes(const sched::Schedule& schedule, kernels::DataType dtype,
                              kernels::ReduceOp op) {
  std::size_t most = 0;
  for (int r = 0; r < int(schedule.programs.size()); ++r)
    most = std::max(most, scratch_bytes(schedule, r, dtype, op));
  return most;
}

namespace {

[[noreturn]] void bad_program(int rank, int step, std::size_t op_index, const Op& op,
                              const std::string& why) {
  throw std::invalid_argument("schedule rank " + std::to_string(rank) + " step " +
                              std::to_string(step) + " op " + std::to_string(op_index) + " (" +
                              std::string(sched::to_string(op.kind)) + "): " + why);
}

int64_t buffer_elems(const sched::Schedule& s, const sched::RankProgram& p, Buf b) {
  switch (b) {
    case Buf::Input: return s.input_count;
    case Buf::Output: return s.output_count;
    case Buf::Scratch: return p.scratch_elems;
  }
  return -1;
}

const void* buffer_base(const Buffers& b, Buf which) {
  switch (which) {
    case Buf::Input: return b.input;
    case Buf::Output: return b.output;
    case Buf::Scratch: return b.scratch;
  }
  return nullptr;
}

}  // namespace

Execution::Execution(const sched::Schedule& schedule, int rank, kernels::DataType dtype,
                     kernels::ReduceOp op, const Buffers& buffers, Backend& backend,
                     const PipelineOptions& pipeline)
    : schedule_(&schedule), buffers_(buffers), backend_(&backend) {
  if (!kernels::is_valid(dtype))
    throw std::invalid_argument("invalid datatype " + std::to_string(int(dtype)));
  if (!kernels::is_valid(op))
    throw std::invalid_argument("invalid reduction op " + std::to_string(int(op)));
  if (rank < 0 || rank >= schedule.nranks || rank >= int(schedule.programs.size()))
    throw std::invalid_argument("rank " + std::to_string(rank) + " outside the schedule's " +
                                std::to_string(schedule.nranks) + " ranks");
  program_ = &schedule.programs[rank];
  binding_ = {dtype, op, rank, schedule.nranks};
  if (premultiplies(schedule, dtype, op) && schedule.input_count > 0) {
    user_input_ = buffers_.input;
    if (avg_staging_bytes(schedule, dtype, op) == 0) {
      staged_input_ = buffers_.output;  // the schedule is correct in place (sched/schedule.h)
    } else {
      const std::size_t own = scratch_bytes(*program_, dtype);
      staged_input_ = buffers_.scratch ? static_cast<char*>(buffers_.scratch) + (own + 15) / 16 * 16
                                       : nullptr;
    }
    if (!user_input_ || !staged_input_)
      throw std::invalid_argument("schedule rank " + std::to_string(rank) +
                                  ": avg needs its input and a staging buffer");
    buffers_.input = staged_input_;
  }

  const auto& prog = *program_;
  if (!prog.step_begin.empty() && prog.step_begin.back() != prog.ops.size())
    throw std::invalid_argument("schedule rank " + std::to_string(rank) +
                                ": step table does not cover its ops");
  auto check_range = [&](int s, std::size_t i, const Op& o, const BufRef& r, bool written) {
    const int64_t size = buffer_elems(schedule, prog, r.buf);
    if (o.count < 0 || r.offset < 0 || r.offset + o.count > size)
      bad_program(rank, s, i, o,
                  std::string(sched::to_string(r.buf)) + " range [" + std::to_string(r.offset) +
                      ", " + std::to_string(r.offset + o.count) + ") outside its " +
                      std::to_string(size) + " elements");
    if (written && r.buf == Buf::Input) bad_program(rank, s, i, o, "writes the input buffer");
    if (o.count > 0 && buffer_base(buffers_, r.buf) == nullptr)
      bad_program(rank, s, i, o, std::string(sched::to_string(r.buf)) + " buffer is null");
  };
  for (int s = 0; s < prog.num_steps(); ++s) {
    if (prog.step_begin[s] > prog.step_begin[s + 1])
      throw std::invalid_argument("schedule rank " + std::to_string(rank) + ": step " +
                                  std::to_string(s) + " ends before it begins");
    for (std::size_t i = prog.step_begin[s]; i < prog.step_begin[s + 1]; ++i) {
      const Op& o = prog.ops[i];
      switch (o.kind) {
        case OpKind::Send:
        case OpKind::Recv:
          if (o.peer < 0 || o.peer >= schedule.nranks || o.peer == rank)
            bad_program(rank, s, i, o, "peer " + std::to_string(o.peer) + " is not another rank");
          if (o.kind == OpKind::Send) check_range(s, i, o, o.src(), false);
          else check_range(s, i, o, o.dst, true);
          break;
        case OpKind::Reduce:
          if (o.nsrc < 2 || o.nsrc > sched::kMaxReduceInputs)
            bad_program(rank, s, i, o, "reduce of " + std::to_string(o.nsrc) + " inputs");
          check_range(s, i, o, o.dst, true);
          for (int k = 0; k < o.nsrc; ++k) check_range(s, i, o, o.srcs[k], false);
          break;
        case OpKind::Copy:
          check_range(s, i, o, o.dst, true);
          check_range(s, i, o, o.src(), false);
          break;
        case OpKind::Finalize:
          check_range(s, i, o, o.dst, true);
          break;
        default:
          bad_program(rank, s, i, o, "unknown op kind");
      }
    }
    check_step_aliasing(rank, s);
  }
  if (pipeline.shape.enabled()) {
    cuts_.reserve(std::size_t(prog.num_steps()));
    const auto address = [this](const BufRef& ref) { return reinterpret_cast<uintptr_t>(resolve(ref)); };
    for (int s = 0; s < prog.num_steps(); ++s)
      cuts_.push_back(cut_step(prog, s, binding_.elem_bytes(), pipeline.shape, address));
  }
}

// What the engine relies on and the verifier checks (sched/verifier.h), checked again here,
// as a plan may run unverified (a build without the verifier, the acceptance run): a step's
// transfers run concurrently (an NCCL group, the transport's threads) and its pipelined
// pieces in any order, so a receive may not overlap another transfer of its step in the same
// buffer, and a local op's source may not overlap its destination unless it is the
// destination (in place, element by element). Within each buffer of the program only: where
// the caller's buffers alias each other, the in-place layouts are the verifier's to check
// (verify_as_served), and a layout NCCL leaves undefined still runs (its data undefined, as
// under NCCL: a rank refusing it alone would leave its peers waiting).
void Execution::check_step_aliasing(int rank, int s) const {
  const auto& prog = *program_;
  struct Range {
    int buf;
    int64_t begin, end;
    bool written;
    std::size_t op;
  };
  std::vector<Range> transfers;
  for (std::size_t i = prog.step_begin[s]; i < prog.step_begin[s + 1]; ++i) {
    const Op& o = prog.ops[i];
    if (o.count == 0) continue;
    switch (o.kind) {
      case OpKind::Send:
      case OpKind::Recv: {
        const BufRef& r = o.kind == OpKind::Send ? o.src() : o.dst;
        transfers.push_back({int(r.buf), r.offset, r.offset + o.count, o.kind == OpKind::Recv, i});
        break;
      }
      case OpKind::Reduce:
      case OpKind::Copy:
        for (int k = 0; k < (o.kind == OpKind::Reduce ? o.nsrc : 1); ++k) {
          const BufRef& src = o.kind == OpKind::Reduce ? o.srcs[k] : o.src();
          if (src.buf == o.dst.buf && src.offset != o.dst.offset && src.offset < o.dst.offset + o.count &&
              o.dst.offset < src.offset + o.count)
            bad_program(rank, s, i, o, "a source overlaps its destination without being it");
        }
        break;
      default:
        break;
    }
  }
  std::sort(transfers.begin(), transfers.end(),
            [](const Range& a, const Range& b) { return a.buf != b.buf ? a.buf < b.buf : a.begin < b.begin; });
  int buf = -1;
  int64_t any_end = 0, written_end = 0;  // the farthest end of the ranges before, of all and of receives
  for (const Range& r : transfers) {
    if (r.buf != buf) buf = r.buf, any_end = written_end = INT64_MIN;
    if (r.begin < (r.written ? any_end : written_end))
      bad_program(rank, s, r.op, prog.ops[r.op], "overlaps a receive of the same step (or, a receive, another transfer)");
    any_end = std::max(any_end, r.end);
    if (r.written) written_end = std::max(written_end, r.end);
  }
}

void* Execution::resolve(const BufRef& ref) const {
  // Pointer arithmetic only: the memory may live on a device.
  auto* base = static_cast<char*>(const_cast<void*>(buffer_base(buffers_, ref.buf)));
  return base + ref.offset * int64_t(binding_.elem_bytes());
}

void Execution::stage_input_before_step0() {
  if (step_ == 0 && staged_input_)
    backend_->avg_premul(binding_, staged_input_, user_input_, schedule_->input_count);
}

void Execution::post_piece(const Op& o, const OpPiece& piece) {
  const std::size_t elem = binding_.elem_bytes();
  const std::size_t bytes = std::size_t(piece.end - piece.begin) * elem;
  if (o.kind == OpKind::Send) {
    BufRef at = o.src();
    at.offset += piece.begin;
    backend_->post_send(o.peer, resolve(at), bytes);
  } else {
    BufRef at = o.dst;
    at.offset += piece.begin;
    backend_->post_recv(o.peer, resolve(at), bytes);
  }
}

void Execution::post_transfers() {
  if (done()) throw std::logic_error("post_transfers after the last step");
  if (posted_) throw std::logic_error("post_transfers twice for one step");
  backend_->step_boundary(step_);
  stage_input_before_step0();
  backend_->begin_transfers();
  posted_ = true;
  const auto ops = program_->step(step_);
  if (!cuts_.empty() && cuts_[std::size_t(step_)].pieces_cut) {
    // Every round's pieces in one batch, in the order the overlapped path posts them.
    for (const auto& round : cuts_[std::size_t(step_)].transfers)
      for (const OpPiece& p : round) post_piece(ops[p.op], p);
    return;
  }
  for (const Op& o : ops) {
    if (o.count == 0) continue;  // both sides skip: matching ops have equal counts
    if (o.kind == OpKind::Send || o.kind == OpKind::Recv) post_piece(o, OpPiece{0, 0, o.count});
  }
}

void Execution::complete_transfers() {
  if (!posted_ || transferred_) throw std::logic_error("complete_transfers out of order");
  transferred_ = true;
  backend_->end_transfers();
}

// Elements [begin, end) of a local op.
void Execution::run_local_op(const Op& o, int64_t begin, int64_t end) {
  const auto at = [&](BufRef ref) {
    ref.offset += begin;
    return resolve(ref);
  };
  const int64_t count = end - begin;
  switch (o.kind) {
    case OpKind::Reduce: {
      const void* srcs[sched::kMaxReduceInputs];
      for (int k = 0; k < o.nsrc; ++k) srcs[k] = at(o.srcs[k]);
      backend_->reduce(binding_, at(o.dst), srcs, o.nsrc, count);
      break;
    }
    case OpKind::Copy:
      backend_->copy(at(o.dst), at(o.src()), std::size_t(count) * binding_.elem_bytes());
      break;
    case OpKind::Finalize:
      backend_->finalize(binding_, at(o.dst), count);
      break;
    default:
      break;
  }
}

void Execution::run_local_ops() {
  if (!transferred_) throw std::logic_error("run_local_ops before the step's transfers");
  for (const Op& o : program_->step(step_))
    if (o.count > 0) run_local_op(o, 0, o.count);
  finish_step();
}

void Execution::finish_step() {
  posted_ = transferred_ = false;
  ++step_;
  if (done()) backend_->step_boundary(step_);
}

// Round j: one transfer batch of every message's piece j; then the local pieces it made
// ready, overlapped, so they run while round j + 1 moves (exec/pipeline.h).
void Execution::run_overlapped_step() {
  const StepCut& cut = cuts_[std::size_t(step_)];
  const auto ops = program_->step(step_);
  backend_->step_boundary(step_);
  stage_input_before_step0();
  posted_ = true;
  try {
    for (std::size_t j = 0; j < cut.transfers.size(); ++j) {
      backend_->begin_transfers();
      for (const OpPiece& p : cut.transfers[j]) post_piece(ops[p.op], p);
      backend_->end_transfers();
      if (cut.local_ops[j].empty()) continue;
      backend_->begin_overlapped_local_ops();
      for (const OpPiece& p : cut.local_ops[j]) run_local_op(ops[p.op], p.begin, p.end);
      backend_->end_overlapped_local_ops();
    }
  } catch (...) {
    try {
      backend_->join_local_ops();  // nothing of this step may still run on the buffers
    } catch (...) {
    }
    throw;
  }
  backend_->join_local_ops();
  finish_step();
}

bool Execution::next_step_overlaps() const {
  return !done() && !cuts_.empty() && cuts_[std::size_t(step_)].overlapped() &&
         backend_->overlaps_local_ops();
}

int Execution::overlapped_steps() const {
  if (!backend_->overlaps_local_ops()) return 0;
  return int(std::count_if(cuts_.begin(), cuts_.end(), [](const StepCut& c) { return c.overlapped(); }));
}

void Execution::restart() {
  if (posted_) throw std::logic_error("restart in the middle of a step");
  step_ = 0;
}

bool Execution::advance_one_step() {
  if (done()) return false;
  if (next_step_overlaps()) {
    run_overlapped_step();
    return !done();
  }
  post_transfers();
  complete_transfers();
  run_local_ops();
  return !done();
}

void Execution::run() {
  while (advance_one_step()) {
  }
}

void run_interleaved(std::span<Execution* const> executions) {
  if (executions.size() == 1) return executions[0]->run();
  for (;;) {
    bool any = false;
    for (Execution* e : executions)
      if (!e->done()) {
        e->post_transfers();
        any = true;
      }
    if (!any) return;
    // Close the nested batches innermost first, as NCCL groups close.
    for (auto it = executions.rbegin(); it != executions.rend(); ++it)
      if (!(*it)->done()) (*it)->complete_transfers();
    for (Execution* e : executions)
      if (!e->done()) e->run_local_ops();
  }
}

}  // namespace topocoll::exec
