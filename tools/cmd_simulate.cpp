// `topocoll simulate`: the cost model swept over message sizes and algorithms: predicted time
// and bus bandwidth per size and algorithm, which one `auto` picks, and a plot (SVG written
// here; PNG through rsvg-convert or ImageMagick when one is installed).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/value_grammar.h"
#include "exec/external_program.h"
#include "sched/algorithm_registry.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/plan.h"
#include "tools/command.h"
#include "tools/flag_value.h"
#include "tools/split_list.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using nlohmann::json;

std::string usage() {
  return
    "usage: topocoll simulate --topo FILE --coll allreduce|reduce_scatter|allgather|alltoall\n"
    "                         [--sizes 4K:1G] [--algos ring,ring-topo,hd,...] [--ranks N]\n"
    "                         [--elem-size B] [--alpha-us X] [--gamma-gbs G]\n"
    "                         [--json|--csv] [--plot out.svg|out.png]\n"
    "Predicted time and bus bandwidth (nccl-tests factors) per size and algorithm, and the\n"
    "algorithm `auto` picks. Sizes are the powers of two between the bounds (K/M/G suffixes).\n"
    "--algos: algorithms of `topocoll algorithms` (" + sched::algorithm_list() + ");\n"
    "default: those auto weighs that apply.\n";
}

struct Result {
  std::string algo;
  bool ok = false;
  std::string why_not;
  double time_us = 0, busbw = 0, max_load = 0;
};

struct Row {
  int64_t bytes = 0;
  std::string auto_pick;
  std::vector<Result> results;  // in --algos order
};

std::string human(int64_t b) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  double v = double(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f%s" : "%.1f%s", v, units[u]);
  return buf;
}

// --- SVG plot ------------------------------------------------------------------------------

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

