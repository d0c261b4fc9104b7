// NCCL tuner plugin API v3 (NCCL 2.22-2.23; PAT from 2.23), written from NCCL's published tuner API.
// From v3 on the tuner edits NCCL's cost table: float[numAlgo][numProto] (row-major, passed
// as float**), each entry NCCL's predicted time in microseconds or NCCL_ALGO_PROTO_IGNORE;
// NCCL then takes the smallest non-negative entry.
#pragma once

#include "plugin/nccl_api/tuner_v2.h"

extern "C" {

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

}  // extern "C"
