// Net v7 and v8 pass message sizes as int; these widen them for socket_net (shared by
// net_v7.cpp and net_v8.cpp only).
#pragma once

#include "plugin/net/socket_net.h"

namespace topocoll::plugin::socket_net {

inline ncclResult_t isend_int(void* send_comm, void* data, int size, int tag, void*, void** request) {
  if (size < 0) {
    if (request) *request = nullptr;
    return ncclInvalidArgument;
  }
  return isend(send_comm, data, size_t(size), tag, request);
}

inline ncclResult_t irecv_int(void* recv_comm, int n, void** data, int* sizes, int* tags, void**,
                              void** request) {
  if (request) *request = nullptr;
  if (n < 1 || n > NCCL_NET_MAX_RECVS || !sizes) return ncclInvalidArgument;
  size_t wide[NCCL_NET_MAX_RECVS];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return ncclInvalidArgument;
    wide[i] = size_t(sizes[i]);
  }
  return irecv(recv_comm, n, data, wide, tags, request);
}

inline ncclResult_t iflush_int(void* recv_comm, int n, void** data, int* sizes, void**, void** request) {
  return iflush(recv_comm, n, data, sizes, request);
}

}  // namespace topocoll::plugin::socket_net
