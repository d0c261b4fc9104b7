#include "tests/emu/nccl_emu_net_proxy.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/emu/nccl_emu_comm.h"
#include "tests/emu/nccl_emu_failure.h"
#include "tests/emu/nccl_emu_net_plugin.h"
#include "tests/emu/nccl_emu_transport.h"

namespace topocoll::emu {
namespace {

// NCCL 2.28.9's constants (src/include/device.h, src/init.cc, src/enqueue.cc,
// src/include/plugin/nccl_net.h).
constexpr int kSteps = 8;                                  // NCCL_STEPS
constexpr std::size_t kSimpleStep = (std::size_t(1) << 22) / kSteps;  // DEFAULT_BUFFSIZE / steps
constexpr std::size_t kLLStep = 8 * 512 * kSteps * 16 / kSteps;       // DEFAULT_LL_BUFFSIZE / steps
constexpr std::size_t kLLThreshold = 16384;                // NCCL_P2P_LL_THRESHOLD
constexpr std::size_t kMaxNetSizeBytes = std::size_t(1) << 40;  // NCCL_MAX_NET_SIZE_BYTES
constexpr std::uintptr_t kOptionalRecvCompletion = 0x1;   // NCCL_NET_OPTIONAL_RECV_COMPLETION
constexpr int kProxyMaxSubs = 64;                          // NCCL_PROXY_MAX_SUBS (MAXCHANNELS)

enum Protocol { kLL = 0, kSimple = 1, kProtocols = 2 };
const char* const kProtocolNames[kProtocols] = {"LL", "SIMPLE"};
// ncclProtocol numbering, as NCCL passes it in ncclNetAttr_v11_t::proto.
const std::uint32_t kNcclProto[kProtocols] = {0, 2};

std::size_t step_bytes(Protocol p) { return p == kLL ? kLLStep : kSimpleStep; }
Protocol protocol_for(std::size_t bytes) { return bytes <= kLLThreshold ? kLL : kSimple; }
std::size_t steps_for(std::size_t bytes, Protocol p) {
  return bytes == 0 ? 1 : (bytes + step_bytes(p) - 1) / step_bytes(p);
}
// Bytes of step i of a message of `bytes`.
std::size_t piece(std::size_t bytes, Protocol p, std::size_t i) {
  if (bytes == 0) return 0;
  return std::min(step_bytes(p), bytes - i * step_bytes(p));
}

std::string describe_key(const MessageKey& key) {
  return "communicator " + describe(key.comm) + " " + channel_name(key.channel) + " rank " +
         std::to_string(key.source) + " -> " + std::to_string(key.destination);
}

struct Outgoing {
  std::vector<std::byte> data;
  Protocol protocol = kSimple;
  std::size_t steps = 1, posted = 0, done = 0;
};

struct Incoming {
  std::byte* into = nullptr;
  std::size_t bytes = 0;
  Protocol protocol = kSimple;
  std::size_t steps = 1, posted = 0, done = 0;
  bool finished = false;
  bool abandoned = false;  // its receiver timed out: the bytes go nowhere
};

// A posted isend or irecv, oldest first per connection (NCCL tests them in that order).
struct Step {
  void* request = nullptr;
  Protocol protocol = kSimple;
  std::byte* slot = nullptr;
  std::size_t size = 0;      // posted
  std::size_t expect = 0;    // bytes this step carries
  std::size_t offset = 0;    // into the message
  Outgoing* message = nullptr;
  std::shared_ptr<Incoming> receive;
};

enum class Phase { NeedSetup, AwaitHandle, Connecting, AwaitSetup, Accepting, Ready, Failed };

struct Connection {
  MessageKey key;
  bool sender = false;
  Phase phase = Phase::NeedSetup;
  std::string peer_address;  // sender: where the setup goes; receiver: where the handle goes
  alignas(8) char handle[NCCL_NET_HANDLE_MAXSIZE] = {};  // the same memory at every connect
  void* listen_comm = nullptr;
  void* net_comm = nullptr;
  ncclNetDeviceHandle_v11_t* device_handle = nullptr;
  std::vector<std::byte> buffers[kProtocols];
  void* mhandles[kProtocols] = {};
  void* phandles[kSteps] = {};  // profiler handles, as NCCL passes them
  std::uint64_t steps_posted = 0;
  std::deque<Outgoing> outgoing;
  std::deque<std::shared_ptr<Incoming>> incoming;
  std::deque<Step> in_flight;
  bool attr_sent = false;
};

struct ControlMessage {
  std::string address;
  MessageKey key;  // its channel is the control kind
  std::vector<std::byte> payload;
};

struct SetupRequest {
  MessageKey key;  // of the data connection
  std::string reply_address;
};

// NCCL's ncclProxyState: one per communicator, shared by the children it splits when it
// was made with splitShare=1 (init.cc: the parent's config decides). Its service thread sets
// connections up and frees them (proxy.cc ncclProxyService: sendProxySetup/Connect,
// recvProxySetup/Connect, proxyFree); its progress thread moves the data (ncclProxyProgress:
// sendProxyProgress, recvProxyProgress). The plugin is called without the emulation's lock,
// so a plugin sees the concurrency NCCL gives it.
struct Proxy {
  void* ctx = nullptr;
  int device = 0;
  int members = 0;    // communicators (and ranks) it serves
  std::string error;  // sticky: the first plugin error on any of its connections
  // Its code, as NCCL's proxy keeps the plugin's ncclResult_t for ncclCommGetAsyncError
  // (proxy.cc): ncclRemoteError for a dead peer, ncclInvalidUsage for a truncation.
  ncclResult_t error_code = ncclSuccess;
  bool stopping = false, progress_stopping = false;
  std::map<MessageKey, std::unique_ptr<Connection>> connections;
  std::vector<ControlMessage> controls_out;  // the service thread's, sent without the lock
  std::condition_variable service_work, progress_work;
  std::thread service, progress;
};

// A communicator's rank of this process.
using Member = std::pair<CommKey, int>;

}  // namespace

struct NetProxy::State {
  const NetPlugin* plugin = nullptr;
  std::mutex mutex;                  // the emulation's bookkeeping; never held over a plugin call
  std::condition_variable changed;   // callers wait here
  std::map<Member, std::shared_ptr<Proxy>> members;
  std::deque<SetupRequest> setups;   // waiting for their communicator or for its service thread

