// ncclTunerPlugin_v4 (NCCL 2.24-2.27): v5 without the constants; destroy instead of finalize.
#include "plugin/log.h"
#include "plugin/nccl_api/tuner_v4.h"
#include "plugin/tuner/topology_tuner.h"
#include "plugin/tuner/tuner_export.h"

namespace topocoll::plugin::tuner {
namespace {

ncclResult_t init_v4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  if (!context) return ncclInvalidArgument;
  if (logFunction) set_nccl_logger(logFunction);
  return TopologyTuner::init_context(nRanks, nNodes, nullptr, context);
}

ncclResult_t get_coll_info_v4(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int /*regBuff*/,
                              int* /*nChannels*/) {
  if (!context) return ncclSuccess;
  return static_cast<TopologyTuner*>(context)->tune(collType, nBytes, collCostTable, numAlgo, numProto, numPipeOps);
}

ncclResult_t destroy_v4(void* context) {
  delete static_cast<TopologyTuner*>(context);
  return ncclSuccess;
}

}  // namespace
}  // namespace topocoll::plugin::tuner

extern "C" {
TOPOCOLL_TUNER_EXPORT ncclTuner_v4_t ncclTunerPlugin_v4 = {
    "topocoll",
    topocoll::plugin::tuner::init_v4,
    topocoll::plugin::tuner::get_coll_info_v4,
    topocoll::plugin::tuner::destroy_v4,
};
}  // extern "C"
