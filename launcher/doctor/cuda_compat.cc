#include "launcher/doctor/cuda_compat.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace dlaunch::launcher {
namespace {

struct DriverEntry {
  int cuda;            // 1000*major + 10*minor
  const char* driver;  // minimum Linux x86_64 driver of the GA release
};

// From NVIDIA's CUDA Toolkit release notes, table "CUDA Toolkit and Corresponding Driver
// Versions" (Linux x86_64 column, GA rows). Updates of a release may need a newer driver; the GA
// row is the floor for the release as a whole, which is what a version number alone can name.
constexpr DriverEntry kDriverTable[] = {
    {13010, "590.44.01"}, {13000, "580.65.06"}, {12090, "575.51.03"}, {12080, "570.26"},
    {12060, "560.28.03"}, {12050, "555.42.02"}, {12040, "550.54.14"}, {12030, "545.23.06"},
    {12020, "535.54.03"}, {12010, "530.30.02"}, {12000, "525.60.13"}, {11080, "520.61.05"},
    {11070, "515.43.04"}, {11060, "510.39.01"}, {11050, "495.29.05"}, {11040, "470.42.01"},
    {11030, "465.19.01"}, {11020, "460.27.03"}, {11010, "455.23"},    {11000, "450.51.05"},
    {10020, "440.33"},    {10010, "418.39"},    {10000, "410.48"},    {9020, "396.26"},
    {9010, "390.46"},     {9000, "384.81"},
};

struct ArchEntry {
  int cuda;  // first release with this range
  int min_cc;
  int max_cc;
};

// Compute capabilities each release can target (CUDA release notes: 11.0 dropped sm_30, 11.1 added
// sm_86, 11.8 sm_89/sm_90, 12.0 dropped sm_35/sm_37, 12.8 added sm_100/sm_120, 12.9 sm_103/sm_121,
// 13.0 dropped Maxwell, Pascal and Volta).
constexpr ArchEntry kArchTable[] = {
    {13000, 75, 121}, {12090, 50, 121}, {12080, 50, 120}, {12000, 50, 90},
    {11080, 35, 90},  {11010, 35, 86},  {11000, 35, 80},
};

std::vector<long> DriverFields(const std::string& version) {
  std::vector<long> fields;
  const char* p = version.c_str();
  while (*p) {
    char* end = nullptr;
    long value = std::strtol(p, &end, 10);
    if (end == p) break;
    fields.push_back(value);
    p = end;
    if (*p != '.') break;
    ++p;
  }
  return fields;
}

}  // namespace

int CompareDriverVersions(const std::string& a, const std::string& b) {
  std::vector<long> fa = DriverFields(a), fb = DriverFields(b);
  size_t n = std::max(fa.size(), fb.size());
  for (size_t i = 0; i < n; ++i) {
    long x = i < fa.size() ? fa[i] : 0;
    long y = i < fb.size() ? fb[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

std::string MinimumDriverForCuda(int cuda_version) {
  int major = cuda_version / 1000;
  const DriverEntry* best = nullptr;      // newest entry of this major not newer than asked
  const DriverEntry* smallest = nullptr;  // oldest entry of this major
  for (const DriverEntry& e : kDriverTable) {
    if (e.cuda / 1000 != major) continue;
    if (e.cuda <= cuda_version && (best == nullptr || e.cuda > best->cuda)) best = &e;
    if (smallest == nullptr || e.cuda < smallest->cuda) smallest = &e;
  }
  if (best != nullptr) return best->driver;
  return smallest != nullptr ? smallest->driver : "";
}

int NewestCudaForDriver(const std::string& driver_version) {
  if (DriverFields(driver_version).empty()) return 0;
  int newest = 0;
  for (const DriverEntry& e : kDriverTable) {
    if (CompareDriverVersions(driver_version, e.driver) >= 0 && e.cuda > newest) newest = e.cuda;
  }
  return newest;
}

bool ComputeCapabilityRange(int cuda_version, int* min_cc, int* max_cc) {
  if (cuda_version <= 0) return false;
  int major = cuda_version / 1000;
  const ArchEntry* best = nullptr;
  for (const ArchEntry& e : kArchTable) {
    if (e.cuda / 1000 != major) continue;
    if (e.cuda <= cuda_version && (best == nullptr || e.cuda > best->cuda)) best = &e;
  }
  if (best == nullptr) return false;
  *min_cc = best->min_cc;
  *max_cc = best->max_cc;
  return true;
}

}  // namespace dlaunch::launcher