  const ncclNet_v11_t& net() const { return *plugin->net; }

  // --- helpers, all called with `mutex` held ---------------------------------------------
  Proxy* proxy_of(const CommKey& comm, int rank) {
    auto it = members.find({comm, rank});
    return it == members.end() ? nullptr : it->second.get();
  }
  void fail(Proxy& p, Connection* c, const std::string& message, ncclResult_t code = ncclInternalError) {
    if (c) c->phase = Phase::Failed;
    if (p.error.empty()) {
      p.error = message;
      p.error_code = code;
      net_plugin_logger(NCCL_LOG_WARN, 0, __FILE__, __LINE__, "%s", message.c_str());
    }
    changed.notify_all();
  }
  bool check(Proxy& p, Connection* c, ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return true;
    fail(p, c, std::string("NET/") + net().name + ": " + call + " returned " + result_name(r) +
                   (c ? " on " + describe_key(c->key) : std::string()) +
                   " (NCCL's proxy fails the operation here: transport/net.cc)",
         r);
    return false;
  }
  // One plugin call, made without the lock (as NCCL's proxy threads make it), then checked.
  // False too when another connection of the proxy failed meanwhile: its members' waits have
  // ended with that error, so nothing more is delivered to them.
  template <class Call>
  bool call(std::unique_lock<std::mutex>& lock, Proxy& p, Connection* c, const char* name, Call&& f) {
    lock.unlock();
    const ncclResult_t r = f();
    lock.lock();
    return check(p, c, r, name) && p.error.empty();
  }
  Connection& connection(Proxy& p, const MessageKey& key, bool sender) {
    auto& c = p.connections[key];
    if (!c) {
      c = std::make_unique<Connection>();
      c->key = key;
      c->sender = sender;
      c->phase = sender ? Phase::NeedSetup : Phase::AwaitSetup;
      p.service_work.notify_all();
    }
    return *c;
  }
  // A setup message over the emulation's Unix sockets (NCCL's bootstrap): the control kind
  // travels as the key's channel, the data connection's channel first in the payload.
  void control(Proxy& p, const std::string& address, Channel kind, const MessageKey& key,
               const void* data, std::size_t bytes) {
    ControlMessage m{address, key, {}};
    m.key.channel = kind;
    const std::int32_t channel = std::int32_t(key.channel);
    m.payload.resize(sizeof channel + bytes);
    std::memcpy(m.payload.data(), &channel, sizeof channel);
    if (bytes) std::memcpy(m.payload.data() + sizeof channel, data, bytes);
    p.controls_out.push_back(std::move(m));
  }

