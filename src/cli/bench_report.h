#pragma once
// A self-contained HTML report (no scripts, no external files): tables and plots drawn as inline
// SVG — histograms, CDFs and line charts.
#include <string>
#include <utility>
#include <vector>

namespace pypto::bench {

struct Series {
  std::string label;
  std::vector<double> values;  // for line charts: y values at the chart's xs
};

std::string html_escape(const std::string& s);
// Distribution of `values` in `bins` equal-width bins, with mean/p50/p99 marked.
std::string svg_histogram(const std::string& title, const std::string& xlabel, const std::vector<double>& values,
                          int bins = 30);
// Empirical CDFs of one or more series on shared axes.
std::string svg_cdf(const std::string& title, const std::string& xlabel, const std::vector<Series>& series);
// y against x for each series (points joined); log2 x axis when `log_x`. The x axis is labelled at
// every x, or with more than `max_x_ticks` points (> 0, linear axes) at about that many round values.
std::string svg_lines(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<double>& xs, const std::vector<Series>& series, bool log_x = false,
                      int max_x_ticks = 0);
// A table from a header row and data rows (cells are escaped).
std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// The whole page: `body` is already HTML.
std::string html_page(const std::string& title, const std::string& body);
// Writes `text` to `path`; Error naming the path when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace pypto::bench
