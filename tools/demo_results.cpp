#include "tools/demo_results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tools/size_chart.h"

namespace topocoll::cli {
namespace {

// As perf/fabric/calibrate.py colours them, so the demo's chart reads like the calibration's.
std::string color_of(const std::string& algo) {
  static const std::map<std::string, std::string> colors = {
      {"ring", "#1f77b4"}, {"ring-topo", "#2ca02c"}, {"hd", "#d62728"},       {"hd-naive", "#ff7f0e"},
      {"fc", "#9467bd"},   {"fc-direct", "#8c564b"}, {"hier", "#e377c2"},     {"hier-hd", "#17becf"},
      {"direct", "#7f7f7f"}, {"rd", "#bcbd22"}};
  const auto it = colors.find(algo);
  return it == colors.end() ? "#000000" : it->second;
}

std::string format(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

// "4.0x", or "3.9-4.1x" when the sizes disagree at this precision.
std::string ratio_range(const std::vector<double>& ratios) {
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  const std::string a = format("%.1f", *lo), b = format("%.1f", *hi);
  return (a == b ? a : a + "-" + b) + "x";
}

// Algorithms in the order they first appear (bench's --algos order).
std::vector<std::string> algorithms(const std::vector<DemoMeasurement>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.algo) == out.end()) out.push_back(r.algo);
  return out;
}

}  // namespace

std::vector<DemoMeasurement> read_bench_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("no measurements: " + path + " is missing");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not bench's JSON (" + e.what() + ")");
  }
  std::vector<DemoMeasurement> rows;
  for (const auto& r : doc) {
    for (const char* key : {"algo", "bytes", "time_us", "wrong"})
      if (!r.contains(key)) throw std::runtime_error(path + ": a row without \"" + key + "\"");
    rows.push_back({r["algo"].get<std::string>(), r["bytes"].get<int64_t>(), r["time_us"].get<double>(),
                    r.value("predicted_us", -1.0), r.value("max_link_load", -1.0), r["wrong"].get<int64_t>()});
  }
  return rows;
}

int64_t wrong_elements(const std::vector<DemoMeasurement>& rows) {
  int64_t wrong = 0;
  for (const auto& r : rows) wrong += std::max<int64_t>(0, r.wrong);
  return wrong;
}

std::string measurement_table(const std::vector<DemoMeasurement>& rows, bool markdown) {
  std::string out;
  char line[256];
  if (markdown)
    out = "| size | algo | link load | predicted ms | measured ms | measured / predicted | #wrong |\n"
          "|---|---|---|---|---|---|---|\n";
  else {
    std::snprintf(line, sizeof line, "  %8s %10s %9s %13s %12s %10s %7s\n", "size", "algo", "link load",
                  "predicted ms", "measured ms", "meas/pred", "#wrong");
    out = line;
  }
  for (const auto& r : rows) {
    const std::string ratio = r.predicted_us > 0 ? format("%.2f", r.measured_us / r.predicted_us) : "-";
    const std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
    if (markdown)
      std::snprintf(line, sizeof line, "| %s | %s | %g | %.2f | %.2f | %s | %s |\n", human_bytes(r.bytes).c_str(),
                    r.algo.c_str(), r.link_load, r.predicted_us / 1e3, r.measured_us / 1e3, ratio.c_str(),
                    wrong.c_str());
    else
      std::snprintf(line, sizeof line, "  %8s %10s %9g %13.2f %12.2f %10s %7s\n", human_bytes(r.bytes).c_str(),
                    r.algo.c_str(), r.link_load, r.predicted_us / 1e3, r.measured_us / 1e3, ratio.c_str(),
                    wrong.c_str());
    out += line;
  }
  return out;
}

