#include "plugin/net/socket_net.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "net/connect_attempt.h"
#include "net/socket_transport.h"
#include "plugin/kept_for_process.h"
#include "plugin/log.h"
#include "plugin/net/live_objects.h"
#include "plugin/net/net_device.h"
#include "plugin/net/plane_router.h"
#include "plugin/process_context.h"

namespace topocoll::plugin::socket_net {

LiveObjects& live_objects() {
  alignas(LiveObjects) static unsigned char storage[sizeof(LiveObjects)];
  static LiveObjects* objects = new (storage) LiveObjects();  // never destroyed (live_objects.h)
  return *objects;
}

namespace {

// Tags at the start of every object handed to NCCL, so a stale or foreign pointer is an
// error with a message instead of a crash.
constexpr uint32_t kListenTag = 0x544c5354;  // "TLST"
constexpr uint32_t kCommTag = 0x54434f4d;    // "TCOM"
char g_host_registration;                    // the mhandle of every host-memory registration

struct Catalog {
  DeviceCatalog devices;
  net::TransportOptions options;
};

// Kept for the process (kept_for_process.h): NCCL's proxy threads connect and send while
// exit() runs this library's static destructors.
const Catalog& catalog() {
  static const Catalog* c = kept_for_process([] {
    auto* result = new Catalog;
    const ProcessContext& context = process_context();
    result->options = net::TransportOptions::for_nccl_net_plugin(context.env);
    TC_INFO(NCCL_INIT | NCCL_NET, "NET/topocoll: socket transport %s", result->options.describe().c_str());
    result->devices = discover_devices(context);
    return result;
  }());
  return *c;
}

// Names and PCI paths NCCL keeps as char* for the life of the process: kept as long.
struct DeviceStrings {
  std::vector<std::string> names, pci_paths;
};
DeviceStrings& device_strings() {
  static DeviceStrings* s = kept_for_process([] {
    auto* d = new DeviceStrings;
    for (const auto& dev : catalog().devices.devices) {
      d->names.push_back(dev.nccl_name);
      d->pci_paths.push_back(dev.pci_path);
    }
    return d;
  }());
  return *s;
}

struct ListenComm {
  uint32_t tag = kListenTag;
  int dev = 0;
  std::unique_ptr<net::Listener> listener;
};

struct Comm;
struct PluginRequest {
  Comm* comm = nullptr;
  net::Request* request = nullptr;
  int count = 1;
  bool in_use = false;
};

struct Comm {
  uint32_t tag = kCommTag;
  std::unique_ptr<net::SendComm> send;
  std::unique_ptr<net::RecvComm> recv;
  std::string description;
  std::mutex mutex;
  bool warned = false;
  std::array<PluginRequest, kMaxRequestsPerComm> requests{};
};

ncclResult_t to_nccl(net::NetCode code) {
  switch (code) {
    case net::NetCode::Ok: return ncclSuccess;
    case net::NetCode::InvalidArgument: return ncclInvalidArgument;
    case net::NetCode::BadHandle:
    case net::NetCode::VersionMismatch:
    case net::NetCode::Truncated:
    case net::NetCode::TagMismatch: return ncclInvalidUsage;
    // The peer or the path to it, as NCCL's Socket transport reports a dead peer, an
    // unreachable host or a connect still refused after its retries (misc/socket.cc).
    case net::NetCode::PeerClosed:
    case net::NetCode::Timeout: return ncclRemoteError;
    case net::NetCode::ConnectFailed:
    case net::NetCode::SystemError: return ncclSystemError;
  }
  return ncclInternalError;
}

ncclResult_t report(const char* call, const net::NetStatus& s) {
  TC_WARN("NET/topocoll: %s: %s (%s)", call, s.message.c_str(), std::string(net::to_string(s.code)).c_str());
  return to_nccl(s.code);
}

bool valid_dev(int dev, const char* call) {
  int n = int(catalog().devices.devices.size());
  if (dev >= 0 && dev < n) return true;
  TC_WARN("NET/topocoll: %s: device %d does not exist (%d devices)", call, dev, n);
  return false;
}

Comm* as_comm(void* p, const char* call) {
  if (p && live_objects().contains(p, LiveKind::Comm)) return static_cast<Comm*>(p);
  TC_WARN("NET/topocoll: %s: %p is not a topocoll send/receive comm", call, p);
  return nullptr;
}

PluginRequest* take_slot(Comm& c) {
  for (auto& r : c.requests)
    if (!r.in_use) {
      r.in_use = true;
      r.comm = &c;
      live_objects().add(&r, LiveKind::Request);
      return &r;
    }
  return nullptr;
}

void release_slot(PluginRequest& r) {
  live_objects().remove(&r);
  r.in_use = false;
  r.request = nullptr;
}

ListenComm* as_listen_comm(void* p, const char* call) {
  if (p && live_objects().contains(p, LiveKind::Listen)) return static_cast<ListenComm*>(p);
  TC_WARN("NET/topocoll: %s: %p is not a topocoll listen comm (closed already, or another object)", call, p);
  return nullptr;
}

// Every entry point: exceptions become ncclInternalError with a WARN.
template <typename F>
ncclResult_t guarded(const char* call, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    TC_WARN("NET/topocoll: %s: %s", call, e.what());
  } catch (...) {
    TC_WARN("NET/topocoll: %s: unknown exception", call);
  }
  return ncclInternalError;
}

}  // namespace

