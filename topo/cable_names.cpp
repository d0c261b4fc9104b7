#include "topo/cable_names.h"

#include <stdexcept>

namespace topocoll::topo {
namespace {

std::optional<NodeRef> find_node(const Topology& t, std::string_view id) {
  if (auto e = t.find_endpoint_by_id(id)) return NodeRef{NodeRef::Type::Endpoint, *e};
  if (auto s = t.find_switch(id)) return NodeRef{NodeRef::Type::Switch, *s};
  return std::nullopt;
}

// Cables joining the same two nodes, first directions in id order.
std::vector<int> parallel_cables(const Topology& t, int link) {
  const Link& l = t.links()[link];
  const int first = std::min(l.id, l.reverse);
  const Link& f = t.links()[first];
  std::vector<int> out;
  for (int id : t.out_links(f.from))
    if (t.links()[id].to == f.to && id < t.links()[id].reverse) out.push_back(id);
  return out;
}

std::string suffix(const Topology& t, int link) {
  const auto same = parallel_cables(t, link);
  const int first = std::min(link, t.links()[link].reverse);
  for (size_t i = 1; i < same.size(); ++i)
    if (same[i] == first) return "#" + std::to_string(i + 1);
  return "";
}

}  // namespace

std::vector<int> cable_links(const Topology& t) {
  std::vector<int> out;
  for (const auto& l : t.links())
    if (l.id < l.reverse && l.kind != LinkKind::HostFabric) out.push_back(l.id);
  return out;
}

std::string cable_name(const Topology& t, int link) {
  const Link& l = t.links()[std::min(link, t.links()[link].reverse)];
  return t.node_id(l.from) + "-" + t.node_id(l.to) + suffix(t, l.id);
}

std::string link_name(const Topology& t, int link) {
  const Link& l = t.links()[link];
  return t.node_id(l.from) + "->" + t.node_id(l.to) + suffix(t, link);
}

CableSelection find_cable(const Topology& t, std::string_view name) {
  const std::string text(name);
  int instance = 1;
  if (const auto hash = name.rfind('#'); hash != std::string_view::npos) {
    const std::string digits(name.substr(hash + 1));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
        digits.size() > 4)
      throw std::invalid_argument("cable '" + text + "': expected A-B, A-B#N or A->B");
    instance = std::stoi(digits);
    if (instance < 1) throw std::invalid_argument("cable '" + text + "': instances count from 1 (A-B#1 is the first)");
    name = name.substr(0, hash);
  }
  const bool directed = name.find("->") != std::string_view::npos;
  const std::string_view separator = directed ? "->" : "-";
  std::vector<CableSelection> found;
  std::string unmatched;  // the first split whose two ids are both nodes but not cabled
  for (size_t at = name.find(separator); at != std::string_view::npos;
       at = name.find(separator, at + 1)) {
    const auto a = find_node(t, name.substr(0, at));
    const auto b = find_node(t, name.substr(at + separator.size()));
    if (!a || !b) continue;
    std::vector<int> joining;
    for (int id : t.out_links(*a))
      if (t.links()[id].to == *b) joining.push_back(id);
    if (joining.empty()) {
      if (unmatched.empty())
        unmatched = t.node_id(*a) + " and " + t.node_id(*b) + " are not cabled to each other";
      continue;
    }
    if (instance > int(joining.size()))
      throw std::invalid_argument("cable '" + text + "': only " + std::to_string(joining.size()) +
                                  " cable(s) join " + t.node_id(*a) + " and " + t.node_id(*b));
    const int link = joining[instance - 1];
    if (t.links()[link].kind == LinkKind::HostFabric)
      throw std::invalid_argument("cable '" + text + "': a host fabric link, inside host " +
                                  t.hosts()[t.endpoints()[a->type == NodeRef::Type::Endpoint
                                                              ? a->index
                                                              : b->index]
                                                .host_index]
                                      .name +
                                  ", not a network cable");
    found.push_back({directed ? link : std::min(link, t.links()[link].reverse), !directed});
  }
  if (found.size() > 1)
    throw std::invalid_argument("cable '" + text + "' is ambiguous: node ids contain '-'; name it "
                                "with the ids from `topocoll describe --cables`");
  if (found.empty())
    throw std::invalid_argument(
        "cable '" + text + "': " +
        (unmatched.empty() ? std::string("no two node ids of ") + t.name() +
                                 " joined by '" + std::string(separator) +
                                 "' (see `topocoll describe --cables`)"
                           : unmatched));
  return found.front();
}

}  // namespace topocoll::topo
