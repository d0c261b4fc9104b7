// ncclNetPlugin_v8 (NCCL 2.20+) over socket_net.
#include "plugin/nccl_api/net_v8.h"
#include "plugin/net/int_sizes.h"
#include "plugin/net/net_export.h"

namespace topocoll::plugin::socket_net {
namespace {

ncclResult_t get_properties_v8(int dev, ncclNetProperties_v8_t* props) {
  if (!props) return ncclInvalidArgument;
  DeviceProperties p;
  ncclResult_t r = properties(dev, &p);
  if (r != ncclSuccess) return r;
  fill_common(p, props);
  props->regIsGlobal = 0;
  return ncclSuccess;
}

ncclResult_t connect_v8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  return connect(nullptr, dev, handle, send_comm);
}

ncclResult_t accept_v8(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
  return accept(listen_comm, recv_comm);
}

}  // namespace
}  // namespace topocoll::plugin::socket_net

namespace sn = topocoll::plugin::socket_net;

extern "C" {
TOPOCOLL_NET_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    sn::kName,         sn::init,          sn::devices,        sn::get_properties_v8,
    sn::listen,        sn::connect_v8,    sn::accept_v8,      sn::reg_mr,
    nullptr /* regMrDmaBuf */, sn::dereg_mr,      sn::isend_int,      sn::irecv_int,
    sn::iflush_int,    sn::test,          sn::close_send,     sn::close_recv,
    sn::close_listen,  nullptr /* getDeviceMr */, nullptr /* irecvConsumed */,
};
}  // extern "C"
