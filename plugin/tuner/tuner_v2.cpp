// ncclTunerPlugin_v2 (NCCL 2.21): no cost table; the tuner answers with an algorithm and
// protocol, which 2.21 runs unchecked (2.22+, falling back to v2, force that entry to time 0
// only when it is enabled). The choice is the model's best among what 2.21 runs on every
// machine (TopologyTuner::choose), and "no opinion" (UNDEF) whenever NCCL could use CollNet
// or NVLS, whose times a v2 tuner cannot compare against.
#include "plugin/log.h"
#include "plugin/nccl_api/tuner_v2.h"
#include "plugin/tuner/topology_tuner.h"
#include "plugin/tuner/tuner_export.h"

namespace topocoll::plugin::tuner {
namespace {

ncclResult_t init_v2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context) {
  if (!context) return ncclInvalidArgument;
  if (logFunction) set_nccl_logger(logFunction);
  return TopologyTuner::init_context(nRanks, nNodes, nullptr, context);
}

ncclResult_t get_coll_info_v2(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* /*nChannels*/) {
  if (!context) return ncclSuccess;
  return static_cast<TopologyTuner*>(context)->choose(collType, nBytes, collNetSupport != 0, nvlsSupport != 0,
                                                      numPipeOps, algorithm, protocol);
}

ncclResult_t destroy_v2(void* context) {
  delete static_cast<TopologyTuner*>(context);
  return ncclSuccess;
}

}  // namespace
}  // namespace topocoll::plugin::tuner

extern "C" {
TOPOCOLL_TUNER_EXPORT ncclTuner_v2_t ncclTunerPlugin_v2 = {
    "topocoll",
    topocoll::plugin::tuner::init_v2,
    topocoll::plugin::tuner::get_coll_info_v2,
    topocoll::plugin::tuner::destroy_v2,
};
}  // extern "C"
