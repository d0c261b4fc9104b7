#include "accept/acceptance_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "topo/cable_names.h"

namespace topocoll::accept {
namespace {

using topo::LinkKind;
using topo::NodeRef;

std::string fixed(double x, int digits) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << x;
  return o.str();
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string percent(double ratio) { return fixed(ratio * 100, ratio < 0.1 ? 1 : 0) + " %"; }

std::vector<std::string> link_names(const topo::Topology& t, const std::vector<int>& links) {
  std::vector<std::string> out;
  for (int l : links) out.push_back(topo::link_name(t, l));
  return out;
}

// Directed links miswired by the wiring phase.
std::set<int> miswired(const AcceptanceResult& r) {
  std::set<int> out;
  for (const auto& f : r.wiring.findings) out.insert(f.links.begin(), f.links.end());
  return out;
}

std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out + "\"";
}

}  // namespace

std::string AcceptanceResult::verdict() const {
  auto any = [&](const char* status) {
    return std::any_of(phases.begin(), phases.end(), [&](const PhaseResult& p) { return p.status == status; });
  };
  if (!aborted.empty() || any("fail")) return "fail";
  return any("incomplete") ? "incomplete" : "pass";
}

nlohmann::json report_json(const topo::Topology& t, const AcceptanceResult& r) {
  nlohmann::json j;
  j["schema"] = "topocoll-accept/1";
  j["verdict"] = r.verdict();
  j["topology"] = {{"name", t.name()}, {"file", r.topology_file},
                   {"kind", std::string(topo::to_string(t.kind()))}, {"endpoints", t.endpoints().size()}};
  j["started"] = r.started;
  j["duration_s"] = r.duration_s;
  j["budget_s"] = r.budget_s;
  j["threshold"] = r.threshold;
  if (!r.aborted.empty()) j["aborted"] = r.aborted;
  j["phases"] = nlohmann::json::array();
  for (const auto& p : r.phases) j["phases"].push_back({{"name", p.name}, {"status", p.status}, {"summary", p.summary}});

  nlohmann::json ranks = nlohmann::json::array();
  for (size_t i = 0; i < r.identities.size(); ++i) {
    const auto& id = r.identities[i];
    const int e = i < r.inventory.endpoint_of_rank.size() ? r.inventory.endpoint_of_rank[i] : -1;
    ranks.push_back({{"rank", id.rank}, {"host", id.host}, {"gpu", id.gpu}, {"gpus_visible", id.gpus_visible},
                     {"address", id.address}, {"endpoint", e >= 0 ? nlohmann::json(t.endpoints()[e].id) : nlohmann::json()}});
  }
  nlohmann::json missing = nlohmann::json::array();
  for (int e : r.inventory.missing) missing.push_back(t.endpoints()[e].id);
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : r.inventory.problems)
    problems.push_back({{"kind", p.kind}, {"rank", p.rank},
                        {"endpoint", p.endpoint >= 0 ? nlohmann::json(t.endpoints()[p.endpoint].id) : nlohmann::json()},
                        {"detail", p.detail}});
  j["inventory"] = {{"ranks", ranks}, {"missing", missing}, {"problems", problems}};

  const auto wrong_way = miswired(r);
  nlohmann::json cables = nlohmann::json::array();
  for (int c : topo::cable_links(t))
    for (int l : {c, t.links()[c].reverse}) {
      const LinkEvidence& e = r.localization.links.size() > size_t(l) ? r.localization.links[l] : LinkEvidence{};
      cables.push_back({{"cable", topo::cable_name(t, l)}, {"direction", topo::link_name(t, l)},
                        {"kind", std::string(topo::to_string(t.links()[l].kind))},
                        {"expected_gbps", t.links()[l].gbps}, {"ratio", e.cleared},
                        {"flows", e.flows}, {"bad_flows", e.bad_flows},
                        {"state", wrong_way.count(l) ? "miswired" : to_string(e.state)}});
    }
  j["cables"] = cables;

  nlohmann::json flows = nlohmann::json::array();
  for (const auto& round : r.rounds)
    for (const auto& m : round)
      flows.push_back({{"round", m.round}, {"src", t.endpoints()[m.flow.src].id}, {"dst", t.endpoints()[m.flow.dst].id},
                       {"lane", m.flow.lane}, {"path", link_names(t, m.flow.links)},
                       {"expected_gbps", m.expected_gbps}, {"measured_gbps", m.measured_gbps},
                       {"ratio", m.ratio()}, {"dead", m.dead}, {"error", m.error}, {"rtt_us", m.rtt_us}});
  j["flows"] = flows;
  j["flow_seconds"] = r.flow_seconds;
  nlohmann::json rechecks = nlohmann::json::array();
  for (const auto& c : r.rechecks)
    rechecks.push_back({{"round", c.first.round}, {"src", t.endpoints()[c.first.flow.src].id},
                        {"dst", t.endpoints()[c.first.flow.dst].id}, {"lane", c.first.flow.lane},
                        {"first_ratio", c.first.ratio()}, {"again_ratio", c.again.ratio()}, {"again_dead", c.again.dead}});
  j["rechecks"] = rechecks;
  nlohmann::json unreachable = nlohmann::json::array();
  for (int l : r.unreachable_links) unreachable.push_back(topo::link_name(t, l));
  j["unmeasured_links"] = unreachable;

  nlohmann::json findings = nlohmann::json::array();
  for (const auto& p : r.inventory.problems)
    findings.push_back({{"phase", "inventory"}, {"kind", p.kind}, {"cables", nlohmann::json::array()},
                        {"endpoints", p.endpoint >= 0 ? nlohmann::json::array({t.endpoints()[p.endpoint].id}) : nlohmann::json::array()},
                        {"certainty", "certain"}, {"detail", p.detail}});
  for (const auto& f : r.localization.findings) {
    // A slow flow the wiring phase re-ran is reported there (interference, a slow path, or
    // a passing disturbance).
    if (f.kind == "unexplained" &&
        std::any_of(r.interference.begin(), r.interference.end(),
                    [&](const InterferenceCheck& c) { return c.in_round.flow.links == f.links; }))
      continue;
    nlohmann::json eps = nlohmann::json::array();
    for (int e : f.endpoints) eps.push_back(t.endpoints()[e].id);
    findings.push_back({{"phase", "cables"}, {"kind", f.kind}, {"cables", link_names(t, f.links)},
                        {"endpoints", eps}, {"ratio", f.ratio}, {"certainty", f.certainty}, {"detail", f.detail}});
  }
  for (const auto& f : r.wiring.findings)
    findings.push_back({{"phase", "wiring"}, {"kind", "miswired"}, {"cables", link_names(t, f.links)},
                        {"endpoints", nlohmann::json::array()}, {"probes", f.probes},
                        {"certainty", "seen by " + std::to_string(f.probes) + " probe(s)"}, {"detail", f.detail}});
  for (const auto& c : r.interference)
    if (c.interference)
      findings.push_back({{"phase", "wiring"}, {"kind", "interference"}, {"cables", link_names(t, c.in_round.flow.links)},
                          {"endpoints", {t.endpoints()[c.in_round.flow.src].id, t.endpoints()[c.in_round.flow.dst].id}},
                          {"certainty", "one of the flow's cables carries traffic the file routes elsewhere"},
                          {"detail", "flow " + t.endpoints()[c.in_round.flow.src].id + " -> " + t.endpoints()[c.in_round.flow.dst].id +
                                         " reached " + percent(c.alone.ratio()) + " alone but " + percent(c.in_round.ratio()) +
                                         " and " + percent(c.again.ratio()) +
                                         " beside its round's flows, which the file keeps off its cables"}});
    else if (slow_alone(c, r.threshold))
      findings.push_back({{"phase", "wiring"}, {"kind", "slow path"}, {"cables", link_names(t, c.in_round.flow.links)},
                          {"endpoints", {t.endpoints()[c.in_round.flow.src].id, t.endpoints()[c.in_round.flow.dst].id}},
                          {"ratio", c.alone.dead ? 0.0 : c.alone.ratio()},
                          {"certainty", "slow in its round and alone; each of its cables carried a flow at full rate"},
                          {"detail", "flow " + t.endpoints()[c.in_round.flow.src].id + " -> " + t.endpoints()[c.in_round.flow.dst].id +
                                         " reached " + percent(c.in_round.ratio()) + " in its round and " +
                                         (c.alone.dead ? std::string("nothing") : percent(c.alone.ratio())) +
                                         " alone: its packets take a route, switch port, MTU or NIC setting the file does not describe"}});
  for (const auto& c : r.collectives)
    if (!c.error.empty() || c.wrong > 0)
      findings.push_back({{"phase", "collectives"}, {"kind", c.wrong > 0 ? "wrong result" : "failed"},
                          {"cables", nlohmann::json::array()}, {"endpoints", nlohmann::json::array()},
                          {"certainty", "certain"},
                          {"detail", c.collective + " " + c.algo + ": " + (c.wrong > 0 ? std::to_string(c.wrong) + " wrong elements" : c.error)}});
  j["findings"] = findings;

  nlohmann::json responders = nlohmann::json::object();
  for (const auto& [a, n] : r.wiring.node_of_address) responders[a] = n;
  j["wiring"] = {{"probes", r.wiring.probes}, {"hops_expected", r.wiring.hops_expected},
                 {"hops_answered", r.wiring.hops_answered}, {"responders", responders}};
  nlohmann::json interference = nlohmann::json::array();
  for (const auto& c : r.interference)
    interference.push_back({{"src", t.endpoints()[c.in_round.flow.src].id}, {"dst", t.endpoints()[c.in_round.flow.dst].id},
                            {"in_round_ratio", c.in_round.ratio()}, {"alone_ratio", c.alone.ratio()},
                            {"again_ratio", c.again.ratio()},
                            {"interference", c.interference}, {"slow_alone", slow_alone(c, r.threshold)}});
  j["interference"] = interference;
  nlohmann::json coll = nlohmann::json::array();
  for (const auto& c : r.collectives)
    coll.push_back({{"collective", c.collective}, {"algo", c.algo}, {"bytes", c.bytes},
                    {"predicted_us", c.predicted_us}, {"measured_us", c.measured_us},
                    {"ratio", c.predicted_us > 0 && c.measured_us > 0 ? c.measured_us / c.predicted_us : 0.0},
                    {"max_link_load", c.max_link_load}, {"wrong", c.wrong}, {"error", c.error}});
  j["collectives"] = coll;
  return j;
}