  // sendProxySetup / recvProxySetup: the device's properties, as NCCL checks them.
  bool properties_ok(std::unique_lock<std::mutex>& lock, Proxy& p, Connection* c) {
    ncclNetProperties_v11_t props{};
    if (!call(lock, p, c, "getProperties", [&] { return net().getProperties(p.device, &props); })) return false;
    if (props.maxP2pBytes == 0 || props.maxP2pBytes > kMaxNetSizeBytes) {
      fail(p, c, "NET/" + std::string(net().name) + ": getProperties returned maxP2pBytes " +
                     std::to_string(props.maxP2pBytes) + " (NCCL refuses 0 and above 1 TiB)");
      return false;
    }
    // transport/net.cc shares a comm among p2p connections and groups their receives when
    // maxRecvs > 1 (NCCL_NET_SHARED_COMMS defaults to 1). The emulation opens one comm per
    // connection and posts one receive at a time, so it would not see what NCCL then does:
    // refuse rather than pass a plugin the real proxy would drive differently.
    if (props.maxRecvs != 1) {
      fail(p, c, "NET/" + std::string(net().name) + ": getProperties returned maxRecvs " +
                     std::to_string(props.maxRecvs) +
                     " (NCCL 2.28 would share comms between p2p connections and group their "
                     "receives, which this emulation does not model)");
      return false;
    }
    if (!(props.ptrSupport & NCCL_PTR_HOST)) {
      fail(p, c, "NET/" + std::string(net().name) +
                     ": the device does not take host memory (NCCL_PTR_HOST); the emulation "
                     "has no GPU memory to offer instead");
      return false;
    }
    if (c) c->device_handle = nullptr;
    return true;
  }
  bool register_buffers(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c) {
    ncclNetProperties_v11_t props{};
    if (!call(lock, p, &c, "getProperties", [&] { return net().getProperties(p.device, &props); })) return false;
    for (int k = 0; k < kProtocols; ++k) {
      c.buffers[k].assign(step_bytes(Protocol(k)) * kSteps, std::byte{0});
      if (!call(lock, p, &c, "regMr", [&] {
            return net().regMr(c.net_comm, c.buffers[k].data(), c.buffers[k].size(), NCCL_PTR_HOST, &c.mhandles[k]);
          }))
        return false;
      // net.cc: the sender asks for a device MR when connect gave a device handle, the
      // receiver when the device type is not host.
      const bool wants_device_mr = c.sender ? c.device_handle != nullptr
                                            : props.netDeviceType != NCCL_NET_DEVICE_HOST;
      if (wants_device_mr && net().getDeviceMr) {
        void* device_mr = nullptr;
        if (!call(lock, p, &c, "getDeviceMr", [&] { return net().getDeviceMr(c.net_comm, c.mhandles[k], &device_mr); }))
          return false;
      }
    }
    return true;
  }
  bool set_attr(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c, Protocol k) {
    if (!net().setNetAttr || c.attr_sent) return true;
    c.attr_sent = true;
    ncclNetAttr_v11_t attr;
    std::memset(&attr, 0xff, sizeof attr);  // NCCL_NET_ATTR_INIT: every field undefined
    attr.proto = kNcclProto[k];
    return call(lock, p, &c, "setNetAttr", [&] { return net().setNetAttr(p.ctx, &attr); });
  }

  // --- the service thread ----------------------------------------------------------------
  // recvProxySetup for the senders' setup messages addressed to this proxy's members.
  bool serve_setups(std::unique_lock<std::mutex>& lock, Proxy& p) {
    bool progressed = false;
    for (;;) {
      auto it = std::find_if(setups.begin(), setups.end(), [&](const SetupRequest& s) {
        return proxy_of(s.key.comm, s.key.destination) == &p;
      });
      if (it == setups.end()) return progressed;
      const SetupRequest setup = *it;
      setups.erase(it);
      progressed = true;
      Connection& c = connection(p, setup.key, false);
      c.peer_address = setup.reply_address;
      if (c.phase != Phase::AwaitSetup || !properties_ok(lock, p, &c)) continue;
      if (call(lock, p, &c, "listen", [&] { return net().listen(p.ctx, p.device, c.handle, &c.listen_comm); })) {
        control(p, c.peer_address, Channel::NetHandle, c.key, c.handle, sizeof c.handle);
        c.phase = Phase::Accepting;
      }
    }
  }

