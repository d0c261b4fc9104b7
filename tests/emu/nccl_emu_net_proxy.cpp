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

struct CommNet {
  void* ctx = nullptr;
  int rank = 0;
  int device = 0;
  std::string error;  // sticky: the first plugin error on any of its connections
  bool closing = false, closed = false;
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

}  // namespace

struct NetProxy::State {
  const NetPlugin* plugin = nullptr;
  std::mutex mutex;
  std::condition_variable work;     // the proxy thread waits here
  std::condition_variable changed;  // callers wait here
  std::map<CommKey, CommNet> comms;
  std::map<MessageKey, std::unique_ptr<Connection>> connections;
  std::deque<SetupRequest> setups;  // waiting for their communicator or for the proxy
  std::vector<ControlMessage> controls_out;  // sent by the proxy thread without the lock

  const ncclNet_v11_t& net() const { return *plugin->net; }

  // --- helpers, all called with `mutex` held ---------------------------------------------
  void fail(CommNet& comm, Connection* c, const std::string& message) {
    if (c) c->phase = Phase::Failed;
    if (comm.error.empty()) {
      comm.error = message;
      net_plugin_logger(NCCL_LOG_WARN, 0, __FILE__, __LINE__, "%s", message.c_str());
    }
    changed.notify_all();
  }
  bool check(CommNet& comm, Connection* c, ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return true;
    fail(comm, c, std::string("NET/") + net().name + ": " + call + " returned " + result_name(r) +
                      (c ? " on " + describe_key(c->key) : std::string()) +
                      " (NCCL's proxy fails the operation here: transport/net.cc)");
    return false;
  }
  Connection& connection(const MessageKey& key, bool sender) {
    auto& c = connections[key];
    if (!c) {
      c = std::make_unique<Connection>();
      c->key = key;
      c->sender = sender;
      c->phase = sender ? Phase::NeedSetup : Phase::AwaitSetup;
    }
    return *c;
  }
  // A setup message over the emulation's Unix sockets (NCCL's bootstrap): the control kind
  // travels as the key's channel, the data connection's channel first in the payload.
  void control(const std::string& address, Channel kind, const MessageKey& key,
               const void* data, std::size_t bytes) {
    ControlMessage m{address, key, {}};
    m.key.channel = kind;
    const std::int32_t channel = std::int32_t(key.channel);
    m.payload.resize(sizeof channel + bytes);
    std::memcpy(m.payload.data(), &channel, sizeof channel);
    if (bytes) std::memcpy(m.payload.data() + sizeof channel, data, bytes);
    controls_out.push_back(std::move(m));
  }

