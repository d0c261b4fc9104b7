// ncclTunerPlugin_v3 (NCCL 2.22-2.23): v4 without regBuff. 2.22 has fewer algorithms (no
// PAT): numAlgo bounds every access to the table.
#include "plugin/log.h"
#include "plugin/nccl_api/tuner_v3.h"
#include "plugin/tuner/topology_tuner.h"
#include "plugin/tuner/tuner_export.h"

namespace topocoll::plugin::tuner {
namespace {

ncclResult_t init_v3(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  if (!context) return ncclInvalidArgument;
  if (logFunction) set_nccl_logger(logFunction);
  return TopologyTuner::init_context(nRanks, nNodes, nullptr, context);
}

ncclResult_t get_coll_info_v3(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* /*nChannels*/) {
  if (!context) return ncclSuccess;
  return static_cast<TopologyTuner*>(context)->tune(collType, nBytes, collCostTable, numAlgo, numProto, numPipeOps);
}

ncclResult_t destroy_v3(void* context) {
  delete static_cast<TopologyTuner*>(context);
  return ncclSuccess;
}

}  // namespace
}  // namespace topocoll::plugin::tuner

extern "C" {
TOPOCOLL_TUNER_EXPORT ncclTuner_v3_t ncclTunerPlugin_v3 = {
    "topocoll",
    topocoll::plugin::tuner::init_v3,
    topocoll::plugin::tuner::get_coll_info_v3,
    topocoll::plugin::tuner::destroy_v3,
};
}  // extern "C"
