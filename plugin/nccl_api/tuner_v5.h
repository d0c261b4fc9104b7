// NCCL tuner plugin API v5 (NCCL 2.28, which looks for it first), written
// from NCCL's published tuner API. Changes from v4: init takes the context pointer first, the
// communicator id, the NVLink domain layout and NCCL's tuning constants (which the tuner may
// edit before NCCL builds its time model); destroy is renamed finalize.
#pragma once

#include "plugin/nccl_api/tuner_v2.h"

#define NCCL_NUM_ALGORITHMS_V5 7  // Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
#define NCCL_NUM_PROTOCOLS_V5 3   // LL, LL128, Simple
#define NCCL_NUM_HW_LINKS_V5 3    // NVLink, PCI, Net
#define NCCL_NUM_COMPCAPS_V5 4    // Volta, Ampere, Hopper, Blackwell
#define NCCL_NUM_TUNING_SCALES_V5 3  // 1 node, 2 nodes, 4+ nodes

extern "C" {

typedef struct {
  int nNvlDomains;           // NVLink domains in the communicator
  int minRanksPerNvlDomain;  // smallest domain, in ranks
  int maxRanksPerNvlDomain;  // largest domain, in ranks
} ncclNvlDomainInfo_v5_t;

// NCCL's time-model constants (latencies in microseconds, bandwidths in GB/s).
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

}  // extern "C"