ncclResult_t init(ncclDebugLogger_t logger) {
  // From here on the plugin's warnings, and the layers' below it (config/warnings.h: bad
  // settings, stray connections closed by a listener), go to NCCL's log.
  set_nccl_logger(logger);
  return guarded("init", [] {
    catalog();
    device_strings();
    return ncclSuccess;
  });
}

ncclResult_t devices(int* count) {
  if (!count) return ncclInvalidArgument;
  return guarded("devices", [&] {
    *count = int(catalog().devices.devices.size());
    return ncclSuccess;
  });
}

ncclResult_t properties(int dev, DeviceProperties* props) {
  if (!props) return ncclInvalidArgument;
  return guarded("getProperties", [&] {
    if (!valid_dev(dev, "getProperties")) return ncclInvalidArgument;
    const NetDevice& d = catalog().devices.devices[dev];
    auto& strings = device_strings();
    *props = DeviceProperties{};
    props->name = strings.names[dev].data();
    props->pci_path = strings.pci_paths[dev].empty() ? nullptr : strings.pci_paths[dev].data();
    props->guid = uint64_t(dev);
    props->ptr_support = NCCL_PTR_HOST;
    props->speed_mbps = d.speed_mbps;
    props->latency_us = d.latency_us;
    props->max_comms = 65536;
    // One receive per irecv, as NCCL's own socket transport reports. Above 1, NCCL 2.28
    // shares one comm among the p2p connections to a peer (NCCL_NET_SHARED_COMMS,
    // transport/net.cc sendProxyConnect/recvProxyConnect: PXN, split-shared communicators)
    // and groups their receives, whose senders progress independently; this transport
    // fills a posted group from the connection's next messages in send order, so a second
    // message of one tag arriving before the first of another would fail the connection.
    props->max_recvs = 1;
    props->max_p2p_bytes = NCCL_NET_MAX_P2P_BYTES;
    props->max_coll_bytes = NCCL_NET_MAX_COLL_BYTES;
    return ncclSuccess;
  });
}

ncclResult_t listen_for(const void* owner, int dev, void* handle, void** listen_comm) {
  if (!handle || !listen_comm) return ncclInvalidArgument;
  *listen_comm = nullptr;
  return guarded("listen", [&] {
    if (!valid_dev(dev, "listen")) return ncclInvalidArgument;
    const auto& cat = catalog().devices;
    const NetDevice& d = cat.devices[dev];
    // The handle tells the connecting side which topology endpoint it is reaching.
    uint64_t user_data = 0;
    if (cat.topology && d.endpoint >= 0)
      user_data = (uint64_t(cat.topology_fingerprint) << 32) | uint32_t(d.endpoint + 1);
    auto comm = std::make_unique<ListenComm>();
    comm->dev = dev;
    net::SocketAddress bind = d.address;
    bind.port = 0;
    net::NetStatus s = net::Listener::open(bind, catalog().options, &comm->listener, user_data);
    if (!s.ok()) return report("listen", s);
    std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    std::memcpy(handle, &comm->listener->handle(), sizeof(net::Handle));
    live_objects().add(comm.get(), LiveKind::Listen, owner);
    *listen_comm = comm.release();
    return ncclSuccess;
  });
}