  // sendProxySetup and sendProxyConnect / recvProxyConnect, again until they complete.
  bool set_up(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c) {
    switch (c.phase) {
      case Phase::NeedSetup: {
        if (!properties_ok(lock, p, &c)) return true;
        const std::string own = process_address();
        control(p, c.peer_address, Channel::NetSetup, c.key, own.data(), own.size());
        c.phase = Phase::AwaitHandle;
        return true;
      }
      case Phase::Connecting: {
        // The handle is the same memory on every call; nothing else writes it meanwhile.
        if (!call(lock, p, &c, "connect",
                  [&] { return net().connect(p.ctx, p.device, c.handle, &c.net_comm, &c.device_handle); }))
          return true;
        if (!c.net_comm) return false;  // ncclInProgress: NCCL calls again
        if (register_buffers(lock, p, c)) ready(p, c);
        return true;
      }
      case Phase::Accepting: {
        if (!call(lock, p, &c, "accept", [&] { return net().accept(c.listen_comm, &c.net_comm, &c.device_handle); }))
          return true;
        if (!c.net_comm) return false;
        // net.cc closes the listening comm as soon as the connection is accepted.
        void* listener = c.listen_comm;
        c.listen_comm = nullptr;
        if (call(lock, p, &c, "closeListen", [&] { return net().closeListen(listener); }) &&
            register_buffers(lock, p, c))
          ready(p, c);
        return true;
      }
      default: return false;
    }
  }
  void ready(Proxy& p, Connection& c) {
    c.phase = Phase::Ready;  // from here on only the progress thread calls the plugin for it
    p.progress_work.notify_all();
  }

  void send_controls(std::unique_lock<std::mutex>& lock, Proxy& p) {
    const std::vector<ControlMessage> out = std::move(p.controls_out);
    p.controls_out.clear();
    lock.unlock();
    std::vector<std::pair<const ControlMessage*, std::string>> failed;
    for (const ControlMessage& m : out) {
      try {
        send_message(m.address, m.key, m.payload.data(), m.payload.size(), timeout());
      } catch (const Failure& f) {
        failed.push_back({&m, f.what()});
      }
    }
    lock.lock();
    for (const auto& [m, what] : failed) {
      MessageKey data_key = m->key;
      std::int32_t channel = 0;
      std::memcpy(&channel, m->payload.data(), sizeof channel);
      data_key.channel = Channel(channel);
      auto c = p.connections.find(data_key);
      fail(p, c == p.connections.end() ? nullptr : c->second.get(),
           "connection setup message for " + describe_key(data_key) + ": " + what);
    }
  }

  // proxyFree (sendProxyFree / recvProxyFree): deregMr and close each connection.
  void free_connection(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c) {
    if (c.net_comm) {
      for (int k = 0; k < kProtocols; ++k)
        if (c.mhandles[k]) call(lock, p, &c, "deregMr", [&] { return net().deregMr(c.net_comm, c.mhandles[k]); });
      if (c.sender) call(lock, p, &c, "closeSend", [&] { return net().closeSend(c.net_comm); });
      else call(lock, p, &c, "closeRecv", [&] { return net().closeRecv(c.net_comm); });
    }
    // A listener whose connection was never accepted is not closed here: NCCL's
    // recvProxyFree closes only connected receivers (2.28 transport/net.cc); the plugin's
    // finalize of the context must take it back.
  }

