// The training data: a deterministic synthetic classification set, or a user's CSV file.
// Torch-free: the trainer wraps the flat arrays in tensors without copying.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::worker {

struct DataSet {
  int64_t size = 0;             // samples
  int64_t feature_dim = 0;      // floats per sample
  int64_t classes = 0;          // labels are 0 .. classes-1
  std::vector<float> features;  // size * feature_dim, row-major
  std::vector<int64_t> labels;  // size
};

// Gaussian blobs: one random centre per class (scale 0.3) plus unit noise: learnable, but not in a
// handful of steps, so the loss falls visibly over a run. The same seed gives the same set on every
// rank and every run. Does not block.
DataSet MakeSyntheticDataSet(int64_t size, int64_t feature_dim, int64_t classes, uint64_t seed);

// Reads the CSV format: one sample per line, `f1,f2,...,fK,label` with float features and an
// integer label >= 0; blank lines and lines starting with '#' are skipped; every line has the same
// column count. classes = max label + 1. Throws UsageError naming the file and line on bad input.
// Blocks for the file read.
DataSet ReadDataSetFile(const std::string& path);

}  // namespace dlaunch::worker
