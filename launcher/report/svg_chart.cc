#include "launcher/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dlaunch::launcher::report {
namespace {

constexpr double kLeft = 70, kRight = 160, kTop = 14, kBottom = 44;

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Length of the UTF-8 sequence starting at s[i], 0 when it is not a valid one.
size_t Utf8Length(std::string_view s, size_t i) {
  const unsigned char c = s[i];
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  }
  return n;
}

}  // namespace

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&':
        out += "&amp;";
        ++i;
        continue;
      case '<':
        out += "&lt;";
        ++i;
        continue;
      case '>':
        out += "&gt;";
        ++i;
        continue;
      case '"':
        out += "&quot;";
        ++i;
        continue;
      case '\'':
        out += "&#39;";
        ++i;
        continue;
      default:
        break;
    }
    const unsigned char u = c;
    if (u < 0x20 && c != '\n' && c != '\t') {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string FormatNumber(double value) {
  if (!std::isfinite(value)) return "?";
  if (value == 0) return "0";
  char buf[32];
  const double a = std::fabs(value);
  if (a >= 1e6 || a < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.3g", value);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g", value);
  }
  return buf;
}

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) bytes /= 1024, ++u;
  return FormatNumber(bytes) + " " + kUnits[u];
}

const char* PaletteColor(size_t index) {
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                  "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"};
  return kColors[index % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::vector<double> LinearTicks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step) * step;
  for (double t = first; t < hi + step * 0.999 && ticks.size() < 40; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

std::vector<double> Log2Ticks(double lo, double hi, int count) {
  if (lo <= 0 || !std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return {1};
  const int a = static_cast<int>(std::floor(std::log2(lo) + 1e-9));
  const int b = static_cast<int>(std::ceil(std::log2(hi) - 1e-9));
  int k = 1;
  while ((b - a) / k + 1 > count) ++k;
  std::vector<double> ticks;
  for (int e = a; e <= b; e += k) ticks.push_back(std::ldexp(1.0, e));
  return ticks;
}

Chart::Chart(std::string id, Axis x, Axis y)
    : id_(std::move(id)), x_(std::move(x)), y_(std::move(y)) {
  auto set_ticks = [](Axis* axis, std::vector<double>* ticks, int count) {
    if (axis->log) {
      axis->lo = std::max(axis->lo, 1e-12);
      if (axis->hi <= axis->lo) axis->hi = axis->lo * 2;
      *ticks = Log2Ticks(axis->lo, axis->hi, count);
      // The axis spans whole powers of two, so the first and last tick sit on its ends.
      axis->lo = ticks->front();
      axis->hi = std::max(ticks->back(), axis->hi);
      if (axis->hi <= axis->lo) axis->hi = axis->lo * 2;
    } else {
      *ticks = LinearTicks(axis->lo, axis->hi, count);
      if (axis->nice) {
        axis->lo = ticks->front();
        axis->hi = ticks->back();
      } else {
        ticks->erase(std::remove_if(ticks->begin(), ticks->end(),
                                    [&](double t) { return t < axis->lo || t > axis->hi; }),
                     ticks->end());
      }
      if (axis->hi <= axis->lo) axis->hi = axis->lo + 1;
    }
  };
  set_ticks(&x_, &x_ticks_, 8);
  set_ticks(&y_, &y_ticks_, 5);
}

double Chart::X(double v) const {
  double f = x_.log ? (std::log2(std::max(v, 1e-300)) - std::log2(x_.lo)) /
                          (std::log2(x_.hi) - std::log2(x_.lo))
                    : (v - x_.lo) / (x_.hi - x_.lo);
  f = std::clamp(std::isfinite(f) ? f : 0.0, 0.0, 1.0);
  return kLeft + f * (kWidth - kLeft - kRight);
}

double Chart::Y(double v) const {
  double f = y_.log ? (std::log2(std::max(v, 1e-300)) - std::log2(y_.lo)) /
                          (std::log2(y_.hi) - std::log2(y_.lo))
                    : (v - y_.lo) / (y_.hi - y_.lo);
  f = std::clamp(std::isfinite(f) ? f : 0.0, 0.0, 1.0);
  return kHeight - kBottom - f * (kHeight - kTop - kBottom);
}

void Chart::Line(const Points& points, const std::string& color, const std::string& tooltip,
                 const std::string& dash, double width) {
  std::string d;
  bool pen_down = false;
  for (const auto& [x, y] : points) {
    if (!(y >= 0) || !std::isfinite(x) || !std::isfinite(y)) {
      pen_down = false;
      continue;
    }
    d += (pen_down ? "L" : "M") + Fixed(X(x)) + " " + Fixed(Y(y));
    pen_down = true;
  }
  if (d.empty()) return;
  marks_ += "<path class=\"series\" fill=\"none\" stroke=\"" + Escape(color) +
            "\" stroke-width=\"" + Fixed(width) + "\"" +
            (dash.empty() ? "" : " stroke-dasharray=\"" + Escape(dash) + "\"") + " d=\"" + d +
            "\"><title>" + Escape(tooltip) + "</title></path>\n";
}

void Chart::Band(const Points& lower, const Points& upper, const std::string& color,
                 const std::string& tooltip) {
  if (lower.empty() || lower.size() != upper.size()) return;
  std::string d;
  for (size_t i = 0; i < upper.size(); ++i) {
    d += (i ? "L" : "M") + Fixed(X(upper[i].first)) + " " + Fixed(Y(upper[i].second));
  }
  for (size_t i = lower.size(); i-- > 0;) {
    d += "L" + Fixed(X(lower[i].first)) + " " + Fixed(Y(lower[i].second));
  }
  marks_ += "<path class=\"series band\" fill=\"" + Escape(color) +
            "\" fill-opacity=\"0.25\" stroke=\"none\" d=\"" + d + "Z\"><title>" + Escape(tooltip) +
            "</title></path>\n";
}

void Chart::Dots(const Points& points, const std::string& color, const std::string& tooltip) {
  std::string out;
  for (const auto& [x, y] : points) {
    if (!(y >= 0) || !std::isfinite(x)) continue;
    out += "<circle cx=\"" + Fixed(X(x)) + "\" cy=\"" + Fixed(Y(y)) + "\" r=\"3\"/>";
  }
  if (out.empty()) return;
  marks_ += "<g class=\"series\" fill=\"" + Escape(color) + "\"><title>" + Escape(tooltip) +
            "</title>" + out + "</g>\n";
}

void Chart::Rect(double x0, double y0, double x1, double y1, const std::string& color,
                 const std::string& tooltip, const std::string& stroke) {
  const double px0 = std::min(X(x0), X(x1)), px1 = std::max(X(x0), X(x1));
  const double py0 = std::min(Y(y0), Y(y1)), py1 = std::max(Y(y0), Y(y1));
  marks_ += "<rect class=\"mark\" x=\"" + Fixed(px0) + "\" y=\"" + Fixed(py0) + "\" width=\"" +
            Fixed(std::max(px1 - px0, 0.6)) + "\" height=\"" + Fixed(std::max(py1 - py0, 0.6)) +
            "\" fill=\"" + Escape(color) + "\"" +
            (stroke.empty() ? "" : " stroke=\"" + Escape(stroke) + "\" stroke-width=\"1.5\"") +
            ">" + (tooltip.empty() ? "" : "<title>" + Escape(tooltip) + "</title>") + "</rect>\n";
}

void Chart::Span(double x0, double x1, const std::string& color, const std::string& tooltip) {
  const double px0 = X(x0), px1 = X(x1);
  marks_ += "<rect class=\"span\" x=\"" + Fixed(px0) + "\" y=\"" + Fixed(kTop) + "\" width=\"" +
            Fixed(std::max(px1 - px0, 0.5)) + "\" height=\"" + Fixed(kHeight - kTop - kBottom) +
            "\" fill=\"" + Escape(color) + "\" fill-opacity=\"0.15\"><title>" + Escape(tooltip) +
            "</title></rect>\n";
}

void Chart::Marker(double x, const std::string& color, const std::string& label,
                   const std::string& tooltip) {
  const std::string px = Fixed(X(x));
  marks_ += "<g class=\"marker\"><title>" + Escape(tooltip) + "</title><line x1=\"" + px +
            "\" x2=\"" + px + "\" y1=\"" + Fixed(kTop) + "\" y2=\"" + Fixed(kHeight - kBottom) +
            "\" stroke=\"" + Escape(color) + "\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"/>";
  if (!label.empty()) {
    marks_ += "<text x=\"" + Fixed(X(x) + 3) + "\" y=\"" + Fixed(kTop + 10) + "\" fill=\"" +
              Escape(color) + "\" font-size=\"10\">" + Escape(label) + "</text>";
  }
  marks_ += "</g>\n";
}

void Chart::Label(double x, double y, const std::string& text, const std::string& color) {
  marks_ += "<text class=\"label\" x=\"" + Fixed(X(x)) + "\" y=\"" + Fixed(Y(y)) + "\" fill=\"" +
            Escape(color) + "\" font-size=\"10\">" + Escape(text) + "</text>\n";
}

void Chart::LegendEntry(const std::string& name, const std::string& color,
                        const std::string& dash) {
  legend_.push_back({name, {color, dash}});
}

void Chart::SetYCategories(std::vector<std::pair<double, std::string>> categories) {
  y_categories_ = std::move(categories);
}

std::string Chart::Svg() const {
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  std::string out = "<svg class=\"plot\" data-plot=\"" + Escape(id_) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Fixed(kWidth) + " " +
                    Fixed(kHeight) + "\" width=\"" + Fixed(kWidth) + "\" height=\"" +
                    Fixed(kHeight) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<clipPath id=\"clip-" + Escape(id_) + "\"><rect x=\"" + Fixed(x0) + "\" y=\"" +
         Fixed(y1) + "\" width=\"" + Fixed(x1 - x0) + "\" height=\"" + Fixed(y0 - y1) +
         "\"/></clipPath>\n";
  out += "<g class=\"grid\" stroke=\"#e4e4e4\">";
  for (double t : x_ticks_) {
    out += "<line x1=\"" + Fixed(X(t)) + "\" x2=\"" + Fixed(X(t)) + "\" y1=\"" + Fixed(y0) +
           "\" y2=\"" + Fixed(y1) + "\"/>";
  }
  if (y_categories_.empty()) {
    for (double t : y_ticks_) {
      out += "<line x1=\"" + Fixed(x0) + "\" x2=\"" + Fixed(x1) + "\" y1=\"" + Fixed(Y(t)) +
             "\" y2=\"" + Fixed(Y(t)) + "\"/>";
    }
  }
  out += "</g>\n<g class=\"marks\" clip-path=\"url(#clip-" + Escape(id_) + ")\">\n" + marks_ +
         "</g>\n";
  out += "<g class=\"axes\" stroke=\"#333\"><line x1=\"" + Fixed(x0) + "\" x2=\"" + Fixed(x1) +
         "\" y1=\"" + Fixed(y0) + "\" y2=\"" + Fixed(y0) + "\"/><line x1=\"" + Fixed(x0) +
         "\" x2=\"" + Fixed(x0) + "\" y1=\"" + Fixed(y0) + "\" y2=\"" + Fixed(y1) + "\"/></g>\n";
  for (double t : x_ticks_) {
    out += "<text class=\"tick-x\" data-value=\"" + FormatNumber(t) + "\" x=\"" + Fixed(X(t)) +
           "\" y=\"" + Fixed(y0 + 14) + "\" text-anchor=\"middle\">" + Escape(x_.format(t)) +
           "</text>";
  }
  if (y_categories_.empty()) {
    for (double t : y_ticks_) {
      out += "<text class=\"tick-y\" data-value=\"" + FormatNumber(t) + "\" x=\"" + Fixed(x0 - 5) +
             "\" y=\"" + Fixed(Y(t) + 4) + "\" text-anchor=\"end\">" + Escape(y_.format(t)) +
             "</text>";
    }
  } else {
    for (const auto& [v, name] : y_categories_) {
      out += "<text class=\"tick-y\" x=\"" + Fixed(x0 - 5) + "\" y=\"" + Fixed(Y(v) + 4) +
             "\" text-anchor=\"end\">" + Escape(name) + "</text>";
    }
  }
  out += "\n<text class=\"axis-label\" x=\"" + Fixed((x0 + x1) / 2) + "\" y=\"" +
         Fixed(kHeight - 8) + "\" text-anchor=\"middle\">" + Escape(x_.label) + "</text>";
  out += "<text class=\"axis-label\" transform=\"translate(14 " + Fixed((y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + Escape(y_.label) + "</text>\n";
  double ly = kTop + 8;
  for (const auto& [name, style] : legend_) {
    if (ly > kHeight - 12) break;
    out += "<g class=\"legend\"><line x1=\"" + Fixed(x1 + 10) + "\" x2=\"" + Fixed(x1 + 32) +
           "\" y1=\"" + Fixed(ly) + "\" y2=\"" + Fixed(ly) + "\" stroke=\"" + Escape(style.first) +
           "\" stroke-width=\"" + (style.second == "band" ? "8" : "2") + "\"" +
           (style.second.empty() || style.second == "band"
                ? ""
                : " stroke-dasharray=\"" + Escape(style.second) + "\"") +
           (style.second == "band" ? " stroke-opacity=\"0.35\"" : "") + "/><text x=\"" +
           Fixed(x1 + 36) + "\" y=\"" + Fixed(ly + 4) + "\">" + Escape(name) + "</text></g>\n";
    ly += 15;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace dlaunch::launcher::report