// Two panels: bus bandwidth (linear) and time (log) against size (log2), one line per
// algorithm; the band under the x axis shows which algorithm `auto` picks at each size.
std::string svg_plot(const std::string& title, const std::vector<Row>& rows,
                     const std::vector<std::string>& algos) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                 "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  const double W = 1200, H = 560, top = 70, bottom = 130, left = 80, gap = 110;
  const double pw = (W - left - gap - 40) / 2, ph = H - top - bottom;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='DejaVu Sans, Arial, sans-serif' font-size='13'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='28' text-anchor='middle' font-size='17' font-weight='bold'>"
    << esc(title) << "</text>\n";
  double x0 = std::log2(double(rows.front().bytes)), x1 = std::log2(double(rows.back().bytes));
  if (x1 <= x0) x1 = x0 + 1;
  double bmax = 0, tmin = 1e300, tmax = 0;
  for (const auto& r : rows)
    for (const auto& res : r.results)
      if (res.ok) {
        bmax = std::max(bmax, res.busbw);
        tmin = std::min(tmin, res.time_us);
        tmax = std::max(tmax, res.time_us);
      }
  if (bmax <= 0) bmax = 1;
  // Round the bandwidth axis up to a nice step.
  double step = std::pow(10, std::floor(std::log10(bmax)));
  if (bmax / step <= 2) step /= 5;
  else if (bmax / step <= 5) step /= 2;
  double ymax = std::ceil(bmax / step) * step;
  double lt0 = std::floor(std::log10(std::max(tmin, 1e-3))), lt1 = std::ceil(std::log10(std::max(tmax, 1e-3)));
  if (lt1 <= lt0) lt1 = lt0 + 1;

  for (int panel = 0; panel < 2; ++panel) {
    double px = left + panel * (pw + gap);
    auto X = [&](double bytes) { return px + (std::log2(bytes) - x0) / (x1 - x0) * pw; };
    auto Y = [&](double v) {
      if (panel == 0) return top + ph - v / ymax * ph;
      return top + ph - (std::log10(std::max(v, 1e-3)) - lt0) / (lt1 - lt0) * ph;
    };
    o << "<rect x='" << px << "' y='" << top << "' width='" << pw << "' height='" << ph
      << "' fill='#fafafa' stroke='#333'/>\n";
    // Horizontal grid and labels.
    if (panel == 0) {
      for (double v = 0; v <= ymax + 1e-9; v += step) {
        o << "<line x1='" << px << "' x2='" << px + pw << "' y1='" << Y(v) << "' y2='" << Y(v)
          << "' stroke='#ddd'/>\n";
        o << "<text x='" << px - 6 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << v << "</text>\n";
      }
    } else {
      for (double e = lt0; e <= lt1 + 1e-9; e += 1) {
        double v = std::pow(10, e);
        o << "<line x1='" << px << "' x2='" << px + pw << "' y1='" << Y(v) << "' y2='" << Y(v)
          << "' stroke='#ddd'/>\n";
        std::ostringstream lab;
        if (v >= 1e6) lab << v / 1e6 << " s";
        else if (v >= 1e3) lab << v / 1e3 << " ms";
        else lab << v << " us";
        o << "<text x='" << px - 6 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << lab.str()
          << "</text>\n";
      }
    }
    // Vertical grid at every other size.
    int every = rows.size() > 12 ? 2 : 1;
    for (size_t i = 0; i < rows.size(); i += every) {
      double x = X(double(rows[i].bytes));
      o << "<line x1='" << x << "' x2='" << x << "' y1='" << top << "' y2='" << top + ph
        << "' stroke='#eee'/>\n";
      o << "<text x='" << x << "' y='" << top + ph + 18 << "' text-anchor='middle'>"
        << human(rows[i].bytes) << "</text>\n";
    }
    o << "<text x='" << px + pw / 2 << "' y='" << top + ph + 38
      << "' text-anchor='middle'>message size (bytes, nccl-tests size)</text>\n";
    o << "<text transform='translate(" << px - 58 << "," << top + ph / 2
      << ") rotate(-90)' text-anchor='middle'>"
      << (panel == 0 ? "bus bandwidth (GB/s)" : "predicted time (log)") << "</text>\n";
    // Solid lines first, dashed ones on top of them.
    std::vector<size_t> draw_order;
    for (size_t a = 0; a < algos.size(); a += 2) draw_order.push_back(a);
    for (size_t a = 1; a < algos.size(); a += 2) draw_order.push_back(a);
    for (size_t a : draw_order) {
      std::string pts;
      for (const auto& r : rows) {
        const Result& res = r.results[a];
        if (!res.ok) continue;
        pts += std::to_string(X(double(r.bytes))) + "," +
               std::to_string(Y(panel == 0 ? res.busbw : res.time_us)) + " ";
      }
      if (pts.empty()) continue;
      const char* c = colors[a % 10];
      // Every other algorithm dashed, so lines that coincide stay visible.
      o << "<polyline fill='none' stroke='" << c << "' stroke-width='" << (a % 2 ? 2.0 : 2.6) << "'"
        << (a % 2 ? " stroke-dasharray='7,4'" : "") << " points='" << pts << "'/>\n";
      for (const auto& r : rows) {
        const Result& res = r.results[a];
        if (!res.ok) continue;
        o << "<circle cx='" << X(double(r.bytes)) << "' cy='" << Y(panel == 0 ? res.busbw : res.time_us)
          << "' r='" << (r.auto_pick == res.algo ? 4.5 : 2.5) << "' fill='" << c << "'/>\n";
      }
    }
    // Auto-pick band.
    double by = top + ph + 50;
    o << "<text x='" << px << "' y='" << by - 4 << "' font-size='11'>auto picks:</text>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = std::find(algos.begin(), algos.end(), rows[i].auto_pick);
      const char* c = it == algos.end() ? "#000" : colors[(it - algos.begin()) % 10];
      double xa = i == 0 ? X(double(rows[0].bytes)) : (X(double(rows[i - 1].bytes)) + X(double(rows[i].bytes))) / 2;
      double xb = i + 1 == rows.size() ? X(double(rows[i].bytes))
                                       : (X(double(rows[i].bytes)) + X(double(rows[i + 1].bytes))) / 2;
      o << "<rect x='" << xa << "' y='" << by << "' width='" << std::max(xb - xa, 1.0)
        << "' height='10' fill='" << c << "'/>\n";
    }
  }
  // Legend.
  double lx = left, ly = H - 28;
  for (size_t a = 0; a < algos.size(); ++a) {
    o << "<line x1='" << lx << "' x2='" << lx + 20 << "' y1='" << ly - 8 << "' y2='" << ly - 8
      << "' stroke='" << colors[a % 10] << "' stroke-width='" << (a % 2 ? 2.0 : 2.6) << "'"
      << (a % 2 ? " stroke-dasharray='7,4'" : "") << "/><text x='" << lx + 26 << "' y='" << ly - 4
      << "'>" << esc(algos[a]) << "</text>\n";
    lx += 40 + 8.5 * double(algos[a].size());
  }
  o << "<text x='" << W - 40 << "' y='" << ly - 4
    << "' text-anchor='end' fill='#555' font-size='11'>large dots: auto's pick; alpha-beta-gamma model with link sharing</text>\n";
  o << "</svg>\n";
  return o.str();
}