  void serve(Proxy& p) {
    std::unique_lock lock(mutex);
    for (;;) {
      bool progressed = serve_setups(lock, p);
      bool waiting_on_plugin = false;
      if (p.error.empty())
        for (auto& [key, c] : p.connections) {  // members insert meanwhile; only this thread erases
          progressed |= set_up(lock, p, *c);
          waiting_on_plugin |= c->phase == Phase::Connecting || c->phase == Phase::Accepting;
          if (!p.error.empty()) break;
        }
      if (!p.controls_out.empty()) {
        send_controls(lock, p);
        continue;
      }
      if (p.stopping) break;
      if (progressed) continue;
      // An attempt under way is tried again soon (NCCL's service thread polls its async
      // operations); otherwise it sleeps until a member or a setup message wakes it.
      p.service_work.wait_for(lock, waiting_on_plugin ? std::chrono::microseconds(100)
                                                      : std::chrono::microseconds(50000));
    }
    // ncclProxyService's exit: the progress thread stopped first, then every connection freed.
    p.progress_stopping = true;
    p.progress_work.notify_all();
    lock.unlock();
    p.progress.join();
    lock.lock();
    auto connections = std::move(p.connections);
    p.connections.clear();
    for (auto& [key, c] : connections) free_connection(lock, p, *c);
  }

  // --- the progress thread ---------------------------------------------------------------
  bool progress_send(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c) {
    bool progressed = false;
    // Post: the next steps of the oldest messages, one slot each. Only this thread removes
    // messages, so an index and a reference stay valid while the lock is let go.
    for (std::size_t i = 0; i < c.outgoing.size() && c.in_flight.size() < kSteps; ++i) {
      Outgoing& m = c.outgoing[i];
      while (m.posted < m.steps && c.in_flight.size() < kSteps) {
        const std::size_t slot = std::size_t(c.steps_posted % kSteps);
        std::byte* buffer = c.buffers[m.protocol].data() + slot * step_bytes(m.protocol);
        const std::size_t size = piece(m.data.size(), m.protocol, m.posted);
        if (size) std::memcpy(buffer, m.data.data() + m.posted * step_bytes(m.protocol), size);
        if (!set_attr(lock, p, c, m.protocol)) return true;
        void* request = nullptr;
        if (!call(lock, p, &c, "isend", [&] {
              return net().isend(c.net_comm, buffer, size, c.key.source, c.mhandles[m.protocol], &c.phandles[slot],
                                 &request);
            }))
          return true;
        if (!request) return progressed;  // the plugin is busy: NCCL tries again later
        c.in_flight.push_back({request, m.protocol, buffer, size, size, 0, &m, nullptr});
        ++m.posted;
        ++c.steps_posted;
        progressed = true;
      }
      if (m.posted < m.steps) break;
    }
    // Test the oldest.
    while (!c.in_flight.empty()) {
      Step& s = c.in_flight.front();
      int done = 0, size = -1;
      if (!call(lock, p, &c, "test (send)", [&] { return net().test(s.request, &done, &size); })) return true;
      if (!done) break;
      if (size >= 0 && std::size_t(size) != s.size) {
        fail(p, &c, "NET/" + std::string(net().name) + ": test reported " + std::to_string(size) +
                        " bytes sent for an isend of " + std::to_string(s.size) + " on " + describe_key(c.key));
        return true;
      }
      Outgoing* m = s.message;
      c.in_flight.pop_front();
      if (++m->done == m->steps) c.outgoing.pop_front();  // sends complete in posting order
      progressed = true;
    }
    if (progressed) changed.notify_all();
    return progressed;
  }

