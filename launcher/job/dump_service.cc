#include "launcher/job/dump_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "core/base/clock.h"
#include "core/base/format.h"
#include "core/run_dir/dump_file.h"
#include "core/run_dir/paths.h"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

DumpService::DumpService(std::shared_ptr<JobView> job, LiveDumpOptions options)
    : job_(std::move(job)),
      options_(std::move(options)),
      dumps_dir_(rundir::RunDir(job_->run_dir()).dumps()) {}

DumpService::~DumpService() {
  if (worker_.joinable()) worker_.join();
}

void DumpService::Poll() {
  struct stat st {};
  if (::stat(dumps_dir_.c_str(), &st) == 0) {
    const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (mtime != seen_mtime_ns_) {
      seen_mtime_ns_ = mtime;
      std::error_code ec;
      bool incomplete = false;
      for (fs::directory_iterator it(dumps_dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        // `dlaunch dump` fills ".<name>" and renames it; the agent writes request.json last.
        if (name.empty() || name[0] == '.' || seen_.count(name) || !it->is_directory(ec)) continue;
        const rundir::DumpDir dir(it->path().string());
        struct stat req {};
        if (::stat(dir.request().c_str(), &req) != 0) {
          incomplete = true;
          continue;
        }
        seen_.insert(name);
        if (::stat(dir.manifest().c_str(), &st) == 0) continue;  // an earlier launcher's
        // Owner-only: the run directory's owner (the launcher's user), or root.
        if (req.st_uid != ::geteuid() && req.st_uid != 0) {
          std::cerr << "dlaunch: dump request " << dir.path() << " ignored: made by uid "
                    << req.st_uid << ", not the job's owner" << std::endl;
          continue;
        }
        queued_.push_back(dir.path());
      }
      // A request whose request.json was not there yet: look again next tick.
      if (ec || incomplete) seen_mtime_ns_ = -1;
    }
  }
  if (busy_.load() || queued_.empty()) return;
  if (worker_.joinable()) worker_.join();
  busy_ = true;
  const std::string folder = queued_.front();
  queued_.pop_front();
  worker_ = std::thread([this, folder] {
    Run(folder);
    busy_ = false;
  });
}

void DumpService::Run(const std::string& folder) {
  const int64_t start = base::UnixMillis();
  rundir::DumpRequest request;
  std::vector<std::string> problems;
  rundir::ReadDumpRequest(rundir::DumpDir(folder).request(), "request.json", &request, &problems);
  if (request.trigger.empty()) request.trigger = "dlaunch dump";
  const rundir::DumpManifest m = TakeLiveDump(*job_, folder, request, options_);
  std::cerr << "dlaunch: dump (" << m.trigger << ") of " << m.ranks.size()
            << (m.ranks.size() == 1 ? " rank" : " ranks") << " in "
            << base::FormatDurationMs(base::UnixMillis() - start) << ": " << folder << std::endl;
}

}  // namespace dlaunch::launcher
