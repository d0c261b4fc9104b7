// NCCL tuner plugin API v2 (NCCL 2.21, which uses its answer unchecked; NCCL 2.22+ fall back to
// it without a newer symbol and enable its choice only where NCCL did), written from NCCL's published tuner API.
// Also holds what every tuner version shares: the collective kinds NCCL passes in
// (ncclFunc_t) and the algorithm/protocol indices a tuner answers with (v2) or finds as rows
// and columns of the cost table (v3+). Values must match NCCL's ABI (checked for 2.28).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/nccl_api/nccl_common.h"

extern "C" {

typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11
} ncclFunc_t;

// Rows of the cost table (algorithms) and columns (protocols).
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

// A cost-table entry NCCL has ruled out (disabled, unsupported or excluded by NCCL_ALGO /
// NCCL_PROTO); a tuner must leave it as it is.
#define NCCL_ALGO_PROTO_IGNORE -1.0

typedef struct {
  const char* name;
  // Called once per communicator; *context is handed back to the other calls.
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  // v2 answers with a choice instead of editing a cost table: algorithm and protocol (both or
  // neither; NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF = no opinion) and nChannels (0 = NCCL's).
  // collNetSupport / nvlsSupport: whether NCCL could use CollNet / NVLS for this call.
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

}  // extern "C"