  // sendProxySetup / recvProxySetup: the device's properties, as NCCL checks them.
  bool properties_ok(CommNet& comm, Connection* c) {
    ncclNetProperties_v11_t props{};
    if (!check(comm, c, net().getProperties(comm.device, &props), "getProperties")) return false;
    if (props.maxP2pBytes == 0 || props.maxP2pBytes > kMaxNetSizeBytes) {
      fail(comm, c, "NET/" + std::string(net().name) + ": getProperties returned maxP2pBytes " +
                        std::to_string(props.maxP2pBytes) + " (NCCL refuses 0 and above 1 TiB)");
      return false;
    }
    // transport/net.cc shares a comm among p2p connections and groups their receives when
    // maxRecvs > 1 (NCCL_NET_SHARED_COMMS defaults to 1). The emulation opens one comm per
    // connection and posts one receive at a time, so it would not see what NCCL then does:
    // refuse rather than pass a plugin the real proxy would drive differently.
    if (props.maxRecvs != 1) {
      fail(comm, c, "NET/" + std::string(net().name) + ": getProperties returned maxRecvs " +
                        std::to_string(props.maxRecvs) +
                        " (NCCL 2.28 would share comms between p2p connections and group their "
                        "receives, which this emulation does not model)");
      return false;
    }
    if (!(props.ptrSupport & NCCL_PTR_HOST)) {
      fail(comm, c, "NET/" + std::string(net().name) +
                        ": the device does not take host memory (NCCL_PTR_HOST); the emulation "
                        "has no GPU memory to offer instead");
      return false;
    }
    if (c) c->device_handle = nullptr;
    return true;
  }
  bool register_buffers(CommNet& comm, Connection& c) {
    ncclNetProperties_v11_t props{};
    if (!check(comm, &c, net().getProperties(comm.device, &props), "getProperties")) return false;
    for (int p = 0; p < kProtocols; ++p) {
      c.buffers[p].assign(step_bytes(Protocol(p)) * kSteps, std::byte{0});
      if (!check(comm, &c, net().regMr(c.net_comm, c.buffers[p].data(), c.buffers[p].size(),
                                       NCCL_PTR_HOST, &c.mhandles[p]),
                 "regMr"))
        return false;
      // net.cc: the sender asks for a device MR when connect gave a device handle, the
      // receiver when the device type is not host.
      const bool wants_device_mr = c.sender ? c.device_handle != nullptr
                                            : props.netDeviceType != NCCL_NET_DEVICE_HOST;
      if (wants_device_mr && net().getDeviceMr) {
        void* device_mr = nullptr;
        if (!check(comm, &c, net().getDeviceMr(c.net_comm, c.mhandles[p], &device_mr), "getDeviceMr"))
          return false;
      }
    }
    return true;
  }
  void set_attr(CommNet& comm, Connection& c, Protocol p) {
    if (!net().setNetAttr || c.attr_sent) return;
    ncclNetAttr_v11_t attr;
    std::memset(&attr, 0xff, sizeof attr);  // NCCL_NET_ATTR_INIT: every field undefined
    attr.proto = kNcclProto[p];
    check(comm, &c, net().setNetAttr(comm.ctx, &attr), "setNetAttr");
    c.attr_sent = true;
  }

  // --- the proxy's work ------------------------------------------------------------------
  bool serve_setups() {
    bool progressed = false;
    for (auto it = setups.begin(); it != setups.end();) {
      auto comm = comms.find(it->key.comm);
      if (comm == comms.end() || comm->second.closing) {
        ++it;  // its communicator is not made here yet
        continue;
      }
      Connection& c = connection(it->key, false);
      c.peer_address = it->reply_address;
      if (c.phase == Phase::AwaitSetup && properties_ok(comm->second, &c)) {
        if (check(comm->second, &c, net().listen(comm->second.ctx, comm->second.device, c.handle, &c.listen_comm),
                  "listen")) {
          control(c.peer_address, Channel::NetHandle, c.key, c.handle, sizeof c.handle);
          c.phase = Phase::Accepting;
        }
      }
      it = setups.erase(it);
      progressed = true;
    }
    return progressed;
  }

  bool advance(Connection& c) {
    auto found = comms.find(c.key.comm);
    if (found == comms.end()) return false;
    CommNet& comm = found->second;
    if (!comm.error.empty() || comm.closed) return false;
    switch (c.phase) {
      case Phase::NeedSetup: {
        if (!properties_ok(comm, &c)) return true;
        const std::string own = process_address();
        control(c.peer_address, Channel::NetSetup, c.key, own.data(), own.size());
        c.phase = Phase::AwaitHandle;
        return true;
      }
      case Phase::Connecting: {
        if (!check(comm, &c, net().connect(comm.ctx, comm.device, c.handle, &c.net_comm, &c.device_handle),
                   "connect"))
          return true;
        if (!c.net_comm) return false;  // ncclInProgress: NCCL calls again
        if (register_buffers(comm, c)) c.phase = Phase::Ready;
        return true;
      }
      case Phase::Accepting: {
        if (!check(comm, &c, net().accept(c.listen_comm, &c.net_comm, &c.device_handle), "accept")) return true;
        if (!c.net_comm) return false;
        // net.cc closes the listening comm as soon as the connection is accepted.
        const ncclResult_t closed = net().closeListen(c.listen_comm);
        c.listen_comm = nullptr;
        if (check(comm, &c, closed, "closeListen") && register_buffers(comm, c)) c.phase = Phase::Ready;
        return true;
      }
      case Phase::Ready: return c.sender ? progress_send(comm, c) : progress_receive(comm, c);
      default: return false;
    }
  }

