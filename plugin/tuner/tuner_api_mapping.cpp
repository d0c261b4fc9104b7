#include "plugin/tuner/tuner_api_mapping.h"

namespace topocoll::plugin::tuner {
namespace {

constexpr int kHwNvlink = 0, kHwNet = 2;  // rows of ncclTunerConstants_v5_t::hwLatencies

}  // namespace

const char* collective_name(ncclFunc_t coll) {
  switch (coll) {
    case ncclFuncBroadcast: return "Broadcast";
    case ncclFuncReduce: return "Reduce";
    case ncclFuncAllGather: return "AllGather";
    case ncclFuncReduceScatter: return "ReduceScatter";
    case ncclFuncAllReduce: return "AllReduce";
    case ncclFuncSendRecv: return "SendRecv";
    case ncclFuncSend: return "Send";
    case ncclFuncRecv: return "Recv";
    case ncclFuncAlltoAll: return "AlltoAll";
    case ncclFuncScatter: return "Scatter";
    case ncclFuncGather: return "Gather";
    default: return "Unknown";
  }
}

std::optional<sched::NcclCollective> modelled_collective(ncclFunc_t coll) {
  switch (coll) {
    case ncclFuncBroadcast: return sched::NcclCollective::Broadcast;
    case ncclFuncReduce: return sched::NcclCollective::Reduce;
    case ncclFuncAllGather: return sched::NcclCollective::AllGather;
    case ncclFuncReduceScatter: return sched::NcclCollective::ReduceScatter;
    case ncclFuncAllReduce: return sched::NcclCollective::AllReduce;
    default: return std::nullopt;
  }
}

std::optional<double> predict_us(const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                                 int algo, int proto, double nbytes, int num_pipe_ops) {
  const std::optional<sched::NcclCollective> c = modelled_collective(coll);
  if (!c) return std::nullopt;
  return model.predict_us(*c, algo, proto, nbytes, num_pipe_ops);
}

sched::NcclLatencies nccl_latencies_from(const ncclTunerConstants_v5_t& c) {
  sched::NcclLatencies l{};
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) {
      l.base[a][p] = c.baseLatencies[a][p];
      l.intra_host[a][p] = c.hwLatencies[kHwNvlink][a][p];
      l.inter_host[a][p] = c.hwLatencies[kHwNet][a][p];
    }
  return l;
}

}  // namespace topocoll::plugin::tuner