  bool progress_receive(std::unique_lock<std::mutex>& lock, Proxy& p, Connection& c) {
    bool progressed = false;
    for (std::size_t i = 0; i < c.incoming.size() && c.in_flight.size() < kSteps; ++i) {
      const std::shared_ptr<Incoming> r = c.incoming[i];
      if (r->abandoned && r->posted == 0) {  // its receiver timed out before a step was posted
        c.incoming.erase(c.incoming.begin() + std::ptrdiff_t(i--));
        progressed = true;
        continue;
      }
      while (r->posted < r->steps && c.in_flight.size() < kSteps) {
        const std::size_t slot = std::size_t(c.steps_posted % kSteps);
        std::byte* buffer = c.buffers[r->protocol].data() + slot * step_bytes(r->protocol);
        // net.cc posts a whole step, cut to the operation's size.
        std::size_t size = std::min(step_bytes(r->protocol), r->bytes);
        void* data = buffer;
        int tag = c.key.source;
        void* mhandle = c.mhandles[r->protocol];
        void* phandle = &c.phandles[slot];
        if (!set_attr(lock, p, c, r->protocol)) return true;
        void* request = r->protocol == kLL ? reinterpret_cast<void*>(kOptionalRecvCompletion) : nullptr;
        if (!call(lock, p, &c, "irecv",
                  [&] { return net().irecv(c.net_comm, 1, &data, &size, &tag, &mhandle, &phandle, &request); }))
          return true;
        if (!request) return progressed;
        c.in_flight.push_back({request, r->protocol, buffer, size, piece(r->bytes, r->protocol, r->posted),
                               r->posted * step_bytes(r->protocol), nullptr, r});
        ++r->posted;
        ++c.steps_posted;
        progressed = true;
      }
      if (r->posted < r->steps) break;
    }
    while (!c.in_flight.empty()) {
      Step& s = c.in_flight.front();
      int done = 0;
      int sizes[kProxyMaxSubs] = {};
      if (!call(lock, p, &c, "test (receive)", [&] { return net().test(s.request, &done, sizes); })) return true;
      if (!done) break;
      if (std::size_t(sizes[0]) != s.expect) {
        fail(p, &c, describe_key(c.key) + ": a step of the message of " + std::to_string(s.receive->bytes) +
                        " bytes the receiver posted carried " + std::to_string(sizes[0]) + " bytes, not " +
                        std::to_string(s.expect) + " (the sender's message has another size)");
        return true;
      }
      // The GPU reads the slot (not into the memory of a receiver that gave up).
      if (s.expect && !s.receive->abandoned) std::memcpy(s.receive->into + s.offset, s.slot, s.expect);
      // Then NCCL tells the plugin the slot is free again, on the request test() completed.
      if (net().irecvConsumed &&
          !call(lock, p, &c, "irecvConsumed", [&] { return net().irecvConsumed(c.net_comm, 1, s.request); }))
        return true;
      if (++s.receive->done == s.receive->steps) {
        s.receive->finished = true;
        std::erase(c.incoming, s.receive);
      }
      c.in_flight.pop_front();
      progressed = true;
    }
    if (progressed) changed.notify_all();
    return progressed;
  }

  void progress(Proxy& p) {
    std::unique_lock lock(mutex);
    while (!p.progress_stopping) {
      bool progressed = false, waiting_on_plugin = false;
      if (p.error.empty())
        for (auto& [key, c] : p.connections) {  // the service thread erases none while this runs
          if (c->phase != Phase::Ready) continue;
          progressed |= c->sender ? progress_send(lock, p, *c) : progress_receive(lock, p, *c);
          waiting_on_plugin |= !c->in_flight.empty();
          if (!p.error.empty()) break;
        }
      if (progressed) continue;
      // Requests in flight are polled (as NCCL's progress thread does, if less eagerly);
      // otherwise it sleeps until a member posts a message.
      p.progress_work.wait_for(lock, waiting_on_plugin ? std::chrono::microseconds(100)
                                                       : std::chrono::microseconds(50000));
    }
  }

