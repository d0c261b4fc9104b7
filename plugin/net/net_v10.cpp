// ncclNetPlugin_v10 (NCCL 2.26+) over socket_net.
#include "plugin/nccl_api/net_v10.h"
#include "plugin/net/net_export.h"
#include "plugin/net/socket_net.h"

namespace topocoll::plugin::socket_net {
namespace {

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return init(logger); }

ncclResult_t get_properties_v10(int dev, ncclNetProperties_v10_t* props) {
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
  return ncclSuccess;
}

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v10_t**) {
  return connect(nullptr, dev, handle, send_comm);
}

ncclResult_t accept_v10(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v10_t**) {
  return accept(listen_comm, recv_comm);
}

ncclResult_t isend_v10(void* send_comm, void* data, size_t size, int tag, void*, void*, void** request) {
  return isend(send_comm, data, size, tag, request);
}

ncclResult_t irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void**, void**,
                       void** request) {
  return irecv(recv_comm, n, data, sizes, tags, request);
}

ncclResult_t iflush_v10(void* recv_comm, int n, void** data, int* sizes, void**, void** request) {
  return iflush(recv_comm, n, data, sizes, request);
}

}  // namespace
}  // namespace topocoll::plugin::socket_net

namespace sn = topocoll::plugin::socket_net;

extern "C" {
TOPOCOLL_NET_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    sn::kName,         sn::init_v10,      sn::devices,       sn::get_properties_v10,
    sn::listen,        sn::connect_v10,   sn::accept_v10,    sn::reg_mr,
    nullptr /* regMrDmaBuf */, sn::dereg_mr,      sn::isend_v10,     sn::irecv_v10,
    sn::iflush_v10,    sn::test,          sn::close_send,    sn::close_recv,
    sn::close_listen,  nullptr /* getDeviceMr */, nullptr /* irecvConsumed */, nullptr /* makeVDevice */,
};
}  // extern "C"
