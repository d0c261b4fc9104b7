// Charts against message size, as `simulate --plot` and `demo` draw them (SVG text): panels
// side by side sharing a log2 size axis, each with a linear or log y axis and one line per
// series (dots where a point asks for one), a legend and a note below.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace topocoll::cli {

struct ChartPoint {
  int64_t bytes = 0;
  double value = 0;
  double dot_radius = 0;  // 0: no dot
};

struct ChartSeries {
  std::string label;
  std::string color;
  bool dashed = false;  // dashed lines are drawn after solid ones, so lines that coincide stay visible
  std::vector<ChartPoint> points;
};

enum class ChartAxis {
  Linear,  // from 0, in a round step
  Time,    // log10 of microseconds, labelled us / ms / s
};

// A shaded horizontal band, e.g. "within 20 % of the prediction" on a ratio axis.
struct ChartBand {
  double low = 0, high = 0;
  std::string color = "#e8e8e8";
};

// Small integer-valued sizes print as 4K, 1M, 1.5G.
std::string human_bytes(int64_t bytes);
std::string svg_escape(const std::string& text);

class SizeChart {
 public:
  SizeChart(const std::string& title, const std::vector<int64_t>& sizes, int panels);

  // Panel `p` (left to right): its frame, grids and labels, an optional band, then the series.
  void draw_panel(int p, const std::string& y_label, ChartAxis axis,
                  const std::vector<ChartSeries>& series, const ChartBand* band = nullptr);
  // Where a size and a value land in panel `p` (after draw_panel set its axis), and the y of
  // its size axis: for what a caller draws beside the panel (simulate's auto-pick band).
  double x(int p, double bytes) const;
  double y(int p, double value) const;
  double axis_bottom() const { return top_ + plot_height_; }
  void add(const std::string& svg_element) { body_ << svg_element; }
  // One entry per series (its line style and label), and a note at the right.
  void legend(const std::vector<ChartSeries>& entries, const std::string& note);
  std::string svg() const;

  static constexpr double kWidth = 1200, kHeight = 560;

 private:
  struct Axis {
    ChartAxis kind = ChartAxis::Linear;
    double max = 1, step = 1;       // linear
    double log_low = 0, log_high = 1;  // time: powers of ten
  };
  double panel_left(int p) const { return left_ + p * (plot_width_ + gap_); }

  std::vector<int64_t> sizes_;
  std::vector<Axis> axes_;
  double x_low_ = 0, x_high_ = 1;
  const double top_ = 70, bottom_ = 130, left_ = 80, gap_ = 110;
  double plot_width_ = 0, plot_height_ = 0;
  std::ostringstream body_;
  std::string title_;
};

}  // namespace topocoll::cli