namespace {
// A connect under way. NCCL calls connect() again with the same handle until it returns a
// comm, so the attempt is remembered in the handle's unused bytes (as NCCL's own socket
// plugin keeps its stage there) and found through the live-object registry.
struct PendingConnect {
  std::unique_ptr<net::ConnectAttempt> attempt;
  std::string peer;
  // The handle's bytes up to the stage when the attempt began: a handle that names another
  // listener but carries this attempt's stage (copied, or forged) must not take it over.
  std::array<unsigned char, 64> named{};
};
struct ConnectStage {
  uint64_t magic = 0;
  PendingConnect* pending = nullptr;
};
constexpr uint64_t kConnectStageMagic = 0x54434f4e4e454354;  // "TCONNECT"
constexpr size_t kConnectStageOffset = 64;
static_assert(sizeof(PendingConnect::named) == kConnectStageOffset);
static_assert(sizeof(net::Handle) <= kConnectStageOffset &&
              kConnectStageOffset + sizeof(ConnectStage) <= NCCL_NET_HANDLE_MAXSIZE);

PendingConnect* pending_in(void* handle) {
  ConnectStage stage;
  std::memcpy(&stage, static_cast<char*>(handle) + kConnectStageOffset, sizeof stage);
  if (stage.magic != kConnectStageMagic || !live_objects().contains(stage.pending, LiveKind::Connecting) ||
      std::memcmp(stage.pending->named.data(), handle, stage.pending->named.size()) != 0)
    return nullptr;
  return stage.pending;
}
void set_pending(void* handle, PendingConnect* pending) {
  ConnectStage stage;
  if (pending) stage = {kConnectStageMagic, pending};
  std::memcpy(static_cast<char*>(handle) + kConnectStageOffset, &stage, sizeof stage);
}
void end_pending(void* handle, PendingConnect* pending) {
  // Not removed: finalize already took it back. NCCL finalizes only after its proxy, which
  // drives connect, has stopped (init.cc commFree), so only a caller that ignores that order
  // gets here, and then this spares a double free but not its other races.
  if (live_objects().remove(pending)) delete pending;
  set_pending(handle, nullptr);
}
}  // namespace

