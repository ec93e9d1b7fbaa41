#include "launcher/cluster/slurm_lists.h"

#include <stdexcept>

#include "core/error.h"
#include "launcher/cluster/env_values.h"

namespace dlaunch::launcher::cluster {
namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string> TopLevelItems(const std::string& list) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw UsageError("malformed Slurm node list '" + list + "'");
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw UsageError("malformed Slurm node list '" + list + "'");
  items.push_back(cur);
  return items;
}

// One bracket group's "01-04" or "7", each host prefix + number + suffix. Slurm keeps the zero
// padding of the range's first number.
void ExpandRange(const std::string& range, const std::string& prefix, const std::string& suffix,
                 const std::string& list, std::vector<std::string>* hosts) {
  const size_t dash = range.find('-');
  try {
    if (dash == std::string::npos) {
      std::stoi(range);
      hosts->push_back(prefix + range + suffix);
      return;
    }
    const std::string lo = range.substr(0, dash), hi = range.substr(dash + 1);
    const int a = std::stoi(lo), b = std::stoi(hi);
    if (b < a) throw std::invalid_argument(range);
    for (int v = a; v <= b; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < lo.size()) num = std::string(lo.size() - num.size(), '0') + num;
      hosts->push_back(prefix + num + suffix);
    }
  } catch (const std::logic_error&) {
    throw UsageError("malformed range '" + range + "' in Slurm node list '" + list + "'");
  }
}

}  // namespace

std::vector<std::string> ExpandSlurmNodelist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& item : TopLevelItems(list)) {
    if (item.empty()) throw UsageError("malformed Slurm node list '" + list + "'");
    const size_t open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    const size_t close = item.find(']', open);
    const std::string prefix = item.substr(0, open);
    const std::string suffix = item.substr(close + 1);
    if (suffix.find('[') != std::string::npos) {
      throw UsageError("Slurm node lists with two bracket groups in one name are not supported: '" +
                       item + "'");
    }
    for (const std::string& range : TopLevelItems(item.substr(open + 1, close - open - 1))) {
      ExpandRange(range, prefix, suffix, list, &hosts);
    }
  }
  return hosts;
}

std::vector<int> ExpandSlurmCounts(const std::string& list) {
  std::vector<int> counts;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(start, comma - start);
    const size_t paren = item.find("(x");
    const std::string what = "Slurm task count '" + list + "'";
    if (paren == std::string::npos) {
      counts.push_back(ParseCount(item, what));
    } else {
      if (item.back() != ')') throw UsageError("malformed " + what);
      const int n = ParseCount(item.substr(0, paren), what);
      const int times = ParseCount(item.substr(paren + 2, item.size() - paren - 3), what);
      counts.insert(counts.end(), times, n);
    }
    start = comma + 1;
  }
  return counts;
}

}  // namespace dlaunch::launcher::cluster
