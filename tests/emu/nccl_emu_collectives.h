// NCCL's collectives and point-to-point calls as Exchanges of eager messages. Every rank's
// input goes to every rank that needs it, this rank's own included (through the mailbox),
// which also snapshots the inputs before any output is written: in-place calls need nothing
// special. Reductions combine all contributions in rank order 0..P-1 on every rank, so the
// results are bitwise identical everywhere. Arguments are checked by the caller.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>

#include "tests/emu/nccl_emu_exchange.h"

namespace topocoll::emu {

std::shared_ptr<Exchange> all_reduce(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type, ncclRedOp_t op);
// `count` elements per rank: rank r gets the reduction of block r.
std::shared_ptr<Exchange> reduce_scatter(const ncclComm* comm, const void* send, void* recv,
                                         std::size_t count, ncclDataType_t type,
                                         ncclRedOp_t op);
// `count` elements per rank, placed in rank order.
std::shared_ptr<Exchange> all_gather(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type);
// `count` elements per peer block.
std::shared_ptr<Exchange> all_to_all(const ncclComm* comm, const void* send, void* recv,
                                     std::size_t count, ncclDataType_t type);
std::shared_ptr<Exchange> broadcast(const ncclComm* comm, const void* send, void* recv,
                                    std::size_t count, ncclDataType_t type, int root);
std::shared_ptr<Exchange> reduce(const ncclComm* comm, const void* send, void* recv,
                                 std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                                 int root);
std::shared_ptr<Exchange> send(const ncclComm* comm, const void* data, std::size_t count,
                               ncclDataType_t type, int peer);
std::shared_ptr<Exchange> recv(const ncclComm* comm, void* data, std::size_t count,
                               ncclDataType_t type, int peer);

}  // namespace topocoll::emu
