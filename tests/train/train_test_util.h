// Helpers for the trainer tests: ranks as threads, tiny IDX data sets. Torch-free.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace dlaunch::worker::testing {

// Runs fn(rank) on n threads and joins them all. Blocks until every rank returned.
inline void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// The bytes of an unsigned-byte IDX file: header (dims big-endian) and data.
inline std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string out = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
  }
  out.append(data.begin(), data.end());
  return out;
}

// Writes `bytes` to `path`, gzip-compressed when the name ends in .gz. Blocks for the write.
inline void WriteFile(const std::string& path, const std::string& bytes) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

// A learnable IDX data set in `dir` (gzip): `side` x `side` images of 10 classes, class k a bright
// horizontal bar in row k + 1 over dim noise. Blocks for the writes.
inline void WriteTinyIdxDataSet(const std::string& dir, uint32_t train, uint32_t test,
                                uint32_t side = 12) {
  std::mt19937 rng(7);
  for (const auto& [split, n] : {std::pair{std::string("train"), train}, {"t10k", test}}) {
    std::vector<uint8_t> images(static_cast<size_t>(n) * side * side), labels(n);
    for (uint32_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(rng() % 10);
      uint8_t* img = &images[static_cast<size_t>(i) * side * side];
      for (uint32_t p = 0; p < side * side; ++p) img[p] = static_cast<uint8_t>(rng() % 60);
      for (uint32_t x = 1; x + 1 < side; ++x) img[(labels[i] + 1) * side + x] = 200;
    }
    WriteFile(dir + "/" + split + "-images-idx3-ubyte.gz", IdxBytes({n, side, side}, images));
    WriteFile(dir + "/" + split + "-labels-idx1-ubyte.gz", IdxBytes({n}, labels));
  }
}

}  // namespace dlaunch::worker::testing
