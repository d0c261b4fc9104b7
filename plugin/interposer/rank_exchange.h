// The init-time exchange of RankIdentity records (rank_identity.h) over NCCL itself: one
// pncclAllGather of sizeof(RankIdentity) bytes per communicator, on a temporary device
// buffer and a temporary stream of the communicator's device, then a stream
// synchronisation (init is not on the hot path and is never captured). Communicators
// created together inside one user group are exchanged in one NCCL group, so one thread
// driving several of them cannot deadlock. GPU-only: NCCL collectives need device memory.
#pragma once

#include <nccl.h>

#include <span>
#include <string>
#include <vector>

#include "plugin/interposer/rank_identity.h"

namespace topocoll::plugin::interposer {

struct IdentityExchange {
  ncclComm_t comm = nullptr;
  int nranks = 0;
  int rank = 0;
  int device = -1;
  RankIdentity mine;
  std::vector<RankIdentity> all;  // filled on success, indexed by rank
  std::string error;              // set on failure
};

// Every entry takes part: a rank must never skip a collective its peers run. The only way
// one can is a CUDA failure (no memory for 128 x nranks bytes) on the device of a
// communicator NCCL just created; the entry then reports the error and its peers wait in
// NCCL. Every other failure is agreed on after the exchange (rank_identity.h).
void exchange_identities(std::span<IdentityExchange> batch);

}  // namespace topocoll::plugin::interposer
