// State of an RDMA device's port as libibverbs sees it, so that a NIC whose port is down is
// named as the cause instead of surfacing later as a connect timeout. Only built with
// TOPOCOLL_ENABLE_IBVERBS=ON; otherwise query_rdma_port() reports that nothing was checked.
#pragma once

#include <string>

namespace topocoll::net {

struct RdmaPortStatus {
  bool checked = false;     // false: built without libibverbs, nothing was asked
  bool listed = false;      // ibv_get_device_list names the device
  bool queried = false;     // ibv_query_port succeeded
  bool active = false;      // port state ACTIVE (or ACTIVE_DEFER)
  int port = 1;
  std::string state;        // "ACTIVE", "DOWN", "INIT", "ARMED", ...
  std::string link_layer;   // "InfiniBand" or "Ethernet"
  std::string detail;       // devices libibverbs lists, or why the query failed

  // One phrase for logs: "port 1 ACTIVE, Ethernet"; empty when nothing was checked.
  std::string describe() const;
  // Listed, queried and not active: the port is the reason traffic cannot flow.
  bool down() const { return queried && !active; }
};

RdmaPortStatus query_rdma_port(const std::string& device_name, int port = 1);

}  // namespace topocoll::net
