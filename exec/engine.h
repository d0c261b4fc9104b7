// Engine: walks one rank's program of a schedule (sched/schedule.h) step by step with a
// Backend (exec/backend.h). Per step: post every Send/Recv as one batch, wait for the batch,
// then run the step's Reduce/Copy/Finalize ops in order. Nothing here knows whether the
// memory is host or device or how bytes move; nothing is allocated per step.
//
// Several collectives (one Execution each, e.g. those queued inside a user's
// ncclGroupStart/End) advance together with run_interleaved(): step k of every unfinished
// execution is posted in one nested transfer batch, then all their local ops run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exec/backend.h"
#include "exec/pipeline.h"
#include "kernels/datatype.h"
#include "sched/schedule.h"

namespace topocoll::exec {

// The memory one rank's execution works on. Input may alias Output the NCCL way
// (sched/schedule.h). Scratch must hold scratch_bytes(program, dtype) bytes; it is
// reserved once per plan by the caller, never per step.
struct Buffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
};

std::size_t scratch_bytes(const sched::RankProgram& program, kernels::DataType dtype);
// Scratch for one rank's execution with this op: the program's, plus room for the
// pre-multiplied input of a floating Avg where the input cannot be staged in the output
// (its input is larger than its output: reduce-scatter). Execution takes it after the
// program's scratch_elems.
std::size_t scratch_bytes(const sched::Schedule& schedule, int rank, kernels::DataType dtype,
                          kernels::ReduceOp op);
// The most scratch_bytes(schedule, r, dtype, op) of any rank r: the same on every rank.
std::size_t max_scratch_bytes(const sched::Schedule& schedule, kernels::DataType dtype,
                              kernels::ReduceOp op);
// The extra bytes of the overload above over the program's own scratch.
std::size_t avg_staging_bytes(const sched::Schedule& schedule, kernels::DataType dtype,
                              kernels::ReduceOp op);

// One rank's run of one collective. Holds references to the schedule and the backend:
// both must outlive it.
class Execution {
 public:
  // Checks once that every range of the rank's program lies inside its buffer (sizes from
  // the schedule), that peers are valid, and that the type/op are valid; throws
  // std::invalid_argument naming the rank, step and op otherwise. Null buffers are allowed
  // only where the program never touches them (e.g. count 0).
  // Large steps are cut into pieces by `pipeline` (exec/pipeline.h), which must be the same
  // on every rank; their rounds overlap local ops with transfers where the backend can.
  Execution(const sched::Schedule& schedule, int rank, kernels::DataType dtype,
            kernels::ReduceOp op, const Buffers& buffers, Backend& backend,
            const PipelineOptions& pipeline = PipelineOptions::process_default());

  int rank() const { return binding_.rank; }
  int num_steps() const { return program_->num_steps(); }
  int next_step() const { return step_; }
  bool done() const { return step_ >= num_steps(); }
  const CollectiveBinding& binding() const { return binding_; }
  Backend& backend() const { return *backend_; }

  // The three phases of the next step; call them in this order (run_interleaved does).
  // Phases never overlap: a cut step posts all its pieces in one batch, then runs its
  // local ops whole. With nested batches the transfers are complete only once the outermost batch has
  // closed, so run local ops after every execution's complete_transfers().
  void post_transfers();      // backend.begin_transfers() + the step's sends and receives
  void complete_transfers();  // backend.end_transfers()
  void run_local_ops();       // the step's Reduce/Copy/Finalize, then on to the next step
  // Avg on floating types is NCCL's PreMulSum: before step 0 posts anything, the input is
  // multiplied by 1/nranks into a staging area (the output when it is as large as the
  // input, then read in place; else scratch past the program's) and the program reads that
  // as its input. Done by post_transfers of step 0.
  bool stages_input() const { return staged_input_ != nullptr; }

  // Back to step 0 to run the same collective again on the same buffers (a plan cache or
  // a benchmark reuses one checked Execution). Only between steps.
  void restart();

  // One whole step, in overlapped rounds where it was cut so and the backend overlaps;
  // returns true while steps remain.
  bool advance_one_step();
  // Whether the next step runs in overlapped rounds (tests and logs).
  bool next_step_overlaps() const;
  // Steps that run in overlapped rounds (of num_steps()).
  int overlapped_steps() const;
  // Every remaining step.
  void run();

 private:
  void* resolve(const sched::BufRef& ref) const;
  // Throws std::invalid_argument when a receive of step s overlaps another transfer of it, or
  // a local op's source overlaps its destination without being it.
  void check_step_aliasing(int rank, int s) const;
  void stage_input_before_step0();
  void post_piece(const sched::Op& o, const OpPiece& piece);
  void run_local_op(const sched::Op& o, int64_t begin, int64_t end);
  void run_overlapped_step();
  void finish_step();  // on to the next step; the last boundary after the last step

  const sched::Schedule* schedule_;
  const sched::RankProgram* program_;
  CollectiveBinding binding_;
  Buffers buffers_;
  const void* user_input_ = nullptr;  // the caller's input when staged_input_ replaces it
  void* staged_input_ = nullptr;
  Backend* backend_;
  std::vector<StepCut> cuts_;  // per step; empty when the pipeline is off
  int step_ = 0;
  bool posted_ = false;
  bool transferred_ = false;
};

// Runs all executions to completion, step by step across them: per round, every unfinished
// execution posts its next step's transfers (nested batches), then every batch completes,
// then every execution runs its local ops. Executions may have different step counts and
// backends. A single execution runs alone (Execution::run), so its steps may overlap.
void run_interleaved(std::span<Execution* const> executions);

}  // namespace topocoll::exec
