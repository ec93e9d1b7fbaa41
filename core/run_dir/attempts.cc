#include "core/run_dir/attempts.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/run_dir/paths.h"

namespace dlaunch::rundir {
namespace {

namespace fs = std::filesystem;

// What belongs to one attempt at the top of a run directory.
bool OfAnAttempt(const std::string& name, bool whole_run) {
  if (RunDir::ParseRankDirName(name)) return true;
  if (name.rfind("summary.node", 0) == 0) return true;
  for (const char* report : {"diagnosis.txt", "diagnosis.json", "trace.json", "preflight.json"})
    if (name == report) return true;
  return whole_run && name == "summary.json";
}

}  // namespace

int NextAttemptNumber(const std::string& run_dir) {
  int next = 0;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (auto n = RunDir::ParseAttemptDirName(it->path().filename().string())) {
      next = std::max(next, *n + 1);
    }
  }
  return next;
}

std::string PutAttemptAway(const std::string& run_dir, const std::string& folder, bool whole_run,
                           const std::vector<std::string>& only) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool wanted = only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    if (wanted && OfAnAttempt(name, whole_run)) names.push_back(name);
  }
  if (names.empty()) return "";
  const RunDir dir(run_dir);
  std::string target = folder;
  const bool taken = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return fs::exists(fs::path(dir.attempt(target)) / n, ec);
  });
  if (target.empty() || taken) target = RunDir::AttemptDirName(NextAttemptNumber(run_dir));
  fs::create_directories(dir.attempt(target), ec);
  for (const std::string& name : names) {
    fs::rename(fs::path(run_dir) / name, fs::path(dir.attempt(target)) / name, ec);
    if (ec) {
      throw Error(ErrorKind::kInternal,
                  "cannot move " + run_dir + "/" + name + " into " + target + "/: " + ec.message());
    }
  }
  return target;
}

}  // namespace dlaunch::rundir
