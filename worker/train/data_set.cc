#include "worker/train/data_set.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <random>

#include "core/error.h"

namespace dlaunch::worker {

DataSet MakeSyntheticDataSet(int64_t size, int64_t feature_dim, int64_t classes, uint64_t seed) {
  DataSet d;
  d.size = size;
  d.feature_dim = feature_dim;
  d.classes = classes;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(classes * feature_dim);
  for (float& c : centres) c = normal(rng) * 0.3f;
  d.features.resize(size * feature_dim);
  d.labels.resize(size);
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  for (int64_t i = 0; i < size; ++i) {
    int64_t label = pick(rng);
    d.labels[i] = label;
    const float* centre = &centres[label * feature_dim];
    float* row = &d.features[i * feature_dim];
    for (int64_t j = 0; j < feature_dim; ++j) row[j] = centre[j] + normal(rng);
  }
  return d;
}

DataSet ReadDataSetFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("train: cannot open --data file '" + path + "'");
  DataSet d;
  std::string line;
  int64_t line_no = 0;
  int64_t max_label = -1;
  std::vector<float> row;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    row.clear();
    const char* p = line.c_str();
    auto bad = [&](const std::string& why) {
      return UsageError("train: " + path + ":" + std::to_string(line_no) + ": " + why);
    };
    while (true) {
      char* end = nullptr;
      errno = 0;
      float v = std::strtof(p, &end);
      if (end == p || errno == ERANGE) throw bad("not a number");
      row.push_back(v);
      while (*end == ' ' || *end == '\t') ++end;
      if (*end == '\0') break;
      if (*end != ',') throw bad("expected ','");
      p = end + 1;
    }
    if (row.size() < 2) throw bad("need at least one feature and a label");
    float label_f = row.back();
    int64_t label = static_cast<int64_t>(label_f);
    if (label_f < 0 || static_cast<float>(label) != label_f) {
      throw bad("label must be an integer >= 0");
    }
    int64_t dim = static_cast<int64_t>(row.size()) - 1;
    if (d.size == 0) {
      d.feature_dim = dim;
    } else if (dim != d.feature_dim) {
      throw bad("has " + std::to_string(dim) + " features, earlier lines " +
                std::to_string(d.feature_dim));
    }
    d.features.insert(d.features.end(), row.begin(), row.end() - 1);
    d.labels.push_back(label);
    max_label = std::max(max_label, label);
    ++d.size;
  }
  if (d.size == 0) throw UsageError("train: --data file '" + path + "' holds no samples");
  d.classes = std::max<int64_t>(2, max_label + 1);
  return d;
}

}  // namespace dlaunch::worker
