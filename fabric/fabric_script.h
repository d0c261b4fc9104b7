// A fabric plan as iproute2 commands: one batch for the root namespace (the namespaces and
// every veth pair, created directly inside their namespaces), and per namespace the sysctls,
// an `ip -batch` (links, addresses, rules, routes) and a `tc -batch` (a tbf shaper on every
// cable end: each end shapes the direction that leaves it). Pure text, tested as such.
// Interface names come from the topology file, so each follows the keyword that makes it a
// name (`name`, `peer name`, `dev`): a NIC called `alias`, `up` or `netns` is never read by
// `ip` as one of its own words.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fabric/fabric_plan.h"

namespace topocoll::fabric {

struct Sysctl {
  std::string path;  // below /proc/sys, e.g. "net/ipv4/ip_forward"
  std::string value;
  bool optional = false;  // absent on some kernels: skipped, not an error
};

struct NamespaceScript {
  std::vector<Sysctl> sysctls;
  std::string links;   // ip batch: links up, MTU, addresses, bridge ports
  std::string rules;   // ip batch: policy rules
  std::string routes;  // ip batch: every table's routes ("replace", so re-runnable)
  std::string shapers; // tc batch
};

std::string root_batch(const FabricPlan& plan);
NamespaceScript namespace_script(const FabricPlan& plan, int ns);

// tc arguments (after "tc -n NS") that shape one cable end to `mbit`: "qdisc replace dev X
// root tbf rate ... burst ... limit ... peakrate ... mtu ...". The bucket holds two frames or
// 2 ms of data; the queue 16 MiB (or 2 s of data): a flow arriving from a faster link, or
// several sharing one, queue instead of losing packets — the lossless fabric the model
// assumes, which real switches get from PFC or ECN. The senders' socket buffers bound what is
// ever queued. The peak bucket holds one frame plus `peak_slack_us` of the cable's data.
std::vector<std::string> shaper_arguments(const std::string& device, double mbit, int mtu,
                                          double peak_slack_us);

}  // namespace topocoll::fabric
