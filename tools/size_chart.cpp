#include "tools/size_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace topocoll::cli {

std::string human_bytes(int64_t b) {
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

std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

SizeChart::SizeChart(const std::string& title, const std::vector<int64_t>& sizes, int panels)
    : sizes_(sizes), axes_(std::size_t(std::max(panels, 1))), title_(title) {
  const int n = int(axes_.size());
  plot_width_ = (kWidth - left_ - gap_ * (n - 1) - 40) / n;
  plot_height_ = kHeight - top_ - bottom_;
  if (!sizes_.empty()) {
    x_low_ = std::log2(double(sizes_.front()));
    x_high_ = std::log2(double(sizes_.back()));
  }
  if (x_high_ <= x_low_) x_high_ = x_low_ + 1;
}

double SizeChart::x(int p, double bytes) const {
  return panel_left(p) + (std::log2(bytes) - x_low_) / (x_high_ - x_low_) * plot_width_;
}

double SizeChart::y(int p, double v) const {
  const Axis& a = axes_[std::size_t(p)];
  if (a.kind == ChartAxis::Linear) return top_ + plot_height_ - v / a.max * plot_height_;
  return top_ + plot_height_ -
         (std::log10(std::max(v, 1e-3)) - a.log_low) / (a.log_high - a.log_low) * plot_height_;
}

void SizeChart::draw_panel(int p, const std::string& y_label, ChartAxis kind,
                           const std::vector<ChartSeries>& series, const ChartBand* band) {
  Axis& a = axes_[std::size_t(p)];
  a.kind = kind;
  double vmax = 0, vmin = 1e300;
  for (const auto& s : series)
    for (const auto& pt : s.points) {
      vmax = std::max(vmax, pt.value);
      vmin = std::min(vmin, pt.value);
    }
  if (band) vmax = std::max(vmax, band->high);
  if (kind == ChartAxis::Linear) {
    if (vmax <= 0) vmax = 1;
    // Round the axis up to a nice step.
    a.step = std::pow(10, std::floor(std::log10(vmax)));
    if (vmax / a.step <= 2) a.step /= 5;
    else if (vmax / a.step <= 5) a.step /= 2;
    a.max = std::ceil(vmax / a.step) * a.step;
  } else {
    a.log_low = std::floor(std::log10(std::max(vmin, 1e-3)));
    a.log_high = std::ceil(std::log10(std::max(vmax, 1e-3)));
    if (a.log_high <= a.log_low) a.log_high = a.log_low + 1;
  }
  const double px = panel_left(p), pw = plot_width_, ph = plot_height_, top = top_;
  auto X = [&](double bytes) { return x(p, bytes); };
  auto Y = [&](double v) { return y(p, v); };
  std::ostringstream& o = body_;
  o << "<rect x='" << px << "' y='" << top << "' width='" << pw << "' height='" << ph
    << "' fill='#fafafa' stroke='#333'/>\n";
  if (band)
    o << "<rect x='" << px << "' y='" << Y(band->high) << "' width='" << pw << "' height='"
      << Y(band->low) - Y(band->high) << "' fill='" << band->color << "'/>\n";
  // Horizontal grid and labels.
  if (kind == ChartAxis::Linear) {
    for (double v = 0; v <= a.max + 1e-9; v += a.step) {
      o << "<line x1='" << px << "' x2='" << px + pw << "' y1='" << Y(v) << "' y2='" << Y(v)
        << "' stroke='#ddd'/>\n";
      o << "<text x='" << px - 6 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << v << "</text>\n";
    }
  } else {
    for (double e = a.log_low; e <= a.log_high + 1e-9; e += 1) {
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
  // Vertical grid at every (other) size.
  const std::size_t every = sizes_.size() > 12 ? 2 : 1;
  for (std::size_t i = 0; i < sizes_.size(); i += every) {
    double xv = X(double(sizes_[i]));
    o << "<line x1='" << xv << "' x2='" << xv << "' y1='" << top << "' y2='" << top + ph
      << "' stroke='#eee'/>\n";
    o << "<text x='" << xv << "' y='" << top + ph + 18 << "' text-anchor='middle'>"
      << human_bytes(sizes_[i]) << "</text>\n";
  }
  o << "<text x='" << px + pw / 2 << "' y='" << top + ph + 38
    << "' text-anchor='middle'>message size (bytes, nccl-tests size)</text>\n";
  o << "<text transform='translate(" << px - 58 << "," << top + ph / 2
    << ") rotate(-90)' text-anchor='middle'>" << svg_escape(y_label) << "</text>\n";
  for (bool dashed : {false, true})
    for (const auto& s : series) {
      if (s.dashed != dashed || s.points.empty()) continue;
      std::string pts;
      for (const auto& pt : s.points)
        pts += std::to_string(X(double(pt.bytes))) + "," + std::to_string(Y(pt.value)) + " ";
      o << "<polyline fill='none' stroke='" << s.color << "' stroke-width='" << (dashed ? 2.0 : 2.6) << "'"
        << (dashed ? " stroke-dasharray='7,4'" : "") << " points='" << pts << "'/>\n";
      for (const auto& pt : s.points)
        if (pt.dot_radius > 0)
          o << "<circle cx='" << X(double(pt.bytes)) << "' cy='" << Y(pt.value) << "' r='"
            << pt.dot_radius << "' fill='" << s.color << "'/>\n";
    }
}

void SizeChart::legend(const std::vector<ChartSeries>& entries, const std::string& note) {
  std::ostringstream& o = body_;
  double lx = left_, ly = kHeight - 28;
  for (const auto& e : entries) {
    o << "<line x1='" << lx << "' x2='" << lx + 20 << "' y1='" << ly - 8 << "' y2='" << ly - 8
      << "' stroke='" << e.color << "' stroke-width='" << (e.dashed ? 2.0 : 2.6) << "'"
      << (e.dashed ? " stroke-dasharray='7,4'" : "") << "/><text x='" << lx + 26 << "' y='" << ly - 4
      << "'>" << svg_escape(e.label) << "</text>\n";
    lx += 40 + 8.5 * double(e.label.size());
  }
  o << "<text x='" << kWidth - 40 << "' y='" << ly - 4
    << "' text-anchor='end' fill='#555' font-size='11'>" << svg_escape(note) << "</text>\n";
}

std::string SizeChart::svg() const {
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << kHeight
    << "' font-family='DejaVu Sans, Arial, sans-serif' font-size='13'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << kWidth / 2 << "' y='28' text-anchor='middle' font-size='17' font-weight='bold'>"
    << svg_escape(title_) << "</text>\n";
  o << body_.str();
  o << "</svg>\n";
  return o.str();
}

}  // namespace topocoll::cli
