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
#include "config/user_files.h"
#include "exec/private_conversion.h"
#include "sched/algorithm_registry.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/plan.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/cost_flags.h"
#include "tools/flag_value.h"
#include "tools/size_chart.h"
#include "tools/size_sweep.h"
#include "tools/split_list.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using nlohmann::json;

std::string usage() {
  return
    "usage: topocoll simulate --topo FILE --coll allreduce|reduce_scatter|allgather|alltoall\n"
    "                         [--sizes 4K:1G] [--algos ring,ring-topo,hd,...] [--ranks N]\n"
    "                         [--elem-size B] [--alpha-us X] [--alpha-msg-us X] [--gamma-gbs G]\n"
    "                         [--json|--csv] [--plot out.svg|out.png]\n"
    "Predicted time and bus bandwidth (nccl-tests factors) per size and algorithm, and the\n"
    "algorithm `auto` picks. Sizes are the powers of two between the bounds (K/M/G suffixes),\n"
    "or a list (4K,1M,64M); each as the collective runs it, in whole elements per rank: a size\n"
    "below one element per rank, or that runs as a size already listed, is left out (said so).\n"
    "--algos (or --algo): algorithms of `topocoll algorithms` (" + sched::algorithm_list() + "),\n"
    "each priced as `plan --algo` prices it (fc too, though auto passes over it); `auto` is the\n"
    "last column anyway. Default: those auto weighs that apply.\n";
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

// Two panels: bus bandwidth (linear) and time (log) against size (log2), one line per
// algorithm; the band under the x axis shows which algorithm `auto` picks at each size.
std::string svg_plot(const std::string& title, const std::vector<Row>& rows,
                     const std::vector<std::string>& algos) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                 "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  std::vector<int64_t> sizes;
  for (const auto& r : rows) sizes.push_back(r.bytes);
  SizeChart chart(title, sizes, 2);
  std::vector<ChartSeries> legend;
  for (size_t a = 0; a < algos.size(); ++a)
    legend.push_back({algos[a], colors[a % 10], a % 2 == 1, {}});  // every other one dashed
  for (int panel = 0; panel < 2; ++panel) {
    std::vector<ChartSeries> series = legend;
    for (size_t a = 0; a < algos.size(); ++a)
      for (const auto& r : rows) {
        const Result& res = r.results[a];
        if (res.ok)
          series[a].points.push_back(
              {r.bytes, panel == 0 ? res.busbw : res.time_us, r.auto_pick == res.algo ? 4.5 : 2.5});
      }
    chart.draw_panel(panel, panel == 0 ? "bus bandwidth (GB/s)" : "predicted time (log)",
                     panel == 0 ? ChartAxis::Linear : ChartAxis::Time, series);
    // Auto-pick band.
    std::ostringstream o;
    double by = chart.axis_bottom() + 50;
    o << "<text x='" << chart.x(panel, double(rows.front().bytes)) << "' y='" << by - 4
      << "' font-size='11'>auto picks:</text>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = std::find(algos.begin(), algos.end(), rows[i].auto_pick);
      const char* c = it == algos.end() ? "#000" : colors[(it - algos.begin()) % 10];
      auto X = [&](size_t k) { return chart.x(panel, double(rows[k].bytes)); };
      double xa = i == 0 ? X(0) : (X(i - 1) + X(i)) / 2;
      double xb = i + 1 == rows.size() ? X(i) : (X(i) + X(i + 1)) / 2;
      o << "<rect x='" << xa << "' y='" << by << "' width='" << std::max(xb - xa, 1.0)
        << "' height='10' fill='" << c << "'/>\n";
    }
    chart.add(o.str());
  }
  chart.legend(legend, "large dots: auto's pick; alpha-beta-gamma model with link sharing");
  return chart.svg();
}