std::string report_text(const topo::Topology& t, const AcceptanceResult& r) {
  std::ostringstream o;
  o << "topocoll accept: " << t.name() << " (" << r.topology_file << "), " << r.ranks << " ranks, "
    << fixed(r.duration_s, 1) << " s of a " << fixed(r.budget_s, 0) << " s budget, threshold "
    << percent(r.threshold) << "\n";
  o << "verdict: " << upper(r.verdict()) << "\n";
  if (!r.aborted.empty()) o << "aborted: " << r.aborted << "\n";
  for (const auto& p : r.phases) o << "  " << p.name << ": " << p.status << " - " << p.summary << "\n";
  const auto json = report_json(t, r);
  if (!json["findings"].empty()) {
    o << "findings:\n";
    for (const auto& f : json["findings"])
      o << "  [" << f["phase"].get<std::string>() << "] " << f["kind"].get<std::string>() << ": "
        << f["detail"].get<std::string>() << " (" << f["certainty"].get<std::string>() << ")\n";
  }
  bool slow_cables = false;
  for (const auto& f : r.localization.findings) slow_cables = slow_cables || f.kind == "slow cable";
  if (slow_cables && !r.wiring.findings.empty())
    o << "note: with the wiring off, flows take paths the file does not plan and meet where it keeps them\n"
         "      apart: fix the wiring first, then judge the slow cables again.\n";
  if (!r.collectives.empty()) {
    o << "collectives (measured / predicted):\n";
    for (const auto& c : r.collectives) {
      o << "  " << c.collective << " " << c.algo << " " << c.bytes << " B: ";
      if (!c.error.empty()) o << c.error << "\n";
      else
        o << fixed(c.measured_us / 1e3, 1) << " / " << fixed(c.predicted_us / 1e3, 1) << " ms, load "
          << c.max_link_load << ", wrong " << c.wrong << "\n";
    }
  }
  return o.str();
}