// Never blocks: the first call starts the attempt (non-blocking connects), later calls with
// the same handle move it on; *send_comm stays null until it is established.
ncclResult_t connect(const void* owner, int dev, void* handle, void** send_comm) {
  if (!handle || !send_comm) return ncclInvalidArgument;
  *send_comm = nullptr;
  return guarded("connect", [&] {
    PendingConnect* pending = pending_in(handle);
    if (!pending) {
      if (!valid_dev(dev, "connect")) return ncclInvalidArgument;
      net::Handle h;
      net::NetStatus s = net::decode_handle(handle, NCCL_NET_HANDLE_MAXSIZE, &h);
      if (!s.ok()) return report("connect", s);
      const auto& cat = catalog().devices;
      const net::SocketAddress peer = net::handle_address(h);
      int chosen = dev;
      const uint32_t peer_fingerprint = uint32_t(h.user_data >> 32);
      // The peer's endpoint + 1 (0: none); a value past int is no endpoint, never an overflow.
      const uint32_t endpoint_plus_one = uint32_t(h.user_data);
      const int peer_endpoint = endpoint_plus_one == 0 || endpoint_plus_one > uint32_t(INT32_MAX) ? -1 : int(endpoint_plus_one) - 1;
      // Only a plane the topology chose binds the source address. Otherwise, as NCCL's own
      // socket transport, the kernel picks it by the route to the peer: NCCL's device for
      // this GPU may sit on another subnet than the peer's listening NIC (one subnet per
      // rail), and a packet leaving one NIC with another's address is dropped by strict
      // reverse-path filters and cloud anti-spoofing.
      bool planned = false;
      if (cat.topology && peer_endpoint >= 0 && peer_fingerprint == cat.topology_fingerprint) {
        PlaneChoice plane = choose_plane(*cat.topology, cat.devices, dev, peer_endpoint);
        chosen = plane.device;
        planned = true;
        TC_INFO(NCCL_NET, "NET/topocoll: connection to %s leaves through %s (%s): %s",
                peer.to_string().c_str(), cat.devices[chosen].name.c_str(),
                cat.devices[chosen].address.ip_string().c_str(), plane.why.c_str());
      } else if (cat.topology && peer_endpoint >= 0) {
        TC_ONCE(TC_WARN("NET/topocoll: peer %s loaded a different topology than this host "
                        "(TOPOCOLL_TOPO_FILE must name the same network everywhere); no plane routing",
                        peer.to_string().c_str()));
      }
      const net::SocketAddress& local = cat.devices[chosen].address;
      auto fresh = std::make_unique<PendingConnect>();
      fresh->peer = peer.to_string();
      std::memcpy(fresh->named.data(), handle, fresh->named.size());
      s = net::ConnectAttempt::start(h, planned && local.family == peer.family ? &local : nullptr,
                                     catalog().options, 0, &fresh->attempt);
      if (!s.ok()) return report("connect", s);
      pending = fresh.release();
      live_objects().add(pending, LiveKind::Connecting, owner);
      set_pending(handle, pending);
    }
    std::unique_ptr<net::SendComm> send;
    net::NetStatus s = pending->attempt->advance(&send);
    if (!s.ok()) {
      end_pending(handle, pending);
      return report("connect", s);
    }
    if (!send) return ncclSuccess;  // not yet; NCCL calls again
    auto comm = std::make_unique<Comm>();
    comm->send = std::move(send);
    comm->description = "send " + comm->send->local_address().to_string() + " -> " + pending->peer;
    end_pending(handle, pending);
    live_objects().add(comm.get(), LiveKind::Comm);
    *send_comm = comm.release();
    return ncclSuccess;
  });
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
  if (!recv_comm) return ncclInvalidArgument;
  *recv_comm = nullptr;
  return guarded("accept", [&] {
    ListenComm* l = as_listen_comm(listen_comm, "accept");
    if (!l) return ncclInvalidArgument;
    std::unique_ptr<net::RecvComm> recv;
    net::NetStatus s = l->listener->accept(&recv, 0);
    if (!s.ok()) return report("accept", s);
    if (!recv) return ncclSuccess;  // not yet; NCCL calls again
    auto comm = std::make_unique<Comm>();
    comm->recv = std::move(recv);
    const NetDevice& d = catalog().devices.devices[l->dev];
    TC_INFO(NCCL_NET, "NET/topocoll: accepted connection on %s (%s) from %s", d.name.c_str(),
            l->listener->address().to_string().c_str(), comm->recv->peer_address().to_string().c_str());
    comm->description = "receive " + l->listener->address().to_string() + " <- " +
                        comm->recv->peer_address().to_string();
    live_objects().add(comm.get(), LiveKind::Comm);
    *recv_comm = comm.release();
    return ncclSuccess;
  });
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!mhandle) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (!as_comm(comm, "regMr")) return ncclInvalidArgument;
  if (type != NCCL_PTR_HOST) {
    TC_WARN("NET/topocoll: regMr(%p, %zu bytes): memory type %d is not host memory; this transport "
            "supports NCCL_PTR_HOST only (CUDA buffers need NCCL's own staging)",
            data, size, type);
    return ncclInternalError;
  }
  *mhandle = &g_host_registration;  // host memory needs no registration for sockets
  return ncclSuccess;
}

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  if (!as_comm(comm, "deregMr")) return ncclInvalidArgument;
  if (mhandle && mhandle != &g_host_registration) {
    TC_WARN("NET/topocoll: deregMr: %p is not a handle from regMr", mhandle);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void** request) {
  if (!request) return ncclInvalidArgument;
  *request = nullptr;
  return guarded("isend", [&] {
    Comm* c = as_comm(send_comm, "isend");
    if (!c || !c->send) return ncclInvalidArgument;
    std::lock_guard lock(c->mutex);
    PluginRequest* slot = take_slot(*c);
    if (!slot) return ncclSuccess;  // all slots busy: NCCL retries later
    net::NetStatus s = c->send->isend(data, size, tag, &slot->request);
    if (!s.ok()) {
      release_slot(*slot);
      return report("isend", s);
    }
    slot->count = 1;
    *request = slot;
    return ncclSuccess;
  });
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** request) {
  if (!request) return ncclInvalidArgument;
  *request = nullptr;
  return guarded("irecv", [&] {
    Comm* c = as_comm(recv_comm, "irecv");
    if (!c || !c->recv) return ncclInvalidArgument;
    std::lock_guard lock(c->mutex);
    PluginRequest* slot = take_slot(*c);
    if (!slot) return ncclSuccess;
    net::NetStatus s = c->recv->irecv(n, data, sizes, tags, &slot->request);
    if (!s.ok()) {
      release_slot(*slot);
      return report("irecv", s);
    }
    slot->count = n;
    *request = slot;
    return ncclSuccess;
  });
}