  void wake(Proxy& p) {
    p.service_work.notify_all();
    p.progress_work.notify_all();
  }
};

ncclResult_t NetProxy::async_error(const CommKey& comm, int rank) const {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto member = s.members.find({comm, rank});
  return member == s.members.end() || member->second->error.empty() ? ncclSuccess : member->second->error_code;
}

NetProxy* NetProxy::active() {
  static NetProxy* const proxy = []() -> NetProxy* {
    const NetPlugin* plugin = net_plugin();
    if (!plugin) return nullptr;
    auto* p = new NetProxy;  // never destroyed: its proxies' threads may run until the process exits
    p->state_ = new State;
    p->state_->plugin = plugin;
    net_plugin_logger(NCCL_LOG_INFO, 0, __FILE__, __LINE__, "NET/Plugin: Loaded net plugin %s (v11) from %s",
                      plugin->net->name, plugin->path.c_str());
    set_control_handler([p](const MessageKey& key, std::vector<std::byte> payload) {
      p->on_control(key, std::move(payload));
    });
    return p;
  }();
  return proxy;
}

namespace {
// NCCL passes its profiler's callback to init (ncclProfilerCallback); with no profiler
// plugin loaded it records nothing.
ncclResult_t profiler_callback(void** event_handle, int, void*, int64_t, void*) {
  if (event_handle) *event_handle = nullptr;
  return ncclSuccess;
}
}  // namespace

void NetProxy::open_comm(const CommKey& comm, int rank, int device, const std::optional<SharedFrom>& parent) {
  State& s = *state_;
  const ncclNet_v11_t& net = s.net();
  {
    std::lock_guard lock(s.mutex);
    if (s.members.count({comm, rank}))
      throw Failure(ncclInternalError, "net proxy: communicator " + describe(comm) + " rank " +
                                           std::to_string(rank) + " opened twice");
    // init.cc ncclNetInitFromParent: a child of a parent made with splitShare=1 takes the
    // parent's context and proxy; the plugin sees no init for it.
    if (parent) {
      auto shared = s.members.find({parent->comm, parent->rank});
      if (shared != s.members.end()) {
        s.members[{comm, rank}] = shared->second;
        ++shared->second->members;
        s.wake(*shared->second);  // setups may be waiting for this member
        return;
      }
    }
  }
  // plugin/net.cc: init per communicator; devices() the first time.
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  const ncclResult_t r = net.init(&ctx, comm.hi ^ comm.lo, &config, net_plugin_logger, profiler_callback);
  if (r != ncclSuccess)
    throw Failure(r, "NET/" + std::string(net.name) + ": init returned " + result_name(r));
  int devices = 0;
  const ncclResult_t d = net.devices(&devices);
  if (d != ncclSuccess || devices <= 0)
    throw Failure(d == ncclSuccess ? ncclSystemError : d,
                  "NET/" + std::string(net.name) + ": devices returned " + result_name(d) + " with " +
                      std::to_string(devices) + " devices");
  // graph/topo.cc ncclTopoPopulateNics: every device's properties, each found in NCCL's
  // topology XML by its name, so two devices of one name would become one NIC.
  std::set<std::string> names;
  for (int k = 0; k < devices; ++k) {
    ncclNetProperties_v11_t props{};
    const ncclResult_t p = net.getProperties(k, &props);
    std::string wrong;
    if (p != ncclSuccess) wrong = std::string(": getProperties returned ") + result_name(p);
    else if (!props.name) wrong = " has no name";
    else if (!names.insert(props.name).second) wrong = std::string(" repeats the name ") + props.name;
    if (!wrong.empty())
      throw Failure(p == ncclSuccess ? ncclInternalError : p,
                    "NET/" + std::string(net.name) + ": device " + std::to_string(k) + wrong);
  }
  net_plugin_logger(NCCL_LOG_INFO, 0, __FILE__, __LINE__, "Using network %s", net.name);
  auto proxy = std::make_shared<Proxy>();
  proxy->ctx = ctx;
  proxy->device = device % devices;
  proxy->members = 1;
  std::lock_guard lock(s.mutex);
  s.members[{comm, rank}] = proxy;
  // proxy.cc ncclProxyCreate: the service thread; ncclProxyProgressCreate: the progress one.
  proxy->progress = std::thread([&s, p = proxy.get()] { s.progress(*p); });
  proxy->service = std::thread([&s, p = proxy.get()] { s.serve(*p); });
}

void NetProxy::close_comm(const CommKey& comm, int rank, std::chrono::milliseconds limit) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  auto it = s.members.find({comm, rank});
  if (it == s.members.end()) return;
  const std::shared_ptr<Proxy> p = it->second;
  const auto drained = [&] {
    if (!p->error.empty()) return true;
    for (const auto& [key, c] : p->connections)
      if (key.comm == comm && key.source == rank && c->sender && (!c->outgoing.empty() || !c->in_flight.empty()))
        return false;
    return true;
  };
  const bool ok = s.changed.wait_for(lock, limit, drained);
  it = s.members.find({comm, rank});  // the lock was let go meanwhile
  if (it == s.members.end()) return;
  s.members.erase(it);
  s.changed.notify_all();  // a receive another thread still waits in ends
  std::erase_if(s.setups, [&](const SetupRequest& r) { return r.key.comm == comm && r.key.destination == rank; });
  if (--p->members == 0) {
    p->stopping = true;
    p->service_work.notify_all();
    lock.unlock();
    p->service.join();
    // init.cc commFree: ncclNetFinalize on the destroying thread, once the proxy is gone.
    const ncclResult_t r = s.net().finalize(p->ctx);
    lock.lock();
    s.check(*p, nullptr, r, "finalize");
  }
  if (!p->error.empty()) throw Failure(p->error_code, p->error);
  if (!ok)
    throw Failure(ncclSystemError, "ncclCommDestroy: communicator " + describe(comm) +
                                       " still had sends in flight over the net plugin after the timeout");
}