  bool progress_send(CommNet& comm, Connection& c) {
    bool progressed = false;
    // Post: the next steps of the oldest messages, one slot each.
    for (Outgoing& m : c.outgoing) {
      if (c.in_flight.size() == kSteps) break;
      while (m.posted < m.steps && c.in_flight.size() < kSteps) {
        const std::size_t slot = std::size_t(c.steps_posted % kSteps);
        std::byte* buffer = c.buffers[m.protocol].data() + slot * step_bytes(m.protocol);
        const std::size_t size = piece(m.data.size(), m.protocol, m.posted);
        if (size) std::memcpy(buffer, m.data.data() + m.posted * step_bytes(m.protocol), size);
        set_attr(comm, c, m.protocol);
        void* request = nullptr;
        if (!check(comm, &c, net().isend(c.net_comm, buffer, size, c.key.source, c.mhandles[m.protocol],
                                         &c.phandles[slot], &request),
                   "isend"))
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
      if (!check(comm, &c, net().test(s.request, &done, &size), "test (send)")) return true;
      if (!done) break;
      if (size >= 0 && std::size_t(size) != s.size) {
        fail(comm, &c, "NET/" + std::string(net().name) + ": test reported " + std::to_string(size) +
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

  bool progress_receive(CommNet& comm, Connection& c) {
    bool progressed = false;
    for (auto& r : c.incoming) {
      if (c.in_flight.size() == kSteps) break;
      Incoming& m = *r;
      while (m.posted < m.steps && c.in_flight.size() < kSteps) {
        const std::size_t slot = std::size_t(c.steps_posted % kSteps);
        std::byte* buffer = c.buffers[m.protocol].data() + slot * step_bytes(m.protocol);
        // net.cc posts a whole step, cut to the operation's size.
        std::size_t size = std::min(step_bytes(m.protocol), m.bytes);
        void* data = buffer;
        int tag = c.key.source;
        void* mhandle = c.mhandles[m.protocol];
        void* phandle = &c.phandles[slot];
        set_attr(comm, c, m.protocol);
        void* request = m.protocol == kLL ? reinterpret_cast<void*>(kOptionalRecvCompletion) : nullptr;
        if (!check(comm, &c, net().irecv(c.net_comm, 1, &data, &size, &tag, &mhandle, &phandle, &request),
                   "irecv"))
          return true;
        if (!request) return progressed;
        c.in_flight.push_back({request, m.protocol, buffer, size, piece(m.bytes, m.protocol, m.posted),
                               m.posted * step_bytes(m.protocol), nullptr, r});
        ++m.posted;
        ++c.steps_posted;
        progressed = true;
      }
      if (m.posted < m.steps) break;
    }
    while (!c.in_flight.empty()) {
      Step& s = c.in_flight.front();
      int done = 0;
      int sizes[kProxyMaxSubs] = {};
      if (!check(comm, &c, net().test(s.request, &done, sizes), "test (receive)")) return true;
      if (!done) break;
      if (std::size_t(sizes[0]) != s.expect) {
        fail(comm, &c, describe_key(c.key) + ": a step of the message of " + std::to_string(s.receive->bytes) +
                           " bytes the receiver posted carried " + std::to_string(sizes[0]) + " bytes, not " +
                           std::to_string(s.expect) + " (the sender's message has another size)");
        return true;
      }
      if (s.expect) std::memcpy(s.receive->into + s.offset, s.slot, s.expect);  // the GPU reads the slot
      // Then NCCL tells the plugin the slot is free again, on the request test() completed.
      if (net().irecvConsumed &&
          !check(comm, &c, net().irecvConsumed(c.net_comm, 1, s.request), "irecvConsumed"))
        return true;
      if (++s.receive->done == s.receive->steps) {
        s.receive->finished = true;
        c.incoming.pop_front();
      }
      c.in_flight.pop_front();
      progressed = true;
    }
    if (progressed) changed.notify_all();
    return progressed;
  }

  // proxyFree: deregMr and close each connection of a closing communicator, then finalize.
  bool close_comms() {
    bool progressed = false;
    for (auto& [key, comm] : comms) {
      if (!comm.closing || comm.closed) continue;
      for (auto it = connections.begin(); it != connections.end();) {
        Connection& c = *it->second;
        if (c.key.comm != key) {
          ++it;
          continue;
        }
        if (c.net_comm) {
          for (int p = 0; p < kProtocols; ++p)
            if (c.mhandles[p]) check(comm, &c, net().deregMr(c.net_comm, c.mhandles[p]), "deregMr");
          check(comm, &c, c.sender ? net().closeSend(c.net_comm) : net().closeRecv(c.net_comm),
                c.sender ? "closeSend" : "closeRecv");
        }
        // A listener whose connection was never accepted is not closed here: NCCL's
        // recvProxyFree closes only connected receivers (2.28 transport/net.cc); the plugin's
        // finalize of the context, below, must take it back.
        it = connections.erase(it);
      }
      std::erase_if(setups, [&](const SetupRequest& s) { return s.key.comm == key; });
      check(comm, nullptr, net().finalize(comm.ctx), "finalize");
      comm.closed = true;
      progressed = true;
    }
    if (progressed) changed.notify_all();
    return progressed;
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      bool progressed = serve_setups();
      bool waiting_on_plugin = false;
      for (auto& [key, c] : connections) {
        progressed |= advance(*c);
        waiting_on_plugin |= !c->in_flight.empty() || c->phase == Phase::Connecting ||
                             c->phase == Phase::Accepting;
      }
      progressed |= close_comms();
      if (!controls_out.empty()) {
        auto out = std::move(controls_out);
        controls_out.clear();
        lock.unlock();
        for (const ControlMessage& m : out) send_control(m);
        lock.lock();
        continue;
      }
      if (progressed) continue;
      // Requests in flight are polled (as NCCL's progress thread does, if less eagerly);
      // otherwise the proxy sleeps until a caller or a setup message wakes it.
      if (waiting_on_plugin)
        work.wait_for(lock, std::chrono::microseconds(100));
      else
        work.wait_for(lock, std::chrono::milliseconds(50));
    }
  }

  void send_control(const ControlMessage& m) {
    try {
      send_message(m.address, m.key, m.payload.data(), m.payload.size(), timeout());
    } catch (const Failure& f) {
      std::lock_guard lock(mutex);
      MessageKey data_key = m.key;
      std::int32_t channel = 0;
      std::memcpy(&channel, m.payload.data(), sizeof channel);
      data_key.channel = Channel(channel);
      auto comm = comms.find(m.key.comm);
      auto c = connections.find(data_key);
      if (comm != comms.end())
        fail(comm->second, c == connections.end() ? nullptr : c->second.get(),
             "connection setup message for " + describe_key(data_key) + ": " + f.what());
    }
  }
};

NetProxy* NetProxy::active() {
  static NetProxy* const proxy = []() -> NetProxy* {
    const NetPlugin* plugin = net_plugin();
    if (!plugin) return nullptr;
    auto* p = new NetProxy;  // never destroyed: the proxy thread runs until the process exits
    p->state_ = new State;
    p->state_->plugin = plugin;
    net_plugin_logger(NCCL_LOG_INFO, 0, __FILE__, __LINE__, "NET/Plugin: Loaded net plugin %s (v11) from %s",
                      plugin->net->name, plugin->path.c_str());
    set_control_handler([p](const MessageKey& key, std::vector<std::byte> payload) {
      p->on_control(key, std::move(payload));
    });
    std::thread([s = p->state_] { s->run(); }).detach();
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

void NetProxy::open_comm(const CommKey& comm, int rank, int device) {
  State& s = *state_;
  const ncclNet_v11_t& net = s.net();
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
  for (int d = 0; d < devices; ++d) {
    ncclNetProperties_v11_t props{};
    const ncclResult_t p = net.getProperties(d, &props);
    std::string wrong;
    if (p != ncclSuccess) wrong = std::string(": getProperties returned ") + result_name(p);
    else if (!props.name) wrong = " has no name";
    else if (!names.insert(props.name).second) wrong = std::string(" repeats the name ") + props.name;
    if (!wrong.empty())
      throw Failure(p == ncclSuccess ? ncclInternalError : p,
                    "NET/" + std::string(net.name) + ": device " + std::to_string(d) + wrong);
  }
  net_plugin_logger(NCCL_LOG_INFO, 0, __FILE__, __LINE__, "Using network %s", net.name);
  std::lock_guard lock(s.mutex);
  CommNet& c = s.comms[comm];
  c = CommNet{};
  c.ctx = ctx;
  c.rank = rank;
  c.device = device % devices;
  s.work.notify_all();
}

void NetProxy::close_comm(const CommKey& comm, std::chrono::milliseconds limit) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  auto it = s.comms.find(comm);
  if (it == s.comms.end()) return;
  const auto drained = [&] {
    if (!it->second.error.empty()) return true;
    for (const auto& [key, c] : s.connections)
      if (key.comm == comm && c->sender && (!c->outgoing.empty() || !c->in_flight.empty())) return false;
    return true;
  };
  const bool ok = s.changed.wait_for(lock, limit, drained);
  it->second.closing = true;
  s.work.notify_all();
  s.changed.wait(lock, [&] { return it->second.closed; });
  const std::string error = it->second.error;
  s.comms.erase(it);
  if (!error.empty()) throw Failure(ncclSystemError, error);
  if (!ok)
    throw Failure(ncclSystemError, "ncclCommDestroy: communicator " + describe(comm) +
                                       " still had sends in flight over the net plugin after the timeout");
}

void NetProxy::send(const std::string& address, const MessageKey& key, const void* data,
                    std::size_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  auto comm = s.comms.find(key.comm);
  if (comm == s.comms.end())
    throw Failure(ncclInternalError, "net proxy: " + describe_key(key) + " on a communicator it never opened");
  if (!comm->second.error.empty()) throw Failure(ncclSystemError, comm->second.error);
  Connection& c = s.connection(key, true);
  if (c.peer_address.empty()) c.peer_address = address;
  Outgoing m;
  const auto* p = static_cast<const std::byte*>(data);
  m.data.assign(p, p + bytes);
  m.protocol = protocol_for(bytes);
  m.steps = steps_for(bytes, m.protocol);
  c.outgoing.push_back(std::move(m));
  s.work.notify_all();
}

void NetProxy::receive(const MessageKey& key, void* into, std::size_t bytes,
                       std::chrono::milliseconds limit) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  auto comm = s.comms.find(key.comm);
  if (comm == s.comms.end())
    throw Failure(ncclInternalError, "net proxy: " + describe_key(key) + " on a communicator it never opened");
  auto r = std::make_shared<Incoming>();
  r->into = static_cast<std::byte*>(into);
  r->bytes = bytes;
  r->protocol = protocol_for(bytes);
  r->steps = steps_for(bytes, r->protocol);
  Connection& c = s.connection(key, false);
  c.incoming.push_back(r);
  s.work.notify_all();
  const bool arrived = s.changed.wait_for(lock, limit, [&] { return r->finished || !comm->second.error.empty(); });
  if (!comm->second.error.empty()) throw Failure(ncclSystemError, comm->second.error);
  if (!arrived) {
    static const char* const phases[] = {"setup not sent", "waiting for the receiver's handle", "connecting",
                                         "waiting for the sender's setup", "accepting", "connected", "failed"};
    std::erase(c.incoming, r);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", double(limit.count()) / 1000.0);
    throw Failure(ncclSystemError, std::string("timed out after ") + seconds + " s (TOPOCOLL_EMU_TIMEOUT_S) waiting for " +
                                       describe_key(key) + " (" + std::to_string(bytes) + " bytes, " +
                                       kProtocolNames[r->protocol] + ", " + std::to_string(r->done) + "/" +
                                       std::to_string(r->steps) + " steps) over the net plugin; connection " +
                                       phases[int(c.phase)]);
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
    s.setups.push_back({key, std::string(reinterpret_cast<const char*>(body), length)});
  } else if (wire.channel == Channel::NetHandle) {
    auto it = s.connections.find(key);
    if (it == s.connections.end() || it->second->phase != Phase::AwaitHandle) return;
    std::memcpy(it->second->handle, body, std::min(length, sizeof it->second->handle));
    it->second->phase = Phase::Connecting;
  }
  s.work.notify_all();
}

}  // namespace topocoll::emu