std::string contention_line(const std::vector<DemoMeasurement>& rows, const std::string& slower,
                            const std::string& faster) {
  std::map<int64_t, const DemoMeasurement*> slow, fast;
  for (const auto& r : rows) {
    if (r.algo == slower) slow[r.bytes] = &r;
    if (r.algo == faster) fast[r.bytes] = &r;
  }
  std::vector<double> measured, predicted;
  double slow_load = 0, fast_load = 0;
  for (const auto& [bytes, s] : slow) {
    const auto f = fast.find(bytes);
    if (f == fast.end() || f->second->measured_us <= 0 || f->second->predicted_us <= 0) continue;
    measured.push_back(s->measured_us / f->second->measured_us);
    predicted.push_back(s->predicted_us / f->second->predicted_us);
    slow_load = std::max(slow_load, s->link_load);
    fast_load = std::max(fast_load, f->second->link_load);
  }
  if (measured.empty()) return "";
  return slower + " (link load " + format("%g", slow_load) + ") takes " + ratio_range(measured) +
         " as long as " + faster + " (load " + format("%g", fast_load) + "); the model says " +
         ratio_range(predicted);
}

std::string deviation_line(const std::vector<DemoMeasurement>& rows, double tolerance) {
  const DemoMeasurement* worst = nullptr;
  std::vector<std::string> outside;
  for (const auto& r : rows) {
    if (r.predicted_us <= 0) continue;
    const double error = r.measured_us / r.predicted_us - 1;
    if (!worst || std::abs(error) > std::abs(worst->measured_us / worst->predicted_us - 1)) worst = &r;
    if (std::abs(error) > tolerance)
      outside.push_back(r.algo + " at " + human_bytes(r.bytes) + " " + format("%+.0f %%", error * 100));
  }
  if (!worst) return "no predictions to compare with";
  const std::string largest = worst->algo + " at " + human_bytes(worst->bytes) + ", " +
                              format("%+.1f %%", (worst->measured_us / worst->predicted_us - 1) * 100);
  if (outside.empty())
    return "every algorithm within " + format("%.0f", tolerance * 100) + " % of its prediction (largest: " +
           largest + ")";
  std::string list;
  for (const auto& o : outside) list += (list.empty() ? "" : ", ") + o;
  return std::to_string(outside.size()) + " of " + std::to_string(rows.size()) + " cases more than " +
         format("%.0f", tolerance * 100) + " % off their prediction: " + list;
}

std::string measurement_chart(const std::vector<DemoMeasurement>& rows, const std::string& title,
                              double tolerance) {
  std::set<int64_t> size_set;
  for (const auto& r : rows) size_set.insert(r.bytes);
  const std::vector<int64_t> sizes(size_set.begin(), size_set.end());
  SizeChart chart(title, sizes, 2);
  std::vector<ChartSeries> times, ratios, legend;
  for (const auto& algo : algorithms(rows)) {
    ChartSeries measured{algo, color_of(algo), false, {}}, predicted{algo, color_of(algo), true, {}},
        ratio{algo, color_of(algo), false, {}};
    for (const auto& r : rows) {
      if (r.algo != algo) continue;
      measured.points.push_back({r.bytes, r.measured_us, 3.5});
      if (r.predicted_us > 0) {
        predicted.points.push_back({r.bytes, r.predicted_us, 0});
        ratio.points.push_back({r.bytes, r.measured_us / r.predicted_us, 3.5});
      }
    }
    legend.push_back(measured);
    times.push_back(std::move(measured));
    times.push_back(std::move(predicted));
    ratios.push_back(std::move(ratio));
  }
  chart.draw_panel(0, "allreduce time (log)", ChartAxis::Time, times);
  const ChartBand band{1 - tolerance, 1 + tolerance};
  chart.draw_panel(1, "measured / predicted", ChartAxis::Linear, ratios, &band);
  legend.push_back({"predicted", "#555555", true, {}});
  chart.legend(legend, "solid: measured (median of the slowest rank); dashed: the model; grey band: within " +
                           format("%.0f", tolerance * 100) + " %");
  return chart.svg();
}

}  // namespace topocoll::cli
