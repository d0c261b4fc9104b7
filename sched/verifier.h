// Symbolic verifier: executes a Schedule on symbols instead of numbers and proves what it
// computes.
//
// Every element of every rank's buffers holds either nothing (uninitialised) or a value:
// a reduction expression over the ranks' contributions to one element. Expressions are
// interned trees whose binary nodes keep their operands' order (a+b and b+a are the same
// value but not the same bits when both are NaN) and are not associative ((a+b)+c and
// a+(b+c) differ), with a Finalize node on top. Runs of consecutive elements sharing an
// expression are stored as one piece, so state stays linear in ranks x steps (the pairwise
// generators reduce lower rank's operand first on both ranks, so their trees are shared):
// once a value is finalized (all contributions, exactly once), its piece only remembers
// "the final value of element e" and its tree goes to one global per-element table, so the
// finished ranges a rank collects merge.
//
// Checked: matching of every send of step s from a to b with a recv of step s at b from
// a (same count, in posting order per pair); reads of uninitialised memory; ranges out of
// bounds; a step's receives overlapping its sends or each other; writes to Input; Reduce
// sources that are misaligned, already finalized, or partly overlap the destination (a
// source may be the destination exactly); Finalize of an incomplete or already final value; and at the end the
// collective's semantics on every rank's Output (allreduce / reduce-scatter: every
// element holds all P contributions exactly once, finalized exactly once; allgather /
// all-to-all: the right rank's element in the right place). Bitwise identity: every
// finalization of one element must use the same tree on every rank; a schedule that does
// not claim it (Schedule::claims_bitwise_identical) passes with a note instead.
//
// In-place mode aliases Input and Output the NCCL way (see sched/schedule.h); NCCL has no
// in-place all-to-all, so that combination is reported as an error.
#pragma once

#include <cstdint>
#include <string>

#include "sched/schedule.h"

namespace topocoll::sched {

enum class Aliasing : uint8_t { OutOfPlace, InPlace };

struct VerifyOptions {
  Aliasing aliasing = Aliasing::OutOfPlace;
  int element_bytes = 4;  // for the byte statistics only
  // Expression nodes one may visit to prove contribution sets exactly; beyond it, sets are
  // checked by count and a 128-bit multiset hash (VerifyStats::exact_contributions false).
  int64_t exact_check_budget = int64_t(1) << 26;
  // Re-checks the verifier's own state after every write (tests).
  bool self_check = false;
};

struct VerifyStats {
  int steps = 0;
  int64_t ops = 0;
  int64_t max_send_elems_per_rank = 0;  // over the whole schedule
  int64_t max_recv_elems_per_rank = 0;
  int64_t max_send_bytes_per_rank = 0;
  int64_t total_send_elems = 0;
  int64_t max_transfers_per_rank_step = 0;
  int64_t expressions = 0;  // distinct reduction trees interned
  int64_t max_pieces = 0;   // most pieces one rank buffer held (the verifier's memory)
  bool exact_contributions = true;
};

struct VerifyResult {
  bool ok = false;
  std::string error;               // the first problem, naming rank, step, op and range
  bool bitwise_identical = false;  // every final element reduced in one order everywhere
  std::string identity_note;       // where not: the element range and the two ranks
  VerifyStats stats;
};

VerifyResult verify(const Schedule& schedule, const VerifyOptions& options = {});

// The checks a plan passes before it is served (sched/plan.cpp): out of place, then, for
// the collectives NCCL defines one for (not all-to-all), in place, as the interposer serves
// in-place calls with the same schedule; an in-place failure's error begins "in place: ".
// The result is the out-of-place run's (its statistics and bitwise-identity note).
VerifyResult verify_as_served(const Schedule& schedule, VerifyOptions options = {});

}  // namespace topocoll::sched
