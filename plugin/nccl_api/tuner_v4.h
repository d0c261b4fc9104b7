// NCCL tuner plugin API v4 (NCCL 2.24-2.27), written from NCCL's published tuner API.
// Same as v3 plus regBuff: whether the user buffers are registered (or graph-registered).
#pragma once

#include "plugin/nccl_api/tuner_v2.h"

extern "C" {

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

}  // extern "C"
