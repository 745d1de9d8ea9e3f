#include "cli/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "cli/bench_stats.h"
#include "core/error.h"

namespace pypto::bench {
namespace {

constexpr int kW = 560, kH = 300, kL = 64, kR = 16, kT = 34, kB = 46;  // size and margins
const char* kColors[] = {"#2f6fdf", "#e0672b", "#2a9d58", "#a34fc9", "#c9a227", "#d6336c", "#1b9aaa", "#6c757d"};

std::string fmt(double v) {
  char b[32];
  const double a = std::fabs(v);
  if (a < 1e5 && v == std::round(v)) std::snprintf(b, sizeof b, "%.0f", v);  // integral: no decimals
  else if (a != 0 && (a >= 1e5 || a < 1e-2)) std::snprintf(b, sizeof b, "%.2g", v);
  else if (a >= 100) std::snprintf(b, sizeof b, "%.0f", v);
  else if (a >= 10) std::snprintf(b, sizeof b, "%.1f", v);
  else std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// "Nice" tick positions covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int target = 5) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

struct Frame {
  double x0, x1, y0, y1;
  double px(double x) const { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); }
  double py(double y) const { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); }
};

std::string open_svg(const std::string& title) {
  char b[512];
  std::snprintf(b, sizeof b,
                "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' viewBox='0 0 %d %d' "
                "font-family='sans-serif' font-size='11'><rect width='100%%' height='100%%' fill='white'/>"
                "<text x='%d' y='20' font-size='13' font-weight='bold'>",
                kW, kH, kW, kH, kL);
  return b + html_escape(title) + "</text>";
}

// Axes, grid and labels; x tick labels come from `xlabel_of` (for log axes).
template <typename F>
std::string axes(const Frame& f, const std::vector<double>& xt, const std::vector<double>& yt, const std::string& xlabel,
                 const std::string& ylabel, F xlabel_of) {
  std::string s;
  char b[400];
  for (double y : yt) {
    std::snprintf(b, sizeof b,
                  "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' stroke='#e5e5e5'/><text x='%d' y='%.1f' "
                  "text-anchor='end' fill='#444'>%s</text>",
                  kL, kW - kR, f.py(y), f.py(y), kL - 6, f.py(y) + 4, fmt(y).c_str());
    s += b;
  }
  for (double x : xt) {
    std::snprintf(b, sizeof b,
                  "<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' stroke='#999'/><text x='%.1f' y='%d' "
                  "text-anchor='middle' fill='#444'>%s</text>",
                  f.px(x), f.px(x), kH - kB, kH - kB + 4, f.px(x), kH - kB + 16, xlabel_of(x).c_str());
    s += b;
  }
  std::snprintf(b, sizeof b,
                "<line x1='%d' x2='%d' y1='%d' y2='%d' stroke='#333'/><line x1='%d' x2='%d' y1='%d' y2='%d' "
                "stroke='#333'/><text x='%d' y='%d' text-anchor='middle'>",
                kL, kW - kR, kH - kB, kH - kB, kL, kL, kT, kH - kB, (kL + kW - kR) / 2, kH - 12);
  s += b + html_escape(xlabel) + "</text>";
  std::snprintf(b, sizeof b, "<text transform='translate(14,%d) rotate(-90)' text-anchor='middle'>", (kT + kH - kB) / 2);
  s += b + html_escape(ylabel) + "</text>";
  return s;
}

// Top-left (for rising lines) or bottom-right (for CDFs, which fill the top-left).
std::string legend(const std::vector<Series>& series, bool top_left) {
  std::string s;
  char b[300];
  for (size_t i = 0; i < series.size(); ++i) {
    const int x = top_left ? kL + 10 : kW - kR - 150;
    const int y = top_left ? kT + 6 + int(i) * 15 : kH - kB - 14 - int(series.size() - 1 - i) * 15;
    std::snprintf(b, sizeof b, "<rect x='%d' y='%d' width='10' height='10' fill='%s'/><text x='%d' y='%d'>", x, y,
                  kColors[i % 8], x + 14, y + 9);
    s += b + html_escape(series[i].label) + "</text>";
  }
  return s;
}

std::string empty_svg(const std::string& title) {
  return open_svg(title) + "<text x='" + std::to_string(kW / 2) + "' y='" + std::to_string(kH / 2) +
         "' text-anchor='middle' fill='#888'>no data</text></svg>";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string svg_histogram(const std::string& title, const std::string& xlabel, const std::vector<double>& v, int bins) {
  if (v.empty()) return empty_svg(title);
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) lo -= 0.5 * std::max(1e-3, std::fabs(lo)), hi += 0.5 * std::max(1e-3, std::fabs(hi));
  std::vector<int> counts(size_t(bins), 0);
  for (double x : v) counts[size_t(std::min(bins - 1, int((x - lo) / (hi - lo) * bins)))]++;
  const int cmax = *std::max_element(counts.begin(), counts.end());
  std::vector<double> yt = ticks(0, std::max(cmax, 4), 4);  // counts: whole-number ticks
  Frame f{lo, hi, 0, std::max(double(cmax), yt.back())};
  std::string s = open_svg(title) + axes(f, ticks(lo, hi), yt, xlabel, "requests / samples", fmt);
  char b[400];
  for (int i = 0; i < bins; ++i) {
    if (!counts[size_t(i)]) continue;
    const double x0 = f.px(lo + (hi - lo) * i / bins), x1 = f.px(lo + (hi - lo) * (i + 1) / bins);
    std::snprintf(b, sizeof b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s' opacity='0.85'/>", x0,
                  f.py(counts[size_t(i)]), std::max(1.0, x1 - x0 - 1), f.py(0) - f.py(counts[size_t(i)]), kColors[0]);
    s += b;
  }
  const Summary sm = summarize(v, {99});
  const std::pair<const char*, double> marks[] = {{"mean", sm.mean}, {"p50", sm.median}, {"p99", sm.percentiles[0].second}};
  int k = 0;
  for (const auto& [name, x] : marks) {
    // Labels right of the line, or left of it near the right edge; one row per mark.
    const bool right_edge = f.px(x) > kW - kR - 90;
    std::snprintf(b, sizeof b,
                  "<line x1='%.1f' x2='%.1f' y1='%d' y2='%d' stroke='%s' stroke-dasharray='4 3'/>"
                  "<text x='%.1f' y='%d' fill='%s' text-anchor='%s'>%s %s</text>",
                  f.px(x), f.px(x), kT, kH - kB, kColors[k + 1], f.px(x) + (right_edge ? -3 : 3), kT + 10 + 12 * k,
                  kColors[k + 1], right_edge ? "end" : "start", name, fmt(x).c_str());
    s += b;
    k++;
  }
  return s + "</svg>";
}

std::string svg_cdf(const std::string& title, const std::string& xlabel, const std::vector<Series>& series) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& se : series)
    for (double x : se.values) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!std::isfinite(lo)) return empty_svg(title);
  if (hi <= lo) hi = lo + std::max(1e-3, std::fabs(lo) * 0.1);
  Frame f{lo, hi, 0, 1};
  std::string s = open_svg(title) + axes(f, ticks(lo, hi), {0, 0.25, 0.5, 0.75, 1.0}, xlabel, "fraction ≤ x", fmt);
  char b[64];
  for (size_t i = 0; i < series.size(); ++i) {
    std::vector<double> v = series[i].values;
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    std::string pts;
    // A step function, thinned to at most ~400 points.
    const size_t stride = std::max<size_t>(1, v.size() / 400);
    double prev = 0;
    for (size_t j = 0; j < v.size(); j += stride) {
      const double y = double(j + 1) / double(v.size());
      std::snprintf(b, sizeof b, "%.1f,%.1f %.1f,%.1f ", f.px(v[j]), f.py(prev), f.px(v[j]), f.py(y));
      pts += b;
      prev = y;
    }
    std::snprintf(b, sizeof b, "%.1f,%.1f", f.px(v.back()), f.py(1));
    pts += b;
    s += "<polyline fill='none' stroke-width='1.8' stroke='" + std::string(kColors[i % 8]) + "' points='" + pts + "'/>";
  }
  return s + legend(series, false) + "</svg>";
}

