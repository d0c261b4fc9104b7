// Schedule IR: for every rank, a list of steps. One representation is consumed by the
// symbolic verifier, the contention analysis, the cost model and both execution backends.
//
// Semantics of one step of one rank:
//   1. every Send and Recv of the step is posted at once (sends read their ranges as they
//      were before the step; a step's receives must not overlap its sends' ranges);
//   2. when all of them have completed, the step's local ops (Reduce, Copy, Finalize) run
//      in order.
// All programs of a schedule have the same number of steps (idle ranks have empty steps), so
// "step k" is a global notion the contention analysis and cost model can use.
//
// Buffers are in elements of the collective's datatype:
//   Input   the user's send buffer, never written by a schedule;
//   Output  the user's receive buffer;
//   Scratch per-rank temporary storage of RankProgram::scratch_elems elements.
// In-place calls alias Input and Output the NCCL way (allreduce: same pointer;
// reduce-scatter: Output = Input + rank*count; allgather: Input = Output + rank*count);
// every generator must be correct in both modes and the verifier checks both.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace topocoll::sched {

enum class Collective : uint8_t { AllReduce, ReduceScatter, AllGather, AllToAll };
inline constexpr std::array<Collective, 4> kCollectives = {Collective::AllReduce, Collective::ReduceScatter,
                                                           Collective::AllGather, Collective::AllToAll};
enum class Buf : uint8_t { Input, Output, Scratch };
enum class OpKind : uint8_t { Send, Recv, Reduce, Copy, Finalize };

std::string_view to_string(Collective);
// "AR", "RS", "AG", "A2A": the short names of help texts and docs/plan-format.md's table.
std::string_view abbreviation(Collective);
std::string_view to_string(Buf);
std::string_view to_string(OpKind);

// Packed into 8 bytes: a 65,536-rank plan holds millions of ops, each with up to nine refs.
struct BufRef {
  Buf buf : 8 = Buf::Output;
  int64_t offset : 56 = 0;  // elements
  friend bool operator==(const BufRef& a, const BufRef& b) {
    return a.buf == b.buf && a.offset == b.offset;
  }
};
static_assert(sizeof(BufRef) == 8);

inline constexpr int kMaxReduceInputs = 8;

// One operation. Which fields matter depends on kind:
//   Send      peer, src, count          (the bytes leave from src)
//   Recv      peer, dst, count          (the bytes land in dst)
//   Reduce    dst = srcs[0] op srcs[1] op ... op srcs[nsrc-1], left to right, count elements;
//             dst may equal any one source exactly (in place: each element is read before
//             it is written). 2 <= nsrc <= kMaxReduceInputs.
//   Copy      dst = srcs[0], count elements
//   Finalize  dst[0..count) gets the op's final step (avg: divide by nranks; others: none).
//             Done exactly once on the value every rank will end up with, so all ranks
//             receive identical bits.
struct Op {
  OpKind kind = OpKind::Send;
  uint8_t nsrc = 0;
  int32_t peer = -1;  // rank, for Send/Recv
  int64_t count = 0;
  BufRef dst;                                   // Recv, Reduce, Copy, Finalize
  std::array<BufRef, kMaxReduceInputs> srcs{};  // Send uses srcs[0]
  BufRef src() const { return srcs[0]; }
};

struct RankProgram {
  std::vector<Op> ops;                 // all steps' ops, step by step
  std::vector<uint32_t> step_begin;    // ops of step s: [step_begin[s], step_begin[s+1])
  int64_t scratch_elems = 0;

  int num_steps() const { return step_begin.empty() ? 0 : int(step_begin.size()) - 1; }
  std::span<const Op> step(int s) const {
    return {ops.data() + step_begin[s], ops.data() + step_begin[s + 1]};
  }
};

struct Schedule {
  Collective collective = Collective::AllReduce;
  std::string algo;   // the algorithm registry's name ("ring", "hd", ...; sched/algorithm_registry.h)
  int nranks = 0;
  // NCCL's count argument: allreduce count, reduce-scatter recvcount, allgather sendcount,
  // all-to-all count per peer.
  int64_t count = 0;
  int64_t input_count = 0;   // elements of Input per rank
  int64_t output_count = 0;  // elements of Output per rank
  // The generator states every rank's final values are reduced in the same order.
  bool claims_bitwise_identical = true;
  std::vector<RankProgram> programs;  // indexed by communicator rank

  int num_steps() const { return programs.empty() ? 0 : programs[0].num_steps(); }
};

}  // namespace topocoll::sched
