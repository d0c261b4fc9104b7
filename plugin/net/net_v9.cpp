// ncclNetPlugin_v9 (NCCL 2.24+) over socket_net.
#include "plugin/nccl_api/net_v9.h"
#include "plugin/net/net_export.h"
#include "plugin/net/socket_net.h"

namespace topocoll::plugin::socket_net {
namespace {

ncclResult_t get_properties_v9(int dev, ncclNetProperties_v9_t* props) {
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

ncclResult_t connect_v9(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t**) {
  return connect(nullptr, dev, handle, send_comm);
}

ncclResult_t accept_v9(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v9_t**) {
  return accept(listen_comm, recv_comm);
}

ncclResult_t isend_v9(void* send_comm, void* data, size_t size, int tag, void*, void** request) {
  return isend(send_comm, data, size, tag, request);
}

ncclResult_t irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void**, void** request) {
  return irecv(recv_comm, n, data, sizes, tags, request);
}

ncclResult_t iflush_v9(void* recv_comm, int n, void** data, int* sizes, void**, void** request) {
  return iflush(recv_comm, n, data, sizes, request);
}

}  // namespace
}  // namespace topocoll::plugin::socket_net

namespace sn = topocoll::plugin::socket_net;

extern "C" {
TOPOCOLL_NET_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    sn::kName,         sn::init,          sn::devices,        sn::get_properties_v9,
    sn::listen,        sn::connect_v9,    sn::accept_v9,      sn::reg_mr,
    nullptr /* regMrDmaBuf */, sn::dereg_mr,      sn::isend_v9,       sn::irecv_v9,
    sn::iflush_v9,     sn::test,          sn::close_send,     sn::close_recv,
    sn::close_listen,  nullptr /* getDeviceMr */, nullptr /* irecvConsumed */, nullptr /* makeVDevice */,
};
}  // extern "C"
