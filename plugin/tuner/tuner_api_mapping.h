// The tuner API's side of the NCCL algorithm model (sched/nccl_algorithm_model.h): NCCL's
// collective kinds (ncclFunc_t) and the latency constants NCCL hands to a v5 tuner mapped
// onto the model's, the cost table's dimensions, and NCCL's names for the log.
#pragma once

#include <optional>

#include "plugin/nccl_api/tuner_v5.h"
#include "sched/nccl_algorithm_model.h"

namespace topocoll::plugin::tuner {

inline constexpr int kNumAlgorithms = NCCL_NUM_ALGORITHMS_V5;
inline constexpr int kNumProtocols = NCCL_NUM_PROTOCOLS_V5;
// The model speaks NCCL's indices: the cost table's rows and columns are its algorithms and
// protocols.
static_assert(kNumAlgorithms == sched::kNumNcclAlgorithms && kNumProtocols == sched::kNumNcclProtocols);
static_assert(NCCL_ALGO_TREE == sched::kNcclTree && NCCL_ALGO_RING == sched::kNcclRing &&
              NCCL_ALGO_COLLNET_DIRECT == sched::kNcclCollNetDirect &&
              NCCL_ALGO_COLLNET_CHAIN == sched::kNcclCollNetChain && NCCL_ALGO_NVLS == sched::kNcclNvls &&
              NCCL_ALGO_NVLS_TREE == sched::kNcclNvlsTree && NCCL_ALGO_PAT == sched::kNcclPat);
static_assert(NCCL_PROTO_LL == sched::kNcclLL && NCCL_PROTO_LL128 == sched::kNcclLL128 &&
              NCCL_PROTO_SIMPLE == sched::kNcclSimple);

const char* collective_name(ncclFunc_t coll);  // "AllReduce", ... as NCCL prints them

// The model's collective for an NCCL one; nullopt for those it does not model (send/recv,
// all-to-all, scatter, gather).
std::optional<sched::NcclCollective> modelled_collective(ncclFunc_t coll);

// model.predict_us for an NCCL collective kind (nullopt where it is not modelled).
std::optional<double> predict_us(const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                                 int algo, int proto, double nbytes, int num_pipe_ops = 1);

// The latencies NCCL hands to a v5 tuner's init (base, and the NVLink and NET hw rows).
sched::NcclLatencies nccl_latencies_from(const ncclTunerConstants_v5_t& constants);

}  // namespace topocoll::plugin::tuner
