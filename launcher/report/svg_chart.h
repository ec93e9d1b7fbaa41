// A small SVG chart for the report page: linear or log axes with round ticks, and the marks the
// plots need (lines, bands, bars, cells, spans, vertical markers). Every string it is given is
// escaped here, so a plot cannot inject markup whatever a rank printed. Pure; never blocks.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlaunch::launcher::report {

// Text for HTML or SVG content and attribute values: & < > " ' escaped; bytes that are not
// valid UTF-8 and control characters (other than tab and newline) become U+FFFD.
std::string Escape(std::string_view text);
// Tick and value labels: "0", "2.5", "1200", "1.5e+07"; at most four significant digits.
std::string FormatNumber(double value);
// Sizes: "512 B", "4 KiB", "1 MiB", "2 GiB".
std::string FormatBytes(double bytes);
// Colours of successive lines, cycling.
const char* PaletteColor(size_t index);

struct Axis {
  double lo = 0;
  double hi = 1;
  bool log = false;  // base 2; lo must be > 0
  std::string label;
  std::function<std::string(double)> format = FormatNumber;
  // Extend [lo, hi] to round ticks (linear axes only).
  bool nice = true;
};

using Points = std::vector<std::pair<double, double>>;

class Chart {
 public:
  static constexpr double kWidth = 760;
  static constexpr double kHeight = 280;

  // `id` names the plot in the page (data-plot); the axes get their ticks now.
  Chart(std::string id, Axis x, Axis y);

  double X(double v) const;  // data to pixels, clamped to the plot area
  double Y(double v) const;
  const std::vector<double>& x_ticks() const { return x_ticks_; }
  const std::vector<double>& y_ticks() const { return y_ticks_; }

  // A line through `points` (points with a negative or non-finite y are gaps). `dash` is an SVG
  // dash array ("" = solid). `tooltip` becomes the line's <title>.
  void Line(const Points& points, const std::string& color, const std::string& tooltip,
            const std::string& dash = "", double width = 1.5);
  // The area between `lower` and `upper` (same x values).
  void Band(const Points& lower, const Points& upper, const std::string& color,
            const std::string& tooltip);
  void Dots(const Points& points, const std::string& color, const std::string& tooltip);
  // A rectangle in data coordinates.
  void Rect(double x0, double y0, double x1, double y1, const std::string& color,
            const std::string& tooltip, const std::string& stroke = "");
  // A full-height span (a phase) and a full-height marker line with a short label at the top.
  void Span(double x0, double x1, const std::string& color, const std::string& tooltip);
  void Marker(double x, const std::string& color, const std::string& label,
              const std::string& tooltip);
  // A label in the plot, in data coordinates.
  void Label(double x, double y, const std::string& text, const std::string& color = "#333");
  void LegendEntry(const std::string& name, const std::string& color, const std::string& dash = "");
  // Category labels instead of numbers on the y axis (the timeline's lanes): value -> name.
  void SetYCategories(std::vector<std::pair<double, std::string>> categories);

  // The <svg> element: the marks, then the axes, ticks and legend over them.
  std::string Svg() const;

 private:
  std::string id_;
  Axis x_, y_;
  std::vector<double> x_ticks_, y_ticks_;
  std::vector<std::pair<double, std::string>> y_categories_;
  std::string marks_;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> legend_;
};

// Round ticks over [lo, hi] (linear: 1, 2 or 5 times a power of ten, about `count` of them;
// log: powers of two, every k-th so that at most `count` remain). Exposed for tests.
std::vector<double> LinearTicks(double lo, double hi, int count);
std::vector<double> Log2Ticks(double lo, double hi, int count);

}  // namespace dlaunch::launcher::report
