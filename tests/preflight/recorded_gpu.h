// Where the recordings of scripts/gpu-check.sh live: tests/preflight/fixtures/gpu/ (added with
// `scripts/gpu-check.sh import`), or the folder DLAUNCH_GPU_FIXTURES names, so that a run's
// results can be checked before they are imported (docs/gpu-check.md).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace dlaunch::worker::testing {

// The recorded files whose names end in `ext` (".txt" tables, ".json" preflight.json), sorted;
// empty when there are none.
inline std::vector<std::filesystem::path> RecordedGpuFiles(const std::string& ext) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("DLAUNCH_GPU_FIXTURES");
  const fs::path dir = env && *env ? fs::path(env) : fs::path(PREFLIGHT_FIXTURES) / "gpu";
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ext) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dlaunch::worker::testing
