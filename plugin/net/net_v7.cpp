// ncclNetPlugin_v7 (NCCL 2.19+) over socket_net: int sizes everywhere, regMr included.
#include <climits>

#include "plugin/nccl_api/net_v7.h"
#include "plugin/net/int_sizes.h"
#include "plugin/net/net_export.h"

namespace topocoll::plugin::socket_net {
namespace {

ncclResult_t get_properties_v7(int dev, ncclNetProperties_v7_t* props) {
  if (!props) return ncclInvalidArgument;
  DeviceProperties p;
  ncclResult_t r = properties(dev, &p);
  if (r != ncclSuccess) return r;
  fill_common(p, props);
  return ncclSuccess;
}

ncclResult_t connect_v7(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v7_t**) {
  return connect(nullptr, dev, handle, send_comm);
}

ncclResult_t accept_v7(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t**) {
  return accept(listen_comm, recv_comm);
}

ncclResult_t reg_mr_v7(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return ncclInvalidArgument;
  return reg_mr(comm, data, size_t(size), type, mhandle);
}

}  // namespace
}  // namespace topocoll::plugin::socket_net

namespace sn = topocoll::plugin::socket_net;

extern "C" {
TOPOCOLL_NET_EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
    sn::kName,         sn::init,          sn::devices,        sn::get_properties_v7,
    sn::listen,        sn::connect_v7,    sn::accept_v7,      sn::reg_mr_v7,
    nullptr /* regMrDmaBuf */, sn::dereg_mr,      sn::isend_int,      sn::irecv_int,
    sn::iflush_int,    sn::test,          sn::close_send,     sn::close_recv,
    sn::close_listen,  nullptr /* getDeviceMr */, nullptr /* irecvConsumed */,
};
}  // extern "C"
