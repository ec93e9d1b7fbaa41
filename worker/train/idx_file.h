// The IDX format of MNIST and Fashion-MNIST (big-endian header: two zero bytes, a type byte, a
// dimension count, then one uint32 per dimension; then the data), plain or gzip-compressed.
// Torch-free: the launcher checks the files with it before any rank starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::worker {

struct IdxHeader {
  std::vector<int64_t> dims;
  int64_t data_bytes = 0;  // product of dims: the header promises this many data bytes
};

// `DIR/NAME.gz` when it exists, else `DIR/NAME`; throws UsageError naming both when neither does.
// Does not block beyond a stat.
std::string FindIdxFile(const std::string& dir, const std::string& name);

// Reads the header of an unsigned-byte IDX file with `expect_dims` dimensions and checks that the
// file holds exactly the data it promises: the file size for a plain file, the gzip trailer's size
// for a compressed one, so this is cheap enough for the launcher. Throws UsageError
// ("train: FILE: what is wrong") otherwise. Blocks for a short read.
IdxHeader ReadIdxHeader(const std::string& path, int expect_dims);

// Reads the whole file and returns its data bytes (header excluded). Throws UsageError naming the
// file when it is missing, malformed or truncated. Blocks for the read and decompression.
std::vector<uint8_t> ReadIdxFile(const std::string& path, int expect_dims, IdxHeader* header);

// The four files of an IDX data directory (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each optionally .gz), checked by their headers:
// 3-dimensional images, 1-dimensional labels, matching counts, the same image shape in both
// splits. Throws UsageError naming the file. Blocks for four short reads.
struct IdxDataFiles {
  std::string train_images, train_labels, test_images, test_labels;
};
IdxDataFiles CheckIdxDataDir(const std::string& dir);

}  // namespace dlaunch::worker