void write_plot(const std::string& path, const std::string& svg) {
  bool png = path.size() > 4 && path.substr(path.size() - 4) == ".png";
  std::string svg_path = png ? path + ".svg" : path;
  {
    std::ofstream out(svg_path);
    if (!out) throw std::runtime_error("--plot: cannot write " + svg_path);
    out << svg;
  }
  if (!png) return;
  const std::string in = exec::path_argument(svg_path), out = exec::path_argument(path);
  exec::ProgramRun run = exec::run_program({"rsvg-convert", "-o", out, in});
  if (!run.succeeded()) run = exec::run_program({"convert", "-density", "110", in, out});
  if (!run.succeeded())
    throw std::runtime_error("--plot: no SVG-to-PNG converter worked (rsvg-convert, or ImageMagick's convert: " +
                             (run.started ? "exit " + std::to_string(run.exit_code) : run.error) +
                             "); the SVG is at " + svg_path);
  std::remove(svg_path.c_str());
}

int run_simulate(std::span<const std::string> args) {
  sched::PlanRequest base;
  std::string topo_file, sizes = "4K:1G", algos_arg, plot;
  bool as_json = false, as_csv = false, have_coll = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return cli::flag_value(args, i); };
    if (a == "--help" || a == "-h") {
      std::fputs(usage().c_str(), stdout);
      return 0;
    } else if (a == "--topo") topo_file = value();
    else if (a == "--coll") {
      const std::string& v = value();
      if (!sched::parse_collective(v, base.collective))
        throw std::invalid_argument("--coll: unknown collective \"" + v + "\"");
      have_coll = true;
    } else if (a == "--sizes") sizes = value();
    else if (a == "--algos") algos_arg = value();
    else if (a == "--ranks") {
      base.nranks = int(config::count_argument(a, value(), 1, INT_MAX));
    } else if (a == "--elem-size") base.elem_size = size_t(config::count_argument(a, value(), 1, 1024));
    else if (a == "--alpha-us") base.cost.alpha_us = config::number_argument(a, value(), 0, kAny);
    else if (a == "--gamma-gbs") {
      const std::string& g = value();
      const double gbs = config::number_argument(a, g, 0, kAny);
      if (!(gbs > 0)) throw std::invalid_argument("--gamma-gbs " + config::quoted(g) + ": expected a number above 0");
      base.cost.gamma_us_per_byte = 1.0 / (gbs * 1e3);
    } else if (a == "--json") as_json = true;
    else if (a == "--csv") as_csv = true;
    else if (a == "--plot") plot = value();
    else {
      std::fprintf(stderr, "topocoll simulate: unknown argument \"%s\"\n%s", a.c_str(), usage().c_str());
      return 2;
    }
  }
  if (topo_file.empty() || !have_coll) {
    std::fprintf(stderr, "topocoll simulate: --topo and --coll are required\n%s", usage().c_str());
    return 2;
  }
  auto bounds = split_list(sizes, ':');
  if (bounds.size() != 2) throw std::invalid_argument("--sizes: expected MIN:MAX, got \"" + sizes + "\"");
  const int64_t lo = config::size_argument("--sizes", bounds[0], 0, kMaxArgumentBytes);
  const int64_t hi = config::size_argument("--sizes", bounds[1], 0, kMaxArgumentBytes);
  if (lo < 1 || hi < lo) throw std::invalid_argument("--sizes: need 1 <= MIN <= MAX");
  std::vector<int64_t> list;
  for (int64_t s = int64_t(1) << int(std::ceil(std::log2(double(lo)))); s <= hi; s *= 2) list.push_back(s);
  if (list.empty()) throw std::invalid_argument("--sizes: no power of two in " + sizes);

  topo::Topology t = topo::load_topology_file(topo_file);
  base.verify = false;
  base.keep_link_detail = false;
  std::vector<std::string> algos = split_list(algos_arg, ',');
  std::vector<Row> rows;
  int nranks = 0;
  for (int64_t bytes : list) {
    sched::PlanRequest req = base;
    req.bytes = bytes;
    req.algo = "auto";
    sched::Plan autoplan = sched::make_plan(t, req);
    nranks = autoplan.placement.nranks();
    if (algos.empty())
      for (const auto& c : autoplan.candidates)
        if (c.applicable) algos.push_back(c.algo);
    Row row;
    row.bytes = bytes;
    row.auto_pick = autoplan.algo;
    for (const auto& algo : algos) {
      Result res;
      res.algo = algo;
      auto it = std::find_if(autoplan.candidates.begin(), autoplan.candidates.end(),
                             [&](const auto& c) { return c.algo == algo; });
      if (it != autoplan.candidates.end()) {
        res.ok = it->applicable;
        res.why_not = it->why_not;
        res.time_us = it->predicted_us;
        res.max_load = it->max_link_load;
      } else {
        try {
          req.algo = algo;
          sched::Plan p = sched::make_plan(t, req);
          res.ok = true;
          res.time_us = p.predicted_us;
          res.max_load = p.link_load.max_load;
        } catch (const std::invalid_argument& e) {
          res.why_not = e.what();
        }
      }
      if (res.ok) res.busbw = sched::busbw_gbs(base.collective, nranks, double(bytes), res.time_us);
      row.results.push_back(res);
    }
    rows.push_back(std::move(row));
  }

  std::string coll(sched::to_string(base.collective));
  if (as_json) {
    json doc = {{"topology", t.name()}, {"collective", coll}, {"ranks", nranks},
                {"elem_size", base.elem_size}, {"alpha_us", base.cost.alpha_us},
                {"gamma_us_per_byte", base.cost.gamma_us_per_byte}, {"algos", algos}};
    json sz = json::array();
    for (const auto& r : rows) {
      json res = json::array();
      for (const auto& x : r.results) {
        if (x.ok)
          res.push_back({{"algo", x.algo}, {"time_us", x.time_us},
                         {"algbw_gbs", sched::algbw_gbs(double(r.bytes), x.time_us)},
                         {"busbw_gbs", x.busbw}, {"max_link_load", x.max_load}});
        else
          res.push_back({{"algo", x.algo}, {"why_not", x.why_not}});
      }
      sz.push_back({{"bytes", r.bytes}, {"auto", r.auto_pick}, {"results", res}});
    }
    doc["sizes"] = sz;
    std::cout << doc.dump(1) << "\n";
  } else if (as_csv) {
    std::printf("bytes,algo,time_us,algbw_gbs,busbw_gbs,max_link_load,auto_pick\n");
    for (const auto& r : rows)
      for (const auto& x : r.results)
        if (x.ok)
          std::printf("%lld,%s,%.4f,%.4f,%.4f,%g,%d\n", (long long)r.bytes, x.algo.c_str(),
                      x.time_us, sched::algbw_gbs(double(r.bytes), x.time_us), x.busbw, x.max_load,
                      int(x.algo == r.auto_pick));
  } else {
    std::printf("%s on %s, %d ranks: predicted time (us) / busbw (GB/s)\n", coll.c_str(),
                t.name().c_str(), nranks);
    std::printf("%8s", "size");
    for (const auto& a : algos) std::printf(" %21s", a.c_str());
    std::printf("  %-10s\n", "auto");
    for (const auto& r : rows) {
      std::printf("%8s", human(r.bytes).c_str());
      for (const auto& x : r.results) {
        if (x.ok)
          std::printf(" %12.1f / %6.2f", x.time_us, x.busbw);
        else
          std::printf(" %21s", "n/a");
      }
      std::printf("  %-10s\n", r.auto_pick.c_str());
    }
    for (size_t a = 0; a < algos.size(); ++a)
      if (!rows[0].results[a].ok)
        std::printf("n/a %s: %s\n", algos[a].c_str(), rows[0].results[a].why_not.c_str());
  }
  if (!plot.empty()) {
    std::string title = coll + " on " + t.name() + " (" + std::to_string(nranks) + " ranks)";
    write_plot(plot, svg_plot(title, rows, algos));
  }
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("simulate", "cost-model sweep over sizes and algorithms (table, JSON, plot)",
                 run_simulate);

}  // namespace topocoll::cli
