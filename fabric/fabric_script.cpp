#include "fabric/fabric_script.h"

#include <algorithm>
#include <cmath>

namespace topocoll::fabric {
namespace {

std::string route_line(const Route& r, int table) {
  std::string line = "route replace " + r.destination + " table " + std::to_string(table) + " proto static";
  if (!r.source.empty()) line += " src " + r.source;
  if (r.hops.size() == 1) {
    line += " via " + r.hops[0].via + " dev " + r.hops[0].device + " onlink";
  } else {
    for (const auto& h : r.hops)
      line += " nexthop via " + h.via + " dev " + h.device + " weight " + std::to_string(h.weight) + " onlink";
  }
  return line + "\n";
}

std::string rule_line(const Rule& r) {
  std::string line = "rule add pref " + std::to_string(r.priority);
  if (!r.from.empty()) line += " from " + r.from;
  if (!r.iif.empty()) line += " iif " + r.iif;
  if (r.fwmark) line += " fwmark " + std::to_string(r.fwmark);
  return line + " lookup " + std::to_string(r.table) + "\n";
}

std::string management_port(int host) { return "h" + std::to_string(host); }

}  // namespace

std::string root_batch(const FabricPlan& plan) {
  std::string out;
  for (const auto& ns : plan.namespaces) out += "netns add " + ns.name + "\n";
  for (const auto& c : plan.cables)
    out += "link add name " + c.a.interface + " netns " + plan.namespaces[c.a.ns].name +
           " type veth peer name " + c.b.interface + " netns " + plan.namespaces[c.b.ns].name + "\n";
  const std::string& management = plan.namespaces[plan.management_ns].name;
  for (const auto& ns : plan.namespaces)
    if (ns.role == NamespaceRole::Host)
      out += "link add name " + ns.management_interface + " netns " + ns.name + " type veth peer name " +
             management_port(ns.host) + " netns " + management + "\n";
  return out;
}

std::vector<std::string> shaper_arguments(const std::string& device, double mbit, int mtu,
                                          double peak_slack_us) {
  const double bytes_per_second = mbit * 1e6 / 8;
  const double peak_mbit = mbit * 1.01;
  // The peak bucket, refilled 1 % faster than the rate, keeps a full token bucket from
  // sending a small message at line speed: after an idle spell a cable sends at most this
  // much faster than its rate. One frame alone is too small: the kernel's timer releases a
  // waiting packet some microseconds late, and a bucket that cannot hold the tokens of that
  // delay loses it on every packet (a 1000 Mbit/s cable of 9000-byte frames carried 0.89 of
  // its rate over TCP, 0.99 with 100 us of slack: perf/results/fabric-peak-bucket-20261127).
  const long frame = mtu + 64;
  const long peak_bucket = frame + std::lround(peak_mbit * 1e6 / 8 * peak_slack_us * 1e-6);
  const long burst =
      std::max({2L * frame, std::lround(bytes_per_second * 0.002), peak_bucket});
  const long limit = std::max<long>(16L << 20, std::lround(bytes_per_second * 2.0));
  return {"qdisc", "replace", "dev", device, "root", "tbf",
          "rate", std::to_string(std::llround(mbit * 1e6)) + "bit",
          "burst", std::to_string(burst), "limit", std::to_string(limit),
          "peakrate", std::to_string(std::llround(peak_mbit * 1e6)) + "bit",
          "mtu", std::to_string(peak_bucket)};
}

NamespaceScript namespace_script(const FabricPlan& plan, int index) {
  const Namespace& ns = plan.namespaces[index];
  NamespaceScript s;
  s.sysctls = {{"net/ipv6/conf/all/disable_ipv6", "1", true},
               {"net/ipv6/conf/default/disable_ipv6", "1", true},
               {"net/ipv4/ip_forward", ns.forwards ? "1" : "0"},
               {"net/ipv4/conf/all/rp_filter", "0"},
               {"net/ipv4/conf/default/rp_filter", "0"},
               {"net/ipv4/icmp_ratelimit", "0", true},
               {"net/ipv4/icmp_msgs_per_sec", "100000", true},
               {"net/ipv4/tcp_slow_start_after_idle", "0", true},
               {"net/ipv4/tcp_no_metrics_save", "1", true},
               {"net/ipv4/fib_multipath_hash_policy", "1", true},
               // Deep queues stand in for a lossless fabric, so a packet may wait a second
               // behind a fan-in: TCP must not take that for a loss (a spurious timeout or
               // tail-loss probe resends data the link then carries twice).
               {"net/ipv4/tcp_rto_min_us", "2000000", true},
               {"net/ipv4/tcp_early_retrans", "0", true}};
  for (const auto& dev : ns.interfaces) s.sysctls.push_back({"net/ipv4/conf/" + dev + "/rp_filter", "0"});

  s.links += "link set dev lo up\n";
  if (ns.role == NamespaceRole::Management) {
    s.links += "link add name br0 type bridge\n";
    s.links += "link set dev br0 up\n";
    s.links += "addr replace " + ns.management_address + " dev br0\n";
    for (const auto& other : plan.namespaces)
      if (other.role == NamespaceRole::Host)
        s.links += "link set dev " + management_port(other.host) + " master br0 up\n";
  } else {
    for (const auto& dev : ns.interfaces)
      s.links += "link set dev " + dev + " mtu " + std::to_string(plan.mtu) + " up\n";
    for (const auto& [dev, address] : ns.addresses) {
      s.links += "addr replace " + address + " dev " + dev;
      for (const auto& e : plan.endpoints)
        if (e.ns == index && e.address + "/32" == address && e.address_label != dev) s.links += " label " + e.address_label;
      s.links += "\n";
    }
    if (!ns.management_interface.empty()) {
      s.links += "link set dev " + ns.management_interface + " up\n";
      s.links += "addr replace " + ns.management_address + " dev " + ns.management_interface + "\n";
    }
  }
  for (const auto& r : ns.rules) s.rules += rule_line(r);
  for (const auto& t : ns.tables)
    for (const auto& r : t.routes) s.routes += route_line(r, t.id);

  auto shape = [&](const std::string& dev, double mbit) {
    std::string line;
    for (const auto& a : shaper_arguments(dev, mbit, plan.mtu, plan.peak_slack_us))
      line += (line.empty() ? "" : " ") + a;
    s.shapers += line + "\n";
  };
  for (const auto& c : plan.cables) {
    if (c.a.ns == index) shape(c.a.interface, c.mbit_ab);
    if (c.b.ns == index) shape(c.b.interface, c.mbit_ba);
  }
  return s;
}

}  // namespace topocoll::fabric