std::string report_dot(const topo::Topology& t, const AcceptanceResult& r) {
  std::ostringstream g;
  const auto wrong_way = miswired(r);
  std::set<int> unreachable_endpoints, missing(r.inventory.missing.begin(), r.inventory.missing.end());
  for (const auto& f : r.localization.findings)
    if (f.kind == "unreachable endpoint") unreachable_endpoints.insert(f.endpoints.begin(), f.endpoints.end());
  g << "graph acceptance {\n"
    << "  graph [fontname=\"Helvetica\", fontsize=16, labelloc=t, nodesep=0.15, ranksep=1.2, newrank=true,\n"
    << "         label=" << dot_quote("topocoll accept: " + t.name() + " — " + upper(r.verdict()) +
                                  "\ncables: green >= " + percent(r.threshold) +
                                  " of expected, orange below, red dead, purple miswired, grey not measured")
    << "];\n  node [fontname=\"Helvetica\", fontsize=9, height=0.3, margin=\"0.04,0.02\"];\n";
  auto endpoint_node = [&](int e) {
    std::string fill = "#f2f2f2", style = "rounded,filled", extra;
    if (unreachable_endpoints.count(e)) fill = "#f4a6a6";
    if (missing.count(e)) style = "rounded,dashed", extra = "\\n(no rank)";
    g << "    " << dot_quote(t.endpoints()[e].id) << " [shape=box, style=\"" << style << "\", fillcolor=\"" << fill
      << "\", label=\"" << t.endpoints()[e].id << extra << "\"];\n";
  };
  auto switch_node = [&](int s, const char* fill) {
    g << "    " << dot_quote(t.switches()[s].id) << " [shape=box, style=filled, fillcolor=\"" << fill
      << "\", fontsize=11];\n";
  };
  if (t.kind() == topo::TopologyKind::BiGraph) {
    for (auto role : {topo::SwitchRole::Upper, topo::SwitchRole::Lower}) {
      const bool upper = role == topo::SwitchRole::Upper;
      g << "  subgraph " << (upper ? "upper_endpoints" : "lower_endpoints") << " {\n    rank=same;\n";
      for (int s : t.group_switches(role))
        for (int e = 0; e < int(t.endpoints().size()); ++e)
          if (t.endpoints()[e].attach_switch == s) endpoint_node(e);
      g << "  }\n  subgraph " << (upper ? "upper" : "lower") << " {\n    rank=same;\n";
      const auto& group = t.group_switches(role);
      for (int s : group) switch_node(s, upper ? "#9ecae1" : "#a1d99b");
      for (size_t i = 1; i < group.size(); ++i)  // keeps the switches in index order
        g << "    " << dot_quote(t.switches()[group[i - 1]].id) << " -- " << dot_quote(t.switches()[group[i]].id)
          << " [style=invis];\n";
      g << "  }\n";
    }
  } else {
    for (int p = 0; p < t.package_count(); ++p) {
      g << "  subgraph cluster_p" << p << " {\n    label=\"package " << p << "\"; style=rounded; color=\"#999999\";\n";
      g << "    subgraph { rank=same;\n";
      for (int n = 0; n < t.nodes_per_package(); ++n) endpoint_node(t.package_node(p, n));
      g << "    }\n    subgraph { rank=same;\n";
      for (int j = 0; j < t.local_switches(); ++j) switch_node(t.local_switch(p, j), "#a1d99b");
      g << "    }\n  }\n";
    }
  }
  // Every cable: colour by its worse direction, labelled with the measured share.
  for (int c : topo::cable_links(t)) {
    const int back = t.links()[c].reverse;
    std::string colour = "#2ca02c", style = "solid", label;
    double width = 1.2;
    bool measured = false;
    double worst = 1e9;
    bool dead = false, slow = false;
    for (int l : {c, back}) {
      if (l >= int(r.localization.links.size())) continue;
      const auto& e = r.localization.links[l];
      if (e.flows == 0) continue;
      measured = true;
      worst = std::min(worst, e.cleared);
      dead = dead || e.state == CableState::Dead;
      slow = slow || e.state == CableState::Slow;
    }
    if (!measured) colour = "#bbbbbb", style = "dotted";
    if (slow) colour = "#ff7f0e", width = 3, label = percent(worst);
    if (dead) colour = "#d62728", width = 3, style = "dashed", label = "dead";
    if (wrong_way.count(c) || wrong_way.count(back)) colour = "#8e44ad", width = 3, label = "miswired";
    const auto& l = t.links()[c];
    // Top to bottom: upper endpoints, upper switches, lower switches, lower endpoints.
    const bool below = l.from.type == NodeRef::Type::Endpoint && t.kind() == topo::TopologyKind::BiGraph &&
                       t.switches()[l.to.index].role == topo::SwitchRole::Lower;
    const auto& top = below ? l.to : l.from;
    const auto& bottom = below ? l.from : l.to;
    g << "  " << dot_quote(t.node_id(top)) << " -- " << dot_quote(t.node_id(bottom)) << " [color=\"" << colour
      << "\", penwidth=" << width << ", style=" << style;
    if (!label.empty()) g << ", label=" << dot_quote(label) << ", fontsize=9, fontcolor=\"" << colour << "\"";
    if (l.kind == LinkKind::InterPackage) g << ", constraint=false";
    g << "];\n";
  }
  g << "}\n";
  return g.str();
}

}  // namespace topocoll::accept
