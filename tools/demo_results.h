// The demo's measurements next to the model's predictions: the table, one line per pair of
// schedules that differ only in how they load the links (the contention effect), the largest
// deviation from the model, and the chart of both against size (tools/size_chart.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace topocoll::cli {

struct DemoMeasurement {
  std::string algo;
  int64_t bytes = 0;
  double measured_us = 0, predicted_us = 0;
  double link_load = 0;  // most flows on one directed link in a step
  int64_t wrong = 0;     // elements that differed from the reference (-1: not checked)
};

// `topocoll bench --json` rows. Throws naming the file and what is missing.
std::vector<DemoMeasurement> read_bench_rows(const std::string& json_path);

int64_t wrong_elements(const std::vector<DemoMeasurement>& rows);

// Aligned text for the terminal, or a markdown table.
std::string measurement_table(const std::vector<DemoMeasurement>& rows, bool markdown);

// "ring (link load 4) takes 3.9-4.1x as long as ring-topo (load 1); the model says 4.0x",
// over every size both ran at; "" when either is missing.
std::string contention_line(const std::vector<DemoMeasurement>& rows, const std::string& slower,
                            const std::string& faster);

// "every algorithm within 20 % of its prediction (largest: hd at 256K, +17.6 %)", or which
// are not.
std::string deviation_line(const std::vector<DemoMeasurement>& rows, double tolerance);

// Two panels against size: time (log), measured solid with dots and predicted dashed, one
// colour per algorithm; measured / predicted with the tolerance band shaded.
std::string measurement_chart(const std::vector<DemoMeasurement>& rows, const std::string& title,
                              double tolerance);

}  // namespace topocoll::cli
