#include "worker/train/data_set.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "worker/train/idx_file.h"

namespace dlaunch::worker {

DataSet MakeSyntheticDataSet(int64_t size, int64_t feature_dim, int64_t classes, uint64_t seed,
                             uint64_t stream) {
  DataSet d;
  d.size = size;
  d.feature_dim = feature_dim;
  d.classes = classes;
  d.name = stream == 0 ? "synthetic" : "synthetic test";
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(classes * feature_dim);
  for (float& c : centres) c = normal(rng) * 0.3f;
  if (stream > 0) rng.seed(seed * 0x9E3779B97F4A7C15ull + 1 + stream * 0xD1B54A32D192ED03ull);
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
  d.name = path;
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

namespace {

DataSet ReadIdxSplit(const std::string& images_path, const std::string& labels_path,
                     const std::string& name) {
  IdxHeader ih, lh;
  DataSet d;
  d.name = name;
  d.pixels = ReadIdxFile(images_path, 3, &ih);
  std::vector<uint8_t> labels = ReadIdxFile(labels_path, 1, &lh);
  if (lh.dims[0] != ih.dims[0]) {
    throw UsageError("train: " + labels_path + ": holds " + std::to_string(lh.dims[0]) +
                     " labels for " + std::to_string(ih.dims[0]) + " images");
  }
  d.size = ih.dims[0];
  d.height = ih.dims[1];
  d.width = ih.dims[2];
  d.feature_dim = d.height * d.width;
  d.labels.assign(labels.begin(), labels.end());
  int64_t max_label = 0;
  for (int64_t l : d.labels) max_label = std::max(max_label, l);
  d.classes = std::max<int64_t>(2, max_label + 1);
  return d;
}

}  // namespace

TrainTestData LoadIdxDataSet(const std::string& dir) {
  IdxDataFiles f = CheckIdxDataDir(dir);
  const std::string base = std::filesystem::path(dir).filename().string();
  TrainTestData out{ReadIdxSplit(f.train_images, f.train_labels, base + " train"),
                    ReadIdxSplit(f.test_images, f.test_labels, base + " test")};
  // Normalise with the training pixels' statistics, as torchvision's Normalize((0.2860,),
  // (0.3530,)) does for Fashion-MNIST, but computed, so that MNIST or any IDX set gets its own.
  double sum = 0, sum_sq = 0;
  for (uint8_t p : out.train.pixels) {
    sum += p;
    sum_sq += static_cast<double>(p) * p;
  }
  const double n = static_cast<double>(out.train.pixels.size()) * 255.0;
  const double mean = sum / n;
  const double var = sum_sq / (n * 255.0) - mean * mean;
  for (DataSet* d : {&out.train, &out.test}) {
    d->mean = static_cast<float>(mean);
    d->stddev = static_cast<float>(std::sqrt(std::max(var, 1e-12)));
  }
  out.test.classes = out.train.classes = std::max(out.train.classes, out.test.classes);
  return out;
}

void AugmentImages(uint8_t* images, int64_t count, int64_t height, int64_t width,
                   std::mt19937_64& rng) {
  std::vector<uint8_t> src(static_cast<size_t>(height * width));
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* img = images + i * height * width;
    std::copy(img, img + height * width, src.begin());
    uint64_t r = rng();
    const int64_t dy = static_cast<int64_t>(r % 5) - 2;
    const int64_t dx = static_cast<int64_t>((r / 5) % 5) - 2;
    const bool flip = ((r / 25) & 1) != 0;
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        int64_t sy = y + dy, sx = (flip ? width - 1 - x : x) + dx;
        img[y * width + x] =
            sy >= 0 && sy < height && sx >= 0 && sx < width ? src[sy * width + sx] : 0;
      }
    }
  }
}

}  // namespace dlaunch::worker
