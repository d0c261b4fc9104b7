// ncclTunerPlugin_v5: the symbol NCCL 2.28 looks for first. init also receives NCCL's
// latency constants, which the model uses in place of its built-in copy of the defaults
// (they are read, never changed), and the ranks of its smallest and largest node: a
// communicator with uneven nodes is left untuned (communicator_fit.h uneven_nodes).
#include "plugin/log.h"
#include "plugin/nccl_api/tuner_v5.h"
#include "plugin/tuner/topology_tuner.h"
#include "plugin/tuner/tuner_export.h"

namespace topocoll::plugin::tuner {
namespace {

ncclResult_t init_v5(void** context, uint64_t /*commId*/, size_t nRanks, size_t nNodes,
                     ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                     ncclTunerConstants_v5_t* constants) {
  if (!context) return ncclInvalidArgument;
  if (logFunction) set_nccl_logger(logFunction);
  // NCCL 2.28 (init.cc) fills it from the communicator's smallest and largest local rank
  // counts; negative counts would be NCCL's bug, read as unknown.
  RanksPerNode per_node;
  const bool known = nvlDomainInfo && nvlDomainInfo->minRanksPerNvlDomain > 0 && nvlDomainInfo->maxRanksPerNvlDomain > 0;
  if (known) per_node = {size_t(nvlDomainInfo->minRanksPerNvlDomain), size_t(nvlDomainInfo->maxRanksPerNvlDomain)};
  return TopologyTuner::init_context(nRanks, nNodes, constants, context, known ? &per_node : nullptr);
}

ncclResult_t get_coll_info_v5(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int /*regBuff*/,
                              int* /*nChannels*/) {
  if (!context) return ncclSuccess;
  return static_cast<TopologyTuner*>(context)->tune(collType, nBytes, collCostTable, numAlgo, numProto, numPipeOps);
}

ncclResult_t finalize_v5(void* context) {
  delete static_cast<TopologyTuner*>(context);
  return ncclSuccess;
}

}  // namespace
}  // namespace topocoll::plugin::tuner

extern "C" {
TOPOCOLL_TUNER_EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
    "topocoll",
    topocoll::plugin::tuner::init_v5,
    topocoll::plugin::tuner::get_coll_info_v5,
    topocoll::plugin::tuner::finalize_v5,
};
}  // extern "C"
