#include "worker/train/idx_file.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <memory>

#include "core/error.h"

namespace dlaunch::worker {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr int64_t kMaxDim = 1 << 24;  // a sanity bound: no real IDX side or count is larger

UsageError Bad(const std::string& path, const std::string& why) {
  return UsageError("train: " + path + ": " + why);
}

bool IsGzip(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

GzFile Open(const std::string& path) {
  // gzopen reads plain files as they are, so one code path serves both forms.
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw Bad(path, "cannot open");
  gzbuffer(f.get(), 1 << 17);
  return f;
}

uint32_t BigEndian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

IdxHeader ParseHeader(gzFile f, const std::string& path, int expect_dims) {
  uint8_t magic[4];
  if (gzread(f, magic, 4) != 4) throw Bad(path, "truncated: no IDX header");
  if (magic[0] != 0 || magic[1] != 0) throw Bad(path, "bad magic number: not an IDX file");
  if (magic[2] != kUnsignedByte) throw Bad(path, "IDX data type is not unsigned byte");
  if (magic[3] != expect_dims) {
    throw Bad(path, "has " + std::to_string(magic[3]) + " dimensions, expected " +
                        std::to_string(expect_dims));
  }
  IdxHeader h;
  h.data_bytes = 1;
  for (int i = 0; i < expect_dims; ++i) {
    uint8_t b[4];
    if (gzread(f, b, 4) != 4) throw Bad(path, "truncated IDX header");
    int64_t d = BigEndian(b);
    if (d <= 0 || d > kMaxDim) throw Bad(path, "dimension " + std::to_string(d) + " out of range");
    h.dims.push_back(d);
    h.data_bytes *= d;
  }
  return h;
}

int64_t HeaderBytes(const IdxHeader& h) { return 4 + 4 * static_cast<int64_t>(h.dims.size()); }

// The uncompressed size a file holds: a gzip file's ISIZE trailer (modulo 2^32), else its size.
int64_t StoredSize(const std::string& path, bool* modulo_2_32) {
  *modulo_2_32 = false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Bad(path, "cannot stat");
  if (!IsGzip(path)) return st.st_size;
  *modulo_2_32 = true;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  uint8_t t[4];
  if (!f || st.st_size < 18 || std::fseek(f.get(), -4, SEEK_END) != 0 ||
      std::fread(t, 1, 4, f.get()) != 4) {
    throw Bad(path, "truncated gzip file");
  }
  return uint32_t{t[0]} | (uint32_t{t[1]} << 8) | (uint32_t{t[2]} << 16) | (uint32_t{t[3]} << 24);
}

}  // namespace

std::string FindIdxFile(const std::string& dir, const std::string& name) {
  struct stat st {};
  const std::string gz = dir + "/" + name + ".gz";
  if (::stat(gz.c_str(), &st) == 0) return gz;
  const std::string plain = dir + "/" + name;
  if (::stat(plain.c_str(), &st) == 0) return plain;
  throw UsageError("train: --data-dir " + dir + " has neither " + name + ".gz nor " + name);
}

IdxHeader ReadIdxHeader(const std::string& path, int expect_dims) {
  IdxHeader h;
  {
    GzFile f = Open(path);
    h = ParseHeader(f.get(), path, expect_dims);
  }
  bool modulo = false;
  int64_t stored = StoredSize(path, &modulo);
  int64_t expected = HeaderBytes(h) + h.data_bytes;
  if (modulo) expected &= 0xffffffffLL;
  if (stored < expected) throw Bad(path, "truncated: holds less data than its header promises");
  if (stored > expected) throw Bad(path, "holds more data than its header promises");
  return h;
}

std::vector<uint8_t> ReadIdxFile(const std::string& path, int expect_dims, IdxHeader* header) {
  GzFile f = Open(path);
  IdxHeader h = ParseHeader(f.get(), path, expect_dims);
  std::vector<uint8_t> data(static_cast<size_t>(h.data_bytes));
  size_t got = 0;
  while (got < data.size()) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(data.size() - got, 1u << 30));
    int n = gzread(f.get(), data.data() + got, chunk);
    if (n < 0) {
      int err = 0;
      throw Bad(path, std::string("corrupt: ") + gzerror(f.get(), &err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < data.size()) {
    throw Bad(path, "truncated: " + std::to_string(got) + " of " + std::to_string(data.size()) +
                        " data bytes");
  }
  uint8_t extra;
  if (gzread(f.get(), &extra, 1) > 0) throw Bad(path, "holds more data than its header promises");
  if (header) *header = h;
  return data;
}

IdxDataFiles CheckIdxDataDir(const std::string& dir) {
  IdxDataFiles files;
  files.train_images = FindIdxFile(dir, "train-images-idx3-ubyte");
  files.train_labels = FindIdxFile(dir, "train-labels-idx1-ubyte");
  files.test_images = FindIdxFile(dir, "t10k-images-idx3-ubyte");
  files.test_labels = FindIdxFile(dir, "t10k-labels-idx1-ubyte");
  IdxHeader train = ReadIdxHeader(files.train_images, 3);
  IdxHeader test = ReadIdxHeader(files.test_images, 3);
  for (const auto& [images, labels, h] : {std::tuple{files.train_images, files.train_labels, train},
                                          std::tuple{files.test_images, files.test_labels, test}}) {
    IdxHeader l = ReadIdxHeader(labels, 1);
    if (l.dims[0] != h.dims[0]) {
      throw Bad(labels, "holds " + std::to_string(l.dims[0]) + " labels for " +
                            std::to_string(h.dims[0]) + " images in " + images);
    }
  }
  if (train.dims[1] != test.dims[1] || train.dims[2] != test.dims[2]) {
    throw Bad(files.test_images, "images are " + std::to_string(test.dims[1]) + "x" +
                                     std::to_string(test.dims[2]) + ", the training images " +
                                     std::to_string(train.dims[1]) + "x" +
                                     std::to_string(train.dims[2]));
  }
  return files;
}

}  // namespace dlaunch::worker
