#include "core/run_dir/leftovers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/run_dir/error_file.h"

namespace dlaunch::rundir {
namespace {

namespace fs = std::filesystem;

// The file a temporary name stands for: "error.json" for "error.json.tmp.123.4.5" and for
// "error.json.tmp"; "" for a name that is no temporary file.
std::string FinalName(const std::string& name) {
  if (const size_t at = name.find(".tmp."); at != std::string::npos && at > 0) {
    return name.substr(0, at);
  }
  const std::string suffix = ".tmp";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return name.substr(0, name.size() - suffix.size());
  }
  return "";
}

}  // namespace

LeftoverSweep SweepLeftoverTemps(const std::string& rank_dir) {
  LeftoverSweep sweep;
  std::error_code ec;
  struct Candidate {
    std::string path;
    struct timespec mtime;
  };
  std::vector<Candidate> errors;
  std::vector<std::string> others;
  for (const auto& entry : fs::directory_iterator(rank_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string final_name = FinalName(name);
    if (final_name.empty()) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (final_name == "error.json") {
      errors.push_back({entry.path().string(), st.st_mtim});
    } else {
      others.push_back(entry.path().string());
    }
  }
  // The newest whole error.json, when the rank left none in place.
  std::sort(errors.begin(), errors.end(), [](const Candidate& a, const Candidate& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec > b.mtime.tv_sec
                                            : a.mtime.tv_nsec > b.mtime.tv_nsec;
  });
  const std::string error_path = (fs::path(rank_dir) / "error.json").string();
  struct stat st {};
  bool have_error = ::lstat(error_path.c_str(), &st) == 0;
  for (const auto& c : errors) {
    ErrorReport report;
    std::vector<std::string> problems;
    if (!have_error && ReadError(c.path, "error.json", &report, &problems) == FileState::kOk &&
        std::rename(c.path.c_str(), error_path.c_str()) == 0) {
      have_error = true;
      sweep.recovered.push_back("error.json");
      continue;
    }
    others.push_back(c.path);
  }
  for (const auto& path : others)
    if (::unlink(path.c_str()) == 0) ++sweep.removed;
  return sweep;
}

}  // namespace dlaunch::rundir
