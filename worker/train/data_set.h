// The data `train` learns from: Fashion-MNIST (or any IDX directory), a deterministic synthetic
// classification set, or a user's CSV file. Torch-free: the trainer wraps the arrays in tensors
// without copying, and the launcher parses a CSV file with it before any rank starts.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace dlaunch::worker {

struct DataSet {
  int64_t size = 0;         // samples
  int64_t feature_dim = 0;  // values per sample (channels * height * width for images)
  int64_t classes = 0;      // labels are 0 .. classes-1
  // Images (IDX data): 1 x height x width unsigned bytes, normalised per batch with mean/stddev
  // of the training pixels (in 0..1 units). Otherwise height = width = 0 and `features` holds
  // size * feature_dim floats, row-major.
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;
  float mean = 0, stddev = 1;
  std::vector<float> features;
  std::vector<int64_t> labels;  // size
  std::string name;             // for log lines: "fashion-mnist train", "synthetic", a path
  bool images() const { return height > 0; }
};

// Gaussian blobs: one random centre per class (scale 0.3) plus unit noise: learnable, but not in a
// handful of steps, so the loss falls visibly over a run. The same seed gives the same set on every
// rank and every run; `stream` > 0 draws other samples around the same centres (a test set).
// Does not block.
DataSet MakeSyntheticDataSet(int64_t size, int64_t feature_dim, int64_t classes, uint64_t seed,
                             uint64_t stream = 0);

// Reads the CSV format: one sample per line, `f1,f2,...,fK,label` with float features and an
// integer label >= 0; blank lines and lines starting with '#' are skipped; every line has the same
// column count. classes = max label + 1. Throws UsageError naming the file and line on bad input.
// Blocks for the file read.
DataSet ReadDataSetFile(const std::string& path);

// The training and test splits of an IDX directory (see CheckIdxDataDir), both normalised with the
// training split's pixel mean and standard deviation. Throws UsageError naming the bad file.
// Blocks for reading and decompressing (about 0.3 s for Fashion-MNIST).
struct TrainTestData {
  DataSet train, test;
};
TrainTestData LoadIdxDataSet(const std::string& dir);

// Light augmentation of `count` 1 x height x width byte images in place: a random shift by up to
// 2 pixels in each direction (zero fill) and a horizontal flip with probability 1/2. Does not
// block.
void AugmentImages(uint8_t* images, int64_t count, int64_t height, int64_t width,
                   std::mt19937_64& rng);

}  // namespace dlaunch::worker