void NetProxy::send(const std::string& address, const MessageKey& key, const void* data,
                    std::size_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  Proxy* p = s.proxy_of(key.comm, key.source);
  if (!p) throw Failure(ncclInternalError, "net proxy: " + describe_key(key) + " on a communicator it never opened");
  if (!p->error.empty()) throw Failure(p->error_code, p->error);
  Connection& c = s.connection(*p, key, true);
  if (c.peer_address.empty()) c.peer_address = address;
  Outgoing m;
  const auto* bytes_in = static_cast<const std::byte*>(data);
  m.data.assign(bytes_in, bytes_in + bytes);
  m.protocol = protocol_for(bytes);
  m.steps = steps_for(bytes, m.protocol);
  c.outgoing.push_back(std::move(m));
  s.wake(*p);
}

void NetProxy::receive(const MessageKey& key, void* into, std::size_t bytes,
                       std::chrono::milliseconds limit) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  const auto member = s.members.find({key.comm, key.destination});
  if (member == s.members.end())
    throw Failure(ncclInternalError, "net proxy: " + describe_key(key) + " on a communicator it never opened");
  const std::shared_ptr<Proxy> p = member->second;  // alive even if another thread destroys the communicator
  auto r = std::make_shared<Incoming>();
  r->into = static_cast<std::byte*>(into);
  r->bytes = bytes;
  r->protocol = protocol_for(bytes);
  r->steps = steps_for(bytes, r->protocol);
  s.connection(*p, key, false).incoming.push_back(r);
  s.wake(*p);
  const auto destroyed = [&] { return !s.members.count({key.comm, key.destination}); };
  const bool arrived =
      s.changed.wait_for(lock, limit, [&] { return r->finished || !p->error.empty() || destroyed(); });
  if (r->finished) return;
  // Whatever ends the wait, no byte may land in `into` once this returns: the progress
  // thread drops the receive, or finishes its posted steps without copying.
  r->abandoned = true;
  if (!p->error.empty()) throw Failure(p->error_code, p->error);
  if (destroyed())
    throw Failure(ncclSystemError, "communicator " + describe(key.comm) + " destroyed or aborted by another thread "
                                   "while waiting for " + describe_key(key) + " over the net plugin");
  if (!arrived) {
    static const char* const phases[] = {"setup not sent", "waiting for the receiver's handle", "connecting",
                                         "waiting for the sender's setup", "accepting", "connected", "failed"};
    const auto c = p->connections.find(key);
    const Phase phase = c == p->connections.end() ? Phase::Failed : c->second->phase;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", double(limit.count()) / 1000.0);
    throw Failure(ncclSystemError, std::string("timed out after ") + seconds + " s (TOPOCOLL_EMU_TIMEOUT_S) waiting for " +
                                       describe_key(key) + " (" + std::to_string(bytes) + " bytes, " +
                                       kProtocolNames[r->protocol] + ", " + std::to_string(r->done) + "/" +
                                       std::to_string(r->steps) + " steps) over the net plugin; connection " +
                                       phases[int(phase)]);
  }
}

void NetProxy::on_control(const MessageKey& wire, std::vector<std::byte> payload) {
  State& s = *state_;
  std::int32_t channel = 0;
  if (payload.size() < sizeof channel) return;
  std::memcpy(&channel, payload.data(), sizeof channel);
  MessageKey key = wire;
  key.channel = Channel(channel);
  const std::byte* body = payload.data() + sizeof channel;
  const std::size_t length = payload.size() - sizeof channel;
  std::lock_guard lock(s.mutex);
  if (wire.channel == Channel::NetSetup) {
    // For the receiving rank, whose communicator may not be made here yet.
    s.setups.push_back({key, std::string(reinterpret_cast<const char*>(body), length)});
    if (Proxy* p = s.proxy_of(key.comm, key.destination)) p->service_work.notify_all();
  } else if (wire.channel == Channel::NetHandle) {
    Proxy* p = s.proxy_of(key.comm, key.source);
    if (!p) return;
    auto it = p->connections.find(key);
    if (it == p->connections.end() || it->second->phase != Phase::AwaitHandle) return;
    std::memcpy(it->second->handle, body, std::min(length, sizeof it->second->handle));
    it->second->phase = Phase::Connecting;
    p->service_work.notify_all();
  }
}

}  // namespace topocoll::emu