std::string svg_lines(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<double>& xs, const std::vector<Series>& series, bool log_x, int max_x_ticks) {
  if (xs.empty()) return empty_svg(title);
  auto tx = [&](double x) { return log_x ? std::log2(std::max(x, 1e-9)) : x; };
  double x0 = tx(*std::min_element(xs.begin(), xs.end())), x1 = tx(*std::max_element(xs.begin(), xs.end()));
  if (x1 <= x0) x0 -= 1, x1 += 1;
  double ymax = 0;
  for (const Series& se : series)
    for (double y : se.values) ymax = std::max(ymax, y);
  std::vector<double> yt = ticks(0, ymax > 0 ? ymax : 1, 5);
  Frame f{x0, x1, 0, std::max(ymax, yt.back())};
  std::vector<double> xt;
  if (max_x_ticks > 0 && !log_x && int(xs.size()) > max_x_ticks) xt = ticks(x0, x1, max_x_ticks);  // many points: nice ticks
  else
    for (double x : xs) xt.push_back(tx(x));
  std::string s = open_svg(title) + axes(f, xt, yt, xlabel, ylabel, [&](double t) { return fmt(log_x ? std::exp2(t) : t); });
  char b[200];
  for (size_t i = 0; i < series.size(); ++i) {
    std::string pts;
    for (size_t j = 0; j < xs.size() && j < series[i].values.size(); ++j) {
      std::snprintf(b, sizeof b, "%.1f,%.1f ", f.px(tx(xs[j])), f.py(series[i].values[j]));
      pts += b;
      std::snprintf(b, sizeof b, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>", f.px(tx(xs[j])),
                    f.py(series[i].values[j]), kColors[i % 8]);
      s += b;
    }
    s += "<polyline fill='none' stroke-width='2' stroke='" + std::string(kColors[i % 8]) + "' points='" + pts + "'/>";
  }
  return s + legend(series, true) + "</svg>";
}

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<table><tr>";
  for (const auto& h : header) s += "<th>" + html_escape(h) + "</th>";
  s += "</tr>";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + html_escape(c) + "</td>";
    s += "</tr>";
  }
  return s + "</table>";
}

std::string html_page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + html_escape(title) +
         "</title><style>body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
         "table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 9px;"
         "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
         ".plots{display:flex;flex-wrap:wrap;gap:12px}.plots svg{border:1px solid #ddd}"
         "h1{font-size:20px}h2{font-size:16px;margin-top:22px}.meta{color:#555;font-size:13px}</style></head><body><h1>" +
         html_escape(title) + "</h1>" + body + "</body></html>\n";
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) fail(path, ": cannot write");
}

}  // namespace pypto::bench
