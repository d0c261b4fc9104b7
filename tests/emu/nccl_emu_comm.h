// A communicator of the NCCL emulation: which rank this is, and where every other rank's
// messages go. Also the unique-id format and the point-to-point primitives every operation
// is built from (eager send, receive with a timeout).
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/emu/nccl_emu_mailbox.h"

// nccl.h declares ncclComm_t as a pointer to this (global) struct.
struct ncclComm {
  topocoll::emu::CommKey key;
  int rank = 0;
  int nranks = 0;
  int cuda_device = 0;
  // Its GPU's compute capability, major * 10 + minor (NCCL's comm->minCompCap). NCCL takes
  // the lowest over the ranks; every process of an emulated job reports the same one
  // (TOPOCOLL_EMU_COMPUTE_CAPABILITY), so this rank's is that minimum.
  int min_compute_capability = 90;
  // Per rank: the socket name of the process holding it; empty for this process.
  std::vector<std::string> addresses;
  // Splits and shrinks made from this communicator so far: part of each child's key, so
  // every member derives the same child key without talking.
  std::uint64_t children_made = 0;
  // Its config's splitShare / shrinkShare (or NCCL_COMM_*_SHARE_RESOURCES): whether its
  // splits / shrinks share its net context and proxy.
  bool split_share = false, shrink_share = false;
  bool finalize_called = false;  // ncclCommFinalize or ncclCommRevoke ran (a finalize is refused)
  bool revoked = false;          // ncclCommRevoke ran: operations are refused
};

namespace topocoll::emu {

// A fresh id, unique on this machine (pid, a counter and random bits).
ncclUniqueId make_unique_id();
// The key an id stands for; Failure(ncclInvalidArgument) for an id no call here made.
CommKey key_of(const ncclUniqueId& id);
// The key of a child communicator: the same on every member that passes the same values.
CommKey child_key(const CommKey& parent, std::uint64_t sequence, std::uint64_t salt);
std::string describe(const CommKey& key);

// TOPOCOLL_EMU_TIMEOUT_S (default 60): how long a receive or a connection attempt waits.
std::chrono::milliseconds timeout();
bool tracing();  // TOPOCOLL_EMU_TRACE=1

// Whether any rank of `comm` lives in another process (its messages then cross the net
// plugin when NCCL_NET_PLUGIN is set).
bool has_remote_ranks(const ncclComm& comm);

// Eager: returns once the bytes are copied out of `data`.
void send_to(const ncclComm& comm, int peer, Channel channel, const void* data,
             std::size_t bytes);
// Waits for the next message from `peer` on `channel` and copies it to `into`; Failure on a
// timeout or when its size is not `bytes`.
void receive_from(const ncclComm& comm, int peer, Channel channel, void* into,
                  std::size_t bytes);

}  // namespace topocoll::emu
