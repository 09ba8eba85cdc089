// render_sweep_svg: a self-contained SVG with two line charts against concurrency.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "bench/report.h"

namespace strata::bench {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// A "nice" axis maximum and step for values up to `max_value`.
std::pair<double, double> nice_axis(double max_value) {
  if (!(max_value > 0)) return {1.0, 0.25};
  double raw = max_value / 5.0;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  return {std::ceil(max_value / step) * step, step};
}

std::string num(double v) {
  char buf[32];
  if (v >= 100 || v == std::floor(v))
    snprintf(buf, sizeof(buf), "%.0f", v);
  else
    snprintf(buf, sizeof(buf), "%.2g", v);
  return buf;
}

struct Line {
  std::string label;
  std::string color;
  bool dashed = false;
  std::vector<std::pair<size_t, double>> points;  // (x index, y)
};

void panel(std::ostringstream& o, double x0, double y0, double w, double h,
           const std::string& title, const std::string& y_label,
           const std::vector<std::string>& x_labels, const std::vector<Line>& lines) {
  double max_y = 0;
  for (const auto& l : lines) {
    for (const auto& [x, y] : l.points) max_y = std::max(max_y, y);
  }
  auto [top, step] = nice_axis(max_y);
  size_t n = x_labels.size();
  auto px = [&](size_t i) { return x0 + (n <= 1 ? w / 2 : w * static_cast<double>(i) / (n - 1)); };
  auto py = [&, top = top](double v) { return y0 + h - h * v / top; };
  o << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 - 14
    << "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" << esc(title)
    << "</text>\n";
  for (double v = 0; v <= top + step / 2; v += step) {
    o << "<line x1=\"" << x0 << "\" y1=\"" << py(v) << "\" x2=\"" << x0 + w << "\" y2=\"" << py(v)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << x0 - 6 << "\" y=\"" << py(v) + 4
      << "\" text-anchor=\"end\" font-size=\"11\">" << num(v) << "</text>\n";
  }
  o << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << h
    << "\" fill=\"none\" stroke=\"#555\"/>\n";
  for (size_t i = 0; i < n; ++i) {
    o << "<text x=\"" << px(i) << "\" y=\"" << y0 + h + 16
      << "\" text-anchor=\"middle\" font-size=\"11\">" << esc(x_labels[i]) << "</text>\n";
  }
  o << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 + h + 34
    << "\" text-anchor=\"middle\" font-size=\"12\">max concurrency</text>\n";
  o << "<text x=\"" << x0 - 48 << "\" y=\"" << y0 + h / 2 << "\" text-anchor=\"middle\" "
    << "font-size=\"12\" transform=\"rotate(-90 " << x0 - 48 << " " << y0 + h / 2 << ")\">"
    << esc(y_label) << "</text>\n";
  for (const auto& l : lines) {
    std::string pts;
    for (const auto& [x, y] : l.points)
      pts += std::to_string(px(x)) + "," + std::to_string(py(y)) + " ";
    o << "<polyline fill=\"none\" stroke=\"" << l.color << "\" stroke-width=\"2\""
      << (l.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << pts << "\"/>\n";
    for (const auto& [x, y] : l.points) {
      o << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"3.5\" fill=\"" << l.color
        << "\"><title>" << esc(l.label) << ": " << num(y) << "</title></circle>\n";
    }
  }
}

}  // namespace

std::string render_sweep_svg(const std::vector<SweepRow>& rows, const std::string& title) {
  // X categories: the distinct concurrency values, "unlimited" last.
  std::set<int64_t> concs;
  bool unlimited = false;
  for (const auto& r : rows) {
    if (r.max_concurrency)
      concs.insert(*r.max_concurrency);
    else
      unlimited = true;
  }
  std::vector<std::string> x_labels;
  std::map<int64_t, size_t> x_index;
  for (int64_t c : concs) {
    x_index[c] = x_labels.size();
    x_labels.push_back(std::to_string(c));
  }
  size_t unlimited_index = x_labels.size();
  if (unlimited) x_labels.push_back("unlimited");
  // Series: one per (input_len, output_len).
  std::map<std::pair<int64_t, int64_t>, std::vector<const SweepRow*>> series;
  for (const auto& r : rows) {
    series[{r.input_len.value_or(-1), r.output_len.value_or(-1)}].push_back(&r);
  }
  std::vector<Line> thr, lat;
  size_t k = 0;
  for (const auto& [key, members] : series) {
    std::string color = kColors[k++ % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string name = key.first >= 0 || key.second >= 0
                           ? "in " + (key.first >= 0 ? std::to_string(key.first) : "-") +
                                 " / out " + (key.second >= 0 ? std::to_string(key.second) : "-")
                           : "run";
    Line t{name, color, false, {}}, ttft{name + " mean TTFT", color, false, {}},
        e2e{name + " mean E2EL", color, true, {}};
    std::vector<const SweepRow*> sorted = members;
    auto idx = [&](const SweepRow* r) {
      return r->max_concurrency ? x_index[*r->max_concurrency] : unlimited_index;
    };
    std::sort(sorted.begin(), sorted.end(),
              [&](const SweepRow* a, const SweepRow* b) { return idx(a) < idx(b); });
    for (const SweepRow* r : sorted) {
      t.points.emplace_back(idx(r), r->output_tok_s);
      ttft.points.emplace_back(idx(r), r->ttft_mean_ms);
      e2e.points.emplace_back(idx(r), r->e2el_mean_ms);
    }
    thr.push_back(std::move(t));
    lat.push_back(std::move(ttft));
    lat.push_back(std::move(e2e));
  }
  const double kW = 1000, kPanelW = 390, kPanelH = 300;
  double legend_y = 60 + kPanelH + 60;
  double height = legend_y + 20.0 * static_cast<double>(lat.size() + 1) + 10;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << kW << " " << height << "\" font-family=\"sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"17\">"
    << esc(title) << "</text>\n";
  panel(o, 90, 60, kPanelW, kPanelH, "Output throughput", "tokens/s", x_labels, thr);
  panel(o, 590, 60, kPanelW, kPanelH, "Latency", "ms", x_labels, lat);
  double y = legend_y;
  for (const auto& l : lat) {
    o << "<line x1=\"90\" y1=\"" << y - 4 << "\" x2=\"120\" y2=\"" << y - 4 << "\" stroke=\""
      << l.color << "\" stroke-width=\"2\"" << (l.dashed ? " stroke-dasharray=\"6,4\"" : "")
      << "/>\n<text x=\"128\" y=\"" << y << "\" font-size=\"12\">" << esc(l.label) << "</text>\n";
    y += 20;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace strata::bench
