// ncclNetPlugin_v11 (NCCL 2.28+) over socket_net. v11 adds a per-communicator context.
#include <new>

#include "plugin/nccl_api/net_v11.h"
#include "plugin/net/net_export.h"
#include "plugin/net/socket_net.h"

namespace topocoll::plugin::socket_net {
namespace {

struct Context {
  uint64_t comm_id = 0;
  int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;  // accepted, not applied to TCP
};

ncclResult_t init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                      ncclDebugLogger_t logger, ncclProfilerCallback_t) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  ncclResult_t r = init(logger);
  if (r != ncclSuccess) return r;
  auto* c = new (std::nothrow) Context{comm_id, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (!c) return ncclSystemError;
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t finalize_v11(void* ctx) {
  abandon_unfinished(ctx);
  delete static_cast<Context*>(ctx);
  return ncclSuccess;
}

ncclResult_t get_properties_v11(int dev, ncclNetProperties_v11_t* props) {
  if (!props) return ncclInvalidArgument;
  DeviceProperties p;
  ncclResult_t r = properties(dev, &p);
  if (r != ncclSuccess) return r;
  fill_common(p, props);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = p.max_p2p_bytes;
  props->maxCollBytes = p.max_coll_bytes;
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  return listen_for(ctx, dev, handle, listen_comm);
}

ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v11_t**) {
  return connect(ctx, dev, handle, send_comm);
}

ncclResult_t accept_v11(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t**) {
  return accept(listen_comm, recv_comm);
}

ncclResult_t isend_v11(void* send_comm, void* data, size_t size, int tag, void*, void*, void** request) {
  return isend(send_comm, data, size, tag, request);
}

ncclResult_t irecv_v11(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void**, void**,
                       void** request) {
  return irecv(recv_comm, n, data, sizes, tags, request);
}

ncclResult_t iflush_v11(void* recv_comm, int n, void** data, int* sizes, void**, void** request) {
  return iflush(recv_comm, n, data, sizes, request);
}

ncclResult_t set_net_attr_v11(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }  // hints only

}  // namespace
}  // namespace topocoll::plugin::socket_net

namespace sn = topocoll::plugin::socket_net;

extern "C" {
TOPOCOLL_NET_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    sn::kName,          sn::init_v11,       sn::devices,        sn::get_properties_v11,
    sn::listen_v11,     sn::connect_v11,    sn::accept_v11,     sn::reg_mr,
    nullptr /* regMrDmaBuf */,  sn::dereg_mr,       sn::isend_v11,      sn::irecv_v11,
    sn::iflush_v11,     sn::test,           sn::close_send,     sn::close_recv,
    sn::close_listen,   nullptr /* getDeviceMr */,  nullptr /* irecvConsumed */, nullptr /* makeVDevice */,
    sn::finalize_v11,   sn::set_net_attr_v11,
};
}  // extern "C"
