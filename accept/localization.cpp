#include "accept/localization.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "topo/cable_names.h"

namespace topocoll::accept {

using topo::LinkKind;
using topo::NodeRef;

std::string to_string(CableState s) {
  switch (s) {
    case CableState::Ok: return "ok";
    case CableState::Slow: return "slow";
    case CableState::Dead: return "dead";
    case CableState::Unmeasured: return "unmeasured";
  }
  return "?";
}

namespace {

// "25 %", "99 %" (never "1e+02 %": fixed, whole percents; tenths below 10 %).
std::string short_percent(double x) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(x < 0.1 ? 1 : 0) << x * 100 << " %";
  return o.str();
}

}  // namespace

Localization localize(const topo::Topology& t, const std::vector<FlowMeasurement>& flows,
                      double threshold) {
  Localization out;
  out.links.resize(t.links().size());
  for (const auto& l : t.links()) out.links[l.id].link = l.id;
  // What each link is shown to carry: the fastest flow across it (Gb/s).
  std::vector<double> proven(t.links().size(), 0);
  for (const auto& m : flows)
    for (int l : m.flow.links) {
      if (m.dead && m.local_error) break;  // never left its host: tested nothing
      ++out.links[l].flows;
      if (!m.dead) proven[l] = std::max(proven[l], m.measured_gbps);
    }
  for (auto& e : out.links) e.cleared = t.links()[e.link].gbps > 0 ? proven[e.link] / t.links()[e.link].gbps : 0;
  std::vector<char> suspect(t.links().size(), 0);
  // Every bad flow's uncleared cables: those not shown to carry what the flow should have
  // reached. A cable alone in such a set is certain.
  std::vector<std::vector<int>> groups;
  // Flows that failed on their sender's host (a socket mark refused without CAP_NET_ADMIN, a
  // bind): that host's problem, named once per host with its error, not a cable's.
  std::map<int, std::pair<std::string, int>> local_failures;  // sender endpoint -> error, flows
  for (const auto& m : flows)
    if (m.dead && m.local_error) {
      auto& [error, count] = local_failures[m.flow.src];
      if (error.empty()) error = m.error;
      ++count;
    }
  for (const auto& [ep, failure] : local_failures) {
    Finding f;
    f.kind = "local error";
    f.endpoints = {ep};
    f.certainty = "certain";
    f.detail = t.endpoints()[ep].id + " could not start " + std::to_string(failure.second) + " flow" +
               (failure.second == 1 ? "" : "s") + " on its own host: " + failure.first;
    out.findings.push_back(f);
  }
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& m = flows[i];
    if (m.dead && m.local_error) continue;
    const bool bad = m.dead || m.ratio() < threshold;
    if (!bad) continue;
    std::vector<int> uncleared;
    for (int l : m.flow.links) {
      ++out.links[l].bad_flows;
      if (proven[l] < threshold * m.expected_gbps) uncleared.push_back(l);
    }
    // A dead flow also dies of its way back: TCP's handshake and ACKs take the route from
    // the receiver, which on NAP crosses other cables (dimension order, the receiver's
    // package first). Those no live flow crossed are suspects too; a slow flow's ACKs need
    // little, so only a dead one looks there.
    if (m.dead)
      for (const auto& path : t.route(m.flow.dst, m.flow.src))
        for (int l : path.links)
          if (t.links()[l].kind != LinkKind::HostFabric && proven[l] == 0 &&
              std::find(uncleared.begin(), uncleared.end(), l) == uncleared.end())
            uncleared.push_back(l);
    if (uncleared.empty()) {
      out.unexplained_flows.push_back(int(i));
      continue;
    }
    for (int l : uncleared) suspect[l] = 1;
    // Certain when one cable is left, in one direction or both.
    std::set<int> cables;
    for (int l : uncleared) cables.insert(std::min(l, t.links()[l].reverse));
    if (cables.size() == 1)
      for (int l : uncleared) out.links[l].certain = true;
    groups.push_back(uncleared);
  }
  for (auto& e : out.links) {
    if (t.links()[e.link].kind == LinkKind::HostFabric || e.flows == 0) continue;
    if (!suspect[e.link]) e.state = CableState::Ok;  // a fast flow crossed it
    else e.state = e.cleared == 0 ? CableState::Dead : CableState::Slow;
  }
  // Endpoints whose every cable is dead: the endpoint (or its host) is cut off.
  std::set<int> reported;
  for (int ep = 0; ep < int(t.endpoints().size()); ++ep) {
    std::vector<int> own;
    for (int l : t.out_links({NodeRef::Type::Endpoint, ep}))
      if (t.links()[l].kind != LinkKind::HostFabric) own.push_back(l), own.push_back(t.links()[l].reverse);
    if (own.empty()) continue;
    bool measured = false, all_dead = true;
    for (int l : own) {
      measured = measured || out.links[l].flows > 0;
      all_dead = all_dead && (out.links[l].flows == 0 || out.links[l].state == CableState::Dead);
    }
    if (!measured || !all_dead) continue;
    Finding f;
    f.kind = "unreachable endpoint";
    f.endpoints = {ep};
    f.links = own;
    f.certainty = "certain";
    std::string names;
    for (int l : own)
      if (l < t.links()[l].reverse) names += (names.empty() ? "" : ", ") + topo::cable_name(t, l);
    f.detail = "no flow reached or left " + t.endpoints()[ep].id + ": its cable" +
               (own.size() > 2 ? "s " : " ") + names + " (or its NIC or host) is down";
    for (int l : own) reported.insert(l);
    out.findings.push_back(f);
  }
  // Cable findings, both directions of a cable together when both are suspect.
  for (const auto& l : t.links()) {
    const int id = l.id;
    if (!suspect[id] || reported.count(id)) continue;
    const int back = l.reverse;
    const bool both = suspect[back] && !reported.count(back) &&
                      out.links[back].state == out.links[id].state;
    if (both && back < id) continue;  // reported with its reverse
    Finding f;
    f.kind = out.links[id].state == CableState::Dead ? "dead cable" : "slow cable";
    f.links = both ? std::vector<int>{std::min(id, back), std::max(id, back)} : std::vector<int>{id};
    f.ratio = out.links[id].cleared;
    if (both) f.ratio = std::max(f.ratio, out.links[back].cleared);
    const bool certain = out.links[id].certain || (both && out.links[back].certain);
    if (certain) {
      f.certainty = "certain";
    } else {
      // The cables no flow separates from this one.
      std::set<int> others;
      for (const auto& g : groups)
        if (std::find(g.begin(), g.end(), id) != g.end())
          for (int o : g)
            if (o != id && o != back) others.insert(o);
      std::set<std::string> names;
      for (int o : others) names.insert(topo::link_name(t, o));
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      f.certainty = "one of " + std::to_string(others.size() + 1) +
                    " cables no flow separates (with " + list + ")";
    }
    const std::string name = both ? topo::cable_name(t, id) : topo::link_name(t, id);
    f.detail = f.kind == "dead cable"
                   ? name + ": no flow across it arrived"
                   : name + ": flows across it reached " + short_percent(f.ratio) + " of the expected rate";
    out.findings.push_back(f);
  }
  for (int i : out.unexplained_flows) {
    const auto& m = flows[i];
    Finding f;
    f.kind = "unexplained";
    f.links = m.flow.links;
    f.ratio = m.ratio();
    f.certainty = "every cable of the flow carried a fast flow elsewhere";
    f.detail = "flow " + t.endpoints()[m.flow.src].id + " -> " + t.endpoints()[m.flow.dst].id +
               " reached " + short_percent(m.ratio()) +
               " though each of its cables was fast for another flow: traffic met where the file "
               "says it does not (wiring), or the hosts were busy";
    out.findings.push_back(f);
  }
  return out;
}

}  // namespace topocoll::accept
