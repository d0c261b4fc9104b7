#include "topo/topology_dot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace topocoll::topo {

namespace {

std::string num(double x) {
  std::ostringstream out;
  out.precision(6);
  out << x;
  return out.str();
}

// DOT string literal.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Hosts get colours so the GPUs of one server are recognisable across the two groups.
const char* host_colour(int host) {
  static const char* palette[] = {"#fde0c5", "#d4e9d4", "#e3d7ef", "#fbd5e0", "#d8e6f3",
                                  "#f3ecc2", "#d1ece8", "#eadbc8"};
  return palette[host % 8];
}

double link_rate(const Topology& t, LinkKind kind) {
  for (const auto& l : t.links())
    if (l.kind == kind) return l.gbps;
  return 0;
}

DotDrawing bigraph_dot(const Topology& t) {
  std::ostringstream g;
  const auto& upper = t.group_switches(SwitchRole::Upper);
  const auto& lower = t.group_switches(SwitchRole::Lower);
  const bool multi_gpu = t.hosts().size() < t.endpoints().size();
  g << "graph " << q(t.name()) << " {\n"
    << "  graph [fontname=\"Helvetica\", fontsize=16, labelloc=t, nodesep=0.12, ranksep=1.1,\n"
    << "         splines=line, newrank=true, label=" << q("BiGraph \"" + t.name() + "\": " +
                                   std::to_string(upper.size()) + " upper + " +
                                   std::to_string(lower.size()) + " lower switches, " +
                                   std::to_string(t.endpoints().size()) + " endpoints; links " +
                                   num(link_rate(t, LinkKind::Access)) + " Gb/s" +
                                   (multi_gpu ? "; colour = server" : "")) << "];\n"
    << "  node [fontname=\"Helvetica\", fontsize=9, height=0.3, margin=\"0.04,0.02\"];\n"
    << "  edge [color=\"#777777\", penwidth=0.8];\n";
  // One box per (switch, server): the GPUs of a server that share a switch, so an 8-GPU
  // server reads as two or more boxes instead of eight.
  struct Box {
    std::string id, label;
    int host = 0, count = 0;
  };
  auto boxes_of = [&](int sw) {
    std::vector<Box> boxes;
    for (int e = 0; e < int(t.endpoints().size()); ++e) {
      const Endpoint& ep = t.endpoints()[e];
      if (ep.attach_switch != sw) continue;
      auto it = std::find_if(boxes.begin(), boxes.end(),
                             [&](const Box& b) { return b.host == ep.host_index; });
      if (it == boxes.end()) {
        boxes.push_back({ep.id, ep.id, ep.host_index, 1});
        continue;
      }
      if (it->count == 1) {
        const Endpoint& first = t.endpoints()[*t.find_endpoint_by_id(it->id)];
        it->id = t.switches()[sw].id + "/" + ep.host;
        it->label = ep.host + "\n" + "g" + std::to_string(first.gpu);
      }
      it->label += " g" + std::to_string(ep.gpu);
      ++it->count;
    }
    return boxes;
  };
  auto box_node = [&](const Box& b) {
    g << "    " << q(b.id) << " [shape=box, style=\"rounded,filled\", fillcolor=\""
      << (multi_gpu ? host_colour(b.host) : "#f2f2f2") << "\", label=" << q(b.label) << "];\n";
  };
  auto box_edge = [&](const Box& b, int sw, bool box_first) {
    std::string a = q(b.id), c = q(t.switches()[sw].id);
    g << "  " << (box_first ? a : c) << " -- " << (box_first ? c : a);
    if (b.count > 1)
      g << " [penwidth=" << num(0.8 + 0.4 * b.count) << ", label=\"x" << b.count
        << "\", fontsize=8, fontcolor=\"#555555\"]";
    g << ";\n";
  };
  auto switch_row = [&](const std::vector<int>& group, const char* fill, const char* name) {
    g << "  subgraph " << name << " {\n    rank=same;\n";
    for (int s : group)
      g << "    " << q(t.switches()[s].id) << " [shape=box, style=filled, fillcolor=\"" << fill
        << "\", fontsize=12, width=0.9, height=0.45];\n";
    // Invisible chain keeps the switches in index order from left to right.
    for (size_t i = 1; i < group.size(); ++i)
      g << "    " << q(t.switches()[group[i - 1]].id) << " -- " << q(t.switches()[group[i]].id)
        << " [style=invis];\n";
    g << "  }\n";
  };
  g << "  subgraph upper_endpoints {\n    rank=same;\n";
  for (int s : upper)
    for (const Box& b : boxes_of(s)) box_node(b);
  g << "  }\n";
  switch_row(upper, "#9ecae1", "upper_switches");
  switch_row(lower, "#a1d99b", "lower_switches");
  g << "  subgraph lower_endpoints {\n    rank=same;\n";
  for (int s : lower)
    for (const Box& b : boxes_of(s)) box_node(b);
  g << "  }\n";
  for (int s : upper)
    for (const Box& b : boxes_of(s)) box_edge(b, s, true);
  for (const auto& l : t.links())
    if (l.kind == LinkKind::InterGroup && l.id < l.reverse) {
      bool from_upper = t.switches()[l.from.index].role == SwitchRole::Upper;
      const std::string& u = t.node_id(from_upper ? l.from : l.to);
      const std::string& d = t.node_id(from_upper ? l.to : l.from);
      g << "  " << q(u) << " -- " << q(d) << " [color=\"#3f6fa8\", penwidth=1.2];\n";
    }
  for (int s : lower)
    for (const Box& b : boxes_of(s)) box_edge(b, s, false);
  g << "}\n";
  return {g.str(), {"dot"}};
}

// NAP: positions are computed here (neato -n2 keeps them): package p sits at row
// coord[0] and column = the remaining coordinates flattened, nodes on top of the package
// box, its k local switches below, and one edge per torus neighbour pair standing for the
// N cables joining node i to node i.
DotDrawing nap_dot(const Topology& t) {
  std::ostringstream g;
  const int P = t.package_count(), N = t.nodes_per_package(), k = t.local_switches();
  const auto& dims = t.torus_dims();
  int rows = dims[0];
  if (dims.size() == 1) {  // a single ring: one row
    rows = 1;
  }
  const double node_gap = 58, box_w = std::max(N, k) * node_gap + 40, box_h = 190;
  const double cell_w = box_w + 110, cell_h = box_h + 110;
  auto cell = [&](int p) {
    std::vector<int> c = t.torus_coord(p);
    if (dims.size() == 1) return std::pair<int, int>{0, c[0]};
    int col = 0;
    for (size_t d = 1; d < c.size(); ++d) col = col * dims[d] + c[d];
    return std::pair<int, int>{c[0], col};
  };
  auto centre = [&](int p) {
    auto [r, c] = cell(p);
    // A margin of 80 points keeps the wrap-around stubs and their labels inside the page.
    return std::pair<double, double>{80 + c * cell_w + cell_w / 2,
                                     80 + (rows - 1 - r) * cell_h + cell_h / 2};
  };
  std::string dims_text;
  for (size_t d = 0; d < dims.size(); ++d) dims_text += (d ? "x" : "") + std::to_string(dims[d]);
  g << "graph " << q(t.name()) << " {\n"
    << "  graph [fontname=\"Helvetica\", fontsize=16, labelloc=t, splines=line, outputorder=nodesfirst,\n"
    << "         label=" << q("NAP \"" + t.name() + "\": " + std::to_string(P) + " packages on a " +
                              dims_text + " torus, " + std::to_string(N) + " nodes and " +
                              std::to_string(k) + " local switches each; node-switch " +
                              num(link_rate(t, LinkKind::IntraPackage)) + " Gb/s, torus " +
                              num(link_rate(t, LinkKind::InterPackage)) +
                              " Gb/s per cable (node i to node i)") << "];\n"
    << "  node [fontname=\"Helvetica\", fontsize=9];\n"
    << "  edge [color=\"#8a8a8a\", penwidth=0.6, fontname=\"Helvetica\"];\n";
  // Package boxes first, so they are drawn underneath.
  for (int p = 0; p < P; ++p) {
    auto [x, y] = centre(p);
    std::string coord;
    for (int c : t.torus_coord(p)) coord += (coord.empty() ? "" : ",") + std::to_string(c);
    g << "  " << q("package" + std::to_string(p)) << " [shape=box, style=\"rounded,dashed,filled\", "
      << "fillcolor=\"#fafafa\", color=\"#555555\", fixedsize=true, labelloc=b, fontsize=12, width="
      << num(box_w / 72) << ", height=" << num(box_h / 72) << ", pos=\"" << num(x) << "," << num(y)
      << "\", label=" << q("package " + std::to_string(p) + " (" + coord + ")") << "];\n";
  }
  for (int p = 0; p < P; ++p) {
    auto [x, y] = centre(p);
    for (int i = 0; i < N; ++i) {
      const Endpoint& e = t.endpoints()[t.package_node(p, i)];
      double nx = x + (i - (N - 1) / 2.0) * node_gap;
      g << "  " << q(e.id) << " [shape=circle, style=filled, fillcolor=\"#fdd0a2\", fixedsize=true, "
        << "width=0.55, label=" << q("n" + std::to_string(i)) << ", pos=\"" << num(nx) << ","
        << num(y + 45) << "\"];\n";
    }
    const double switch_gap = std::min(node_gap * 1.4, (box_w - 60) / std::max(k, 1));
    for (int j = 0; j < k; ++j) {
      const Switch& s = t.switches()[t.local_switch(p, j)];
      double sx = x + (j - (k - 1) / 2.0) * switch_gap;
      g << "  " << q(s.id) << " [shape=box, style=filled, fillcolor=\"#9ecae1\", fixedsize=true, "
        << "width=0.6, height=0.3, label=" << q("s" + std::to_string(j)) << ", pos=\"" << num(sx)
        << "," << num(y - 35) << "\"];\n";
    }
  }
  for (const auto& l : t.links())
    if (l.kind == LinkKind::IntraPackage && l.id < l.reverse)
      g << "  " << q(t.node_id(l.from)) << " -- " << q(t.node_id(l.to)) << ";\n";
  // Torus: one edge per neighbouring package pair.
  for (int p = 0; p < P; ++p)
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 2) continue;
      std::vector<int> c = t.torus_coord(p);
      if (dims[d] == 2 && c[d] == 1) continue;
      const bool wraps = c[d] + 1 == dims[d];
      c[d] = (c[d] + 1) % dims[d];
      int other = t.package_at(c);
      const std::string label = std::to_string(N) + " x " +
                                num(link_rate(t, LinkKind::InterPackage)) + " Gb/s";
      if (!wraps || dims.size() > 2) {
        g << "  " << q("package" + std::to_string(p)) << " -- " << q("package" + std::to_string(other))
          << " [color=\"#c0392b\", penwidth=2.5, fontsize=10, fontcolor=\"#c0392b\", label="
          << q("dim " + std::to_string(d) + ": " + label) << "];\n";
        continue;
      }
      // A wrap-around cable would cross the whole grid: draw a stub leaving each of the two
      // packages outwards, labelled with the package it reaches.
      for (int side = 0; side < 2; ++side) {
        int from = side == 0 ? p : other, to = side == 0 ? other : p;
        auto [fx, fy] = centre(from);
        auto [tx, ty] = centre(to);
        double dx = fx - tx, dy = fy - ty, length = std::sqrt(dx * dx + dy * dy);
        dx /= length;
        dy /= length;
        double reach = std::abs(dx) * (box_w / 2 + 45) + std::abs(dy) * (box_h / 2 + 40);
        std::string stub = "wrap" + std::to_string(from) + "_" + std::to_string(d);
        g << "  " << q(stub) << " [shape=point, width=0.06, color=\"#c0392b\", pos=\""
          << num(fx + dx * reach) << "," << num(fy + dy * reach) << "\"];\n";
        g << "  " << q("package" + std::to_string(from)) << " -- " << q(stub)
          << " [color=\"#c0392b\", penwidth=2.5, style=dashed, fontsize=10, fontcolor=\"#c0392b\", "
          << "label=" << q("dim " + std::to_string(d) + " wrap to " + std::to_string(to)) << "];\n";
      }
    }
  g << "}\n";
  return {g.str(), {"neato", "-n2"}};
}

}  // namespace

DotDrawing topology_to_dot(const Topology& t) {
  return t.kind() == TopologyKind::BiGraph ? bigraph_dot(t) : nap_dot(t);
}

}  // namespace topocoll::topo
