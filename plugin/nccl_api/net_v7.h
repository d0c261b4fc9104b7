// NCCL net plugin API, version 7 (NCCL 2.19+), written from NCCL's published ext-net API.
// Layouts must match NCCL's ABI exactly. This file also holds what every later net
// version shares (handle size, pointer kinds, device offload types); net_v8.h .. net_v11.h
// include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/nccl_api/nccl_common.h"

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4
#define NCCL_NET_MAX_RECVS 8
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
// Transfer size caps NCCL applies to plugins that report none (v9+ report their own).
#define NCCL_NET_MAX_P2P_BYTES (1024L * 1024L * 1024L)
#define NCCL_NET_MAX_COLL_BYTES (512L * 1024L * 1024L)

extern "C" {

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

// Device offload handle (same layout v7..v11); topocoll never offloads, so never fills one.
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef struct {
  char* name;           // for logs
  char* pciPath;        // /sys path of the PCI device, NULL when virtual
  uint64_t guid;        // distinguishes NIC chips
  int ptrSupport;       // NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF
  int speed;            // Mb/s
  int port;
  float latency;        // us
  int maxComms;
  int maxRecvs;         // grouped receives per irecv
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  // connect/accept must not block: they return a NULL comm until it is ready.
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v7_t;

}  // extern "C"