void write_plot(const std::string& path, const std::string& svg) {
  const bool png = path.size() > 4 && path.substr(path.size() - 4) == ".png";
  std::string picture = svg;
  if (png) {
    const exec::Conversion converted = exec::convert_privately(
        svg, "svg", "png",
        {{"rsvg-convert", "-o", "{out}", "{in}"}, {"convert", "-density", "110", "{in}", "{out}"}},
        "rsvg-convert and ImageMagick's convert (to make a PNG)");
    if (!converted.succeeded())
      throw std::runtime_error("--plot: " + converted.failure + "; an .svg name needs none");
    picture = converted.output;
  }
  try {
    config::replace_file(path, picture);
  } catch (const config::UserFileError& e) {
    throw std::runtime_error(std::string("--plot: ") + e.what());
  }
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
    else if (a == "--algos" || a == "--algo") algos_arg = value();
    else if (a == "--ranks") {
      base.nranks = int(config::count_argument(a, value(), 1, INT_MAX));
    } else if (a == "--elem-size") base.elem_size = size_t(config::count_argument(a, value(), 1, 1024));
    else if (a == "--alpha-us" || a == "--alpha-msg-us" || a == "--gamma-gbs") parse_cost_flag(a, value(), base.cost);
    else if (a == "--json") as_json = true;
    else if (a == "--csv") as_csv = true;
    else if (a == "--plot") plot = value();
    else {
      std::fprintf(stderr, "topocoll simulate: unknown argument \"%s\"\n%s", a.c_str(), usage().c_str());
      return 2;
    }
  }
  if (as_json && as_csv) throw std::invalid_argument("--json and --csv: give one");
  if (topo_file.empty() || !have_coll) {
    std::fprintf(stderr, "topocoll simulate: missing %s (--topo and --coll are required)\n%s",
                 topo_file.empty() && !have_coll ? "--topo, --coll" : topo_file.empty() ? "--topo" : "--coll",
                 usage().c_str());
    return 2;
  }
  if (!plot.empty()) {  // before the sweep: a wrong name costs nothing
    const bool svg = plot.size() > 4 && plot.substr(plot.size() - 4) == ".svg";
    const bool png = plot.size() > 4 && plot.substr(plot.size() - 4) == ".png";
    if (!svg && !png) throw std::invalid_argument("--plot " + plot + ": the name must end in .svg or .png");
    config::check_replaceable(plot);
  }
  std::vector<int64_t> list;
  if (sizes.find(':') == std::string::npos) {  // a list, or one size
    list = parse_size_sweep(sizes, 2.0);
    std::sort(list.begin(), list.end());
  } else {
    auto bounds = split_list(sizes, ':');
    if (bounds.size() != 2)
      throw std::invalid_argument("--sizes: expected MIN:MAX or a list A,B,..., got \"" + sizes + "\"");
    const int64_t lo = config::size_argument("--sizes", bounds[0], 0, kMaxArgumentBytes);
    const int64_t hi = config::size_argument("--sizes", bounds[1], 0, kMaxArgumentBytes);
    if (lo < 1 || hi < lo) throw std::invalid_argument("--sizes: need 1 <= MIN <= MAX");
    for (int64_t s = int64_t(1) << int(std::ceil(std::log2(double(lo)))); s <= hi; s *= 2) list.push_back(s);
    if (list.empty()) throw std::invalid_argument("--sizes: no power of two in " + sizes);
  }

  topo::Topology t = load_topology_argument(topo_file);
  base.verify = false;
  base.keep_link_detail = false;
  std::vector<std::string> algos = split_list(algos_arg, ',');
  std::erase(algos, std::string("auto"));  // its column is there anyway
  const bool algos_given = !algos.empty();
  for (const auto& algo : algos)  // a typo is an error, not a column of n/a
    if (!sched::find_algorithm(algo))
      throw std::invalid_argument("--algos: '" + algo + "' is not an algorithm of `topocoll algorithms`");
  std::vector<Row> rows;
  int nranks = 0;
  std::vector<int64_t> left_out;  // sizes that run as nothing, or as a size already listed
  for (int64_t bytes : list) {
    sched::PlanRequest req = base;
    req.bytes = bytes;
    req.algo = "auto";
    nranks = req.nranks > 0 ? req.nranks : int(t.endpoints().size());
    // The size the collective moves: the gathers' P parts of whole elements (a power of two
    // over 3 ranks runs rounded down, and its bandwidth is of what it moves).
    const int64_t moved = sched::size_of_count(base.collective, sched::plan_count(req, nranks), base.elem_size, nranks);
    if (moved == 0 || std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.bytes == moved; })) {
      left_out.push_back(bytes);
      continue;
    }
    sched::Plan autoplan = sched::make_plan(t, req);
    nranks = autoplan.placement.nranks();
    if (algos.empty() && !algos_given)
      for (const auto& c : autoplan.candidates)
        if (c.applicable) algos.push_back(c.algo);
    Row row;
    row.bytes = moved;
    row.auto_pick = autoplan.algo;
    for (const auto& algo : algos) {
      Result res;
      res.algo = algo;
      auto it = std::find_if(autoplan.candidates.begin(), autoplan.candidates.end(),
                             [&](const auto& c) { return c.algo == algo; });
      // One auto weighed and found applicable is priced as auto priced it; any other (fc,
      // which auto passes over as not bitwise identical) as `plan --algo` prices it.
      if (it != autoplan.candidates.end() && it->applicable) {
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
      if (res.ok) res.busbw = sched::busbw_gbs(base.collective, nranks, double(row.bytes), res.time_us);
      row.results.push_back(res);
    }
    rows.push_back(std::move(row));
  }

  if (rows.empty())
    throw std::invalid_argument("--sizes " + sizes + ": every size runs as an empty collective over " +
                                std::to_string(nranks) + " ranks of " + std::to_string(base.elem_size) +
                                "-byte elements");
  std::string left_out_text;
  for (int64_t b : left_out) left_out_text += (left_out_text.empty() ? "" : ", ") + human_bytes(b);
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
    doc["left_out_bytes"] = left_out;
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
      std::printf("%8s", human_bytes(r.bytes).c_str());
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
    if (!left_out.empty())
      std::printf("left out: %s (below one element per rank, or running as a size already listed)\n",
                  left_out_text.c_str());
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
