#include "launcher/diagnose/rank_groups.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>

#include "core/base/format.h"

namespace dlaunch::launcher {
namespace {

// A duration or a size as base::FormatDurationMs and base::FormatBytes write them.
const std::regex& Quantity() {
  static const std::regex re("([0-9]+(?:\\.[0-9]+)?) (ms|s|B|KiB|MiB|GiB|TiB)\\b");
  return re;
}

// The line without its "rank N: " and with every quantity replaced by a mark, and the quantities.
struct Shape {
  std::string text;
  std::vector<std::pair<double, std::string>> values;  // number, unit
};

Shape ShapeOf(const std::string& line) {
  Shape s;
  const size_t colon = line.find(": ");
  const std::string body = colon == std::string::npos ? line : line.substr(colon + 2);
  size_t at = 0;
  for (std::sregex_iterator it(body.begin(), body.end(), Quantity()), end; it != end; ++it) {
    s.text += body.substr(at, it->position() - at) + "\x01";
    s.values.emplace_back(std::strtod((*it)[1].str().c_str(), nullptr), (*it)[2].str());
    at = it->position() + it->length();
  }
  s.text += body.substr(at);
  return s;
}

// Unit order, so that "900 ms" sorts below "1.2 s" and "3 KiB" below "1 MiB".
double Scale(const std::string& unit) {
  static const std::map<std::string, double> scale = {{"ms", 1e-3},
                                                      {"s", 1},
                                                      {"B", 1},
                                                      {"KiB", 1024.0},
                                                      {"MiB", 1048576.0},
                                                      {"GiB", 1073741824.0},
                                                      {"TiB", 1099511627776.0}};
  auto it = scale.find(unit);
  return it == scale.end() ? 1 : it->second;
}

std::string Number(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// The shape with each mark replaced by the value, or the range "lo-hi unit" across the set.
std::string Fill(const std::string& text,
                 const std::vector<std::vector<std::pair<double, std::string>>>& all) {
  std::string out;
  size_t mark = 0;
  for (char c : text) {
    if (c != '\x01') {
      out += c;
      continue;
    }
    auto lo = all.front()[mark], hi = lo;
    for (const auto& values : all) {
      const auto& v = values[mark];
      if (v.first * Scale(v.second) < lo.first * Scale(lo.second)) lo = v;
      if (v.first * Scale(v.second) > hi.first * Scale(hi.second)) hi = v;
    }
    if (lo == hi) {
      out += Number(lo.first) + " " + lo.second;
    } else if (lo.second == hi.second) {
      out += Number(lo.first) + "-" + Number(hi.first) + " " + lo.second;
    } else {
      out += Number(lo.first) + " " + lo.second + "-" + Number(hi.first) + " " + hi.second;
    }
    ++mark;
  }
  return out;
}

}  // namespace

std::vector<std::string> GroupRankLines(const std::vector<RankDiagnosis>& ranks, size_t threshold) {
  std::vector<std::string> lines;
  if (ranks.size() <= threshold) {
    for (const RankDiagnosis& r : ranks) lines.push_back(r.line);
    return lines;
  }
  struct Set {
    std::vector<int> ranks;
    std::vector<std::vector<std::pair<double, std::string>>> values;
  };
  std::vector<std::string> order;  // shapes by first rank
  std::map<std::string, Set> sets;
  for (const RankDiagnosis& r : ranks) {
    if (r.culprit) {
      lines.push_back(r.line);
      continue;
    }
    Shape s = ShapeOf(r.line);
    auto [it, fresh] = sets.try_emplace(s.text);
    if (fresh) order.push_back(s.text);
    it->second.ranks.push_back(r.rank);
    it->second.values.push_back(std::move(s.values));
  }
  for (const std::string& text : order) {
    const Set& set = sets.at(text);
    lines.push_back(base::NameRanks(set.ranks) + ": " + Fill(text, set.values));
  }
  return lines;
}

}  // namespace dlaunch::launcher