ncclResult_t iflush(void* recv_comm, int, void**, int*, void** request) {
  if (request) *request = nullptr;  // host memory: received bytes are already visible
  return as_comm(recv_comm, "iflush") ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  if (!request || !done) return ncclInvalidArgument;
  *done = 0;
  return guarded("test", [&] {
    // Only a pointer found among the live requests is dereferenced: a completed request,
    // one whose comm was closed, a comm or garbage is refused here.
    if (!live_objects().contains(request, LiveKind::Request)) {
      TC_WARN("NET/topocoll: test: %p is not a pending topocoll request (completed, its comm "
              "closed, or not a request at all)", request);
      return ncclInvalidArgument;
    }
    auto* r = static_cast<PluginRequest*>(request);
    Comm* c = r->comm;
    std::lock_guard lock(c->mutex);
    if (!r->in_use) {
      TC_WARN("NET/topocoll: test: request %p is not pending (already completed?)", request);
      return ncclInvalidArgument;
    }
    bool finished = false;
    size_t bytes[NCCL_NET_MAX_RECVS] = {};
    net::NetStatus s = c->send ? c->send->test(r->request, &finished, bytes)
                               : c->recv->test(r->request, &finished, bytes);
    if (!s.ok()) {
      ncclResult_t code = to_nccl(s.code);
      if (!c->warned) report("test", s);
      c->warned = true;
      return code;
    }
    if (!finished) return ncclSuccess;
    if (sizes)
      for (int i = 0; i < r->count; ++i) sizes[i] = int(std::min<size_t>(bytes[i], INT_MAX));
    release_slot(*r);
    *done = 1;
    return ncclSuccess;
  });
}

namespace {
// Null is nothing to close, as in NCCL's Socket transport: NCCL's bootstrap closes its
// ring's comms and listener unlooked (bootstrap.cc bootstrapClose), null when its init
// ended before they were made, and an error would end NCCL's teardown there.
ncclResult_t close_comm(void* p, const char* call) {
  if (!p) return ncclSuccess;
  return guarded(call, [&] {
    Comm* c = as_comm(p, call);
    if (!c || !live_objects().remove(c)) return ncclInvalidArgument;
    {
      std::lock_guard lock(c->mutex);
      for (auto& r : c->requests)
        if (r.in_use) release_slot(r);  // its requests die with it
    }
    c->tag = 0;
    delete c;  // joins the connection's progress threads, closes its sockets
    return ncclSuccess;
  });
}
}  // namespace

Abandoned abandon_unfinished(const void* owner) {
  Abandoned n;
  for (const void* p : live_objects().take_owned(LiveKind::Connecting, owner)) {
    delete static_cast<const PendingConnect*>(p);  // closes the attempt's socket
    ++n.connects;
  }
  for (const void* p : live_objects().take_owned(LiveKind::Listen, owner)) {
    delete static_cast<const ListenComm*>(p);  // closes the listening socket
    ++n.listeners;
  }
  if (n.connects || n.listeners)
    TC_INFO(NCCL_NET, "NET/topocoll: finalize closed %zu connection attempt(s) and %zu listener(s) NCCL stopped driving",
            n.connects, n.listeners);
  return n;
}

ncclResult_t close_send(void* send_comm) { return close_comm(send_comm, "closeSend"); }
ncclResult_t close_recv(void* recv_comm) { return close_comm(recv_comm, "closeRecv"); }

ncclResult_t close_listen(void* listen_comm) {
  if (!listen_comm) return ncclSuccess;  // as close_comm
  return guarded("closeListen", [&] {
    ListenComm* l = as_listen_comm(listen_comm, "closeListen");
    if (!l || !live_objects().remove(l)) return ncclInvalidArgument;
    l->tag = 0;
    delete l;
    return ncclSuccess;
  });
}

}  // namespace topocoll::plugin::socket_net
