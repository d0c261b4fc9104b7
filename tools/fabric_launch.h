// Ranks inside an emulated fabric (docs/fabric.md), for `bench --fabric` and `accept
// --fabric`: each in its endpoint's host namespace under the host's name, bound to its NIC
// address, meeting over the management network; where routes stripe (NAP), each
// connection gets one lane per path, marked so the kernel sends lane j on path j, and every
// message spreads evenly over them as the model assumes. open_fabric_for_launch is also how
// `fabric exec` and `rank-exec` open the fabric they enter.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/env.h"
#include "exec/local_launcher.h"
#include "fabric/fabric_lock.h"
#include "fabric/live_fabric.h"
#include "net/network_namespace.h"

namespace topocoll::cli {

// A fabric opened to launch ranks into: its entry lock taken before its record is read and
// held until every rank runs inside (fabric_launch hands it to LaunchOptions::started), so no
// `fabric down` (nor a down and up of the same name) comes between what the launcher read
// and its ranks' entering: one opened but not yet entered would run on in a namespace no
// name reaches.
struct FabricForLaunch {
  std::shared_ptr<std::unique_ptr<fabric::FabricEntryLock>> entering;
  fabric::LiveFabric fabric;
};

inline FabricForLaunch open_fabric_for_launch(const std::string& name) {
  const std::string resolved = fabric::LiveFabric::open(name).name();  // the one fabric, when none is named
  auto entering =
      std::make_shared<std::unique_ptr<fabric::FabricEntryLock>>(std::make_unique<fabric::FabricEntryLock>(resolved));
  return {std::move(entering), fabric::LiveFabric::open(resolved)};
}

inline exec::LaunchOptions fabric_launch(
    const FabricForLaunch& opened, const std::vector<int>& endpoints,
    const std::function<std::vector<std::string>(const fabric::FabricEndpoint&)>& extra_args) {
  const fabric::LiveFabric& f = opened.fabric;
  const auto& plan = f.plan();
  exec::LaunchOptions launch;
  launch.started = [entering = opened.entering] { entering->reset(); };
  launch.bootstrap_host = plan.management_address;
  launch.bootstrap_netns_path = net::netns_path(plan.namespaces[plan.management_ns].name);
  std::string marks;
  for (uint32_t m : plan.lane_marks) marks += (marks.empty() ? "" : ",") + std::to_string(m);
  for (int endpoint : endpoints) {
    const auto& e = plan.endpoints.at(endpoint);
    exec::RankPlacement p;
    p.netns_path = net::netns_path(plan.ns_of(e).name);
    p.hostname = e.host;
    p.extra_args = extra_args(e);
    p.extra_env = {"TOPOCOLL_FABRIC=" + f.name(), "TOPOCOLL_FABRIC_ENDPOINT=" + e.id};
    if (!marks.empty()) {
      p.extra_env.push_back("TOPOCOLL_NET_LANE_MARKS=" + marks);
      // What the user set wins; the rest is what the model's NAP striping assumes.
      const config::Env& env = config::env();
      if (!env.setting("TOPOCOLL_NET_SOCKETS_PER_CONN").is_set())
        p.extra_env.push_back("TOPOCOLL_NET_SOCKETS_PER_CONN=" + std::to_string(plan.lane_marks.size()));
      if (!env.setting("TOPOCOLL_NET_MIN_STRIPE_BYTES").is_set())
        p.extra_env.push_back("TOPOCOLL_NET_MIN_STRIPE_BYTES=1");
      // Every message stripes: the eager channel is one socket (lane 0's path), so small
      // messages would take one local switch of k.
      if (!env.setting("TOPOCOLL_NET_EAGER_BYTES").is_set()) p.extra_env.push_back("TOPOCOLL_NET_EAGER_BYTES=0");
    }
    launch.placements.push_back(std::move(p));
  }
  return launch;
}

}  // namespace topocoll::cli
