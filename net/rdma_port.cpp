#include "net/rdma_port.h"

#ifdef TOPOCOLL_HAVE_IBVERBS
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#endif

namespace topocoll::net {

std::string RdmaPortStatus::describe() const {
  if (!checked) return {};
  if (!listed) return "libibverbs lists no such device (" + detail + ")";
  if (!queried) return "port " + std::to_string(port) + " query failed: " + detail;
  return "port " + std::to_string(port) + " " + state + ", " + link_layer;
}

#ifdef TOPOCOLL_HAVE_IBVERBS

namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ::ibv_free_device_list(list); }
};
struct ContextCloser {
  void operator()(ibv_context* context) const { ::ibv_close_device(context); }
};

std::string state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "state " + std::to_string(int(state));
}

// IBV_LINK_LAYER_UNSPECIFIED comes from old providers, which are InfiniBand only.
std::string link_layer_name(uint8_t link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
}

}  // namespace

RdmaPortStatus query_rdma_port(const std::string& device_name, int port) {
  RdmaPortStatus status;
  status.checked = true;
  status.port = port;
  int count = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(::ibv_get_device_list(&count));
  if (!list) {
    status.detail = std::string("ibv_get_device_list failed: ") + std::strerror(errno);
    return status;
  }
  ibv_device* device = nullptr;
  std::string names;
  for (int i = 0; i < count; ++i) {
    const char* name = ::ibv_get_device_name(list.get()[i]);
    if (name && device_name == name) device = list.get()[i];
    names += (names.empty() ? "" : ", ") + std::string(name ? name : "?");
  }
  if (!device) {
    status.detail = names.empty() ? "it lists none" : "it lists " + names;
    return status;
  }
  status.listed = true;
  std::unique_ptr<ibv_context, ContextCloser> context(::ibv_open_device(device));
  if (!context) {
    status.detail = std::string("ibv_open_device: ") + std::strerror(errno);
    return status;
  }
  ibv_port_attr attr{};
  if (int rc = ::ibv_query_port(context.get(), uint8_t(port), &attr); rc != 0) {
    status.detail = std::string("ibv_query_port: ") + std::strerror(rc > 0 ? rc : errno);
    return status;
  }
  status.queried = true;
  status.active = attr.state == IBV_PORT_ACTIVE || attr.state == IBV_PORT_ACTIVE_DEFER;
  status.state = state_name(attr.state);
  status.link_layer = link_layer_name(attr.link_layer);
  return status;
}

#else

RdmaPortStatus query_rdma_port(const std::string&, int port) {
  RdmaPortStatus status;
  status.port = port;
  return status;
}

#endif

}  // namespace topocoll::net
