// The one implementation behind every exported ncclNetPlugin_vN (net_v7.cpp .. net_v11.cpp
// are thin adapters onto it): the socket transport of net/ with topology-derived devices
// and plane routing. Every function returns an ncclResult_t, logs a WARN naming the
// problem on failure, and never lets an exception out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/nccl_api/net_v11.h"

namespace topocoll::plugin::socket_net {

inline constexpr const char* kName = "topocoll";
inline constexpr int kMaxRequestsPerComm = 128;  // in flight per comm; NCCL uses <= 32

// Superset of every version's device properties; each adapter copies what its version has.
struct DeviceProperties {
  char* name = nullptr;
  char* pci_path = nullptr;
  uint64_t guid = 0;
  int ptr_support = NCCL_PTR_HOST;
  int speed_mbps = 0;
  float latency_us = 0;
  int max_comms = 0;
  int max_recvs = 0;
  size_t max_p2p_bytes = 0;
  size_t max_coll_bytes = 0;
};

ncclResult_t init(ncclDebugLogger_t logger);
ncclResult_t devices(int* count);
ncclResult_t properties(int dev, DeviceProperties* props);
// owner: the v11 context the listener or connection is made for (null before v11); see
// abandon_unfinished.
ncclResult_t listen_for(const void* owner, int dev, void* handle, void** listen_comm);
inline ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  return listen_for(nullptr, dev, handle, listen_comm);
}
ncclResult_t connect(const void* owner, int dev, void* handle, void** send_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);
ncclResult_t close_listen(void* listen_comm);
// Closes the connection attempts started for `owner` and not yet finished, and its listeners
// not yet closed; returns how many of each. NCCL keeps a connect's progress only in the
// handle and calls connect() until it returns a comm, and closes a listener once its
// connection is accepted (transport/net.cc recvProxyConnect); a communicator aborted
// meanwhile never calls again, and only finalize (v11, once the last communicator sharing
// the context is freed, after NCCL has stopped its proxy: init.cc commFree) can close their
// sockets. Before v11 there is no context, and they stay open until the process ends, as in
// NCCL's own socket transport.
struct Abandoned {
  size_t connects = 0, listeners = 0;
};
Abandoned abandon_unfinished(const void* owner);
// getDeviceMr, irecvConsumed and makeVDevice are exported as null, as NCCL's own Socket
// transport does: NCCL 2.28's proxy calls irecvConsumed after every received step whenever
// the pointer is set (transport/net.cc), and tries NIC fusion whenever makeVDevice is set.
// A host-memory transport has no device offload and does not merge NICs (that would undo
// plane routing).

// Fills a version's properties struct from DeviceProperties (fields every version has).
template <typename Props>
void fill_common(const DeviceProperties& p, Props* out) {
  out->name = p.name;
  out->pciPath = p.pci_path;
  out->guid = p.guid;
  out->ptrSupport = p.ptr_support;
  out->speed = p.speed_mbps;
  out->port = 0;
  out->latency = p.latency_us;
  out->maxComms = p.max_comms;
  out->maxRecvs = p.max_recvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
}

}  // namespace topocoll::plugin::socket_net
