#include "launcher/job/report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/error.h"
#include "core/run_dir/error_file.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/torch_error_file.h"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

RunState StateOf(const RankOutcome& r) {
  if (!r.exited) return RunState::kRunning;
  if (r.ok()) return RunState::kOk;
  return r.torn_down ? RunState::kKilled : RunState::kFailed;
}

namespace {

// A node in node 0's summary: node 0 by the job's verdict, the others by what they said.
RunState StateOf(const NodeView& n, int job_exit_code) {
  if (n.node_rank == 0) return job_exit_code == 0 ? RunState::kOk : RunState::kFailed;
  if (n.status && n.status->done()) {
    return n.status->exit_code() == 0 ? RunState::kOk : RunState::kFailed;
  }
  return n.lost ? RunState::kLost : RunState::kUnknown;
}

// Another node's rank, as its node last reported it.
RunState StateOf(const v1::RankExit& r, bool node_lost) {
  if (!r.exited()) return node_lost ? RunState::kLost : RunState::kRunning;
  if (r.signal() == 0 && r.exit_code() == 0) return RunState::kOk;
  return r.torn_down() ? RunState::kKilled : RunState::kFailed;
}

}  // namespace

std::string DescribeExit(const RankOutcome& o) {
  if (!o.exited) return "still running";
  if (o.signal) return "signal " + SignalName(o.signal) + " (" + std::to_string(o.signal) + ")";
  return "exit code " + std::to_string(o.exit_code);
}

namespace {

// The message of the error.json a rank the teardown ended had written; "" for none.
std::string OwnErrorBeforeTeardown(const RankOutcome& o, const std::string& rank_dir) {
  if (!o.torn_down || !o.exited) return "";
  rundir::ErrorReport own;
  std::vector<std::string> problems;
  const rundir::FileState state =
      rundir::ReadError(rundir::RankDir(rank_dir).error(), "error.json", &own, &problems);
  return state == rundir::FileState::kOk ? own.message : "";
}

}  // namespace

std::string DescribeFailure(const RankOutcome& o, const std::string& rank_dir) {
  const std::string own = OwnErrorBeforeTeardown(o, rank_dir);
  if (own.empty()) return DescribeExit(o);
  return own + " (its process then ended by the teardown: " + DescribeExit(o) + ")";
}

static std::string FormatTime(int64_t unix_ms) {
  std::time_t t = unix_ms / 1000;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

namespace {

// The lines of torchrun's root-cause block that come from the rank's own records: the error file
// of `@record` (error_file, its message and traceback) and an error.json of kind "oom" ("out of
// memory on rank R", its message and advice). Each line is indented and ends in '\n'; "" when
// there is neither. `headline` gets "out of memory on rank R" for an OOM, else stays as it is.
// Never throws.
std::string RecordedErrorLines(int rank, const std::string& rank_dir, std::string* headline) {
  std::ostringstream out;
  rundir::ErrorReport error;
  std::vector<std::string> problems;  // an unreadable error.json adds nothing here
  const std::string error_path = rundir::RankDir(rank_dir).error();
  if (rundir::ReadError(error_path, error_path, &error, &problems) == rundir::FileState::kOk &&
      rundir::IsOutOfMemory(error)) {
    const std::string cause = "out of memory on rank " + std::to_string(rank);
    *headline = cause;
    out << "  cause     : " << cause;
    if (!error.message.empty()) out << ": " << error.message;
    out << "\n";
    auto advice = error.fields.find("advice");
    if (advice != error.fields.end() && advice->is_array()) {
      for (const auto& a : *advice) {
        if (a.is_string()) out << "  advice    : " << a.get<std::string>() << "\n";
      }
    }
  }
  if (auto recorded = rundir::ReadTorchError(rundir::RankDir(rank_dir).torch_error())) {
    out << "  error_file: " << recorded->path << "\n";
    if (!recorded->message.empty()) out << "  error     : " << recorded->message << "\n";
    if (!recorded->traceback.empty()) {
      out << "  traceback :\n";
      std::istringstream lines(recorded->traceback);
      std::string line;
      while (std::getline(lines, line)) out << "    " << line << "\n";
    }
  }
  return out.str();
}

}  // namespace

std::string FormatRootCause(const RankOutcome& f, const std::string& host,
                            const std::string& rank_dir, const std::string& extra) {
  std::string headline = "rank " + std::to_string(f.rank) + " failed";
  const std::string recorded = RecordedErrorLines(f.rank, rank_dir, &headline);
  std::ostringstream out;
  out << "dlaunch: " << headline << "\n"
      << "Root Cause (first observed failure):\n"
      << "  time      : " << FormatTime(f.end_unix_ms) << "\n"
      << "  host      : " << host << "\n"
      << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ")\n"
      << "  exit      : " << DescribeExit(f) << (f.torn_down ? " from dlaunch's teardown" : "")
      << " (pid: " << f.pid << ")\n";
  if (const std::string own = OwnErrorBeforeTeardown(f, rank_dir); !own.empty()) {
    out << "  error     : " << own << " (its own, before the teardown)\n";
  }
  if (f.signal == SIGKILL && f.cause.empty()) {
    out << "  hint      : SIGKILL with no traceback is often the kernel's OOM killer "
           "(check dmesg)\n";
  }
  if (!extra.empty()) out << "  error     : " << extra << "\n";
  out << recorded;
  out << "  logs      : " << rank_dir << "/\n";
  // The launcher's own copy, which a full disk cannot lose; the log where it has none.
  std::vector<std::string> tail = f.stderr_tail;
  if (tail.empty()) tail = base::TailLines(rundir::RankDir(rank_dir).stderr_log(), 10);
  if (!tail.empty()) {
    out << "  last stderr lines:\n";
    for (const auto& l : tail) out << "    " << l << "\n";
  }
  return out.str();
}

rundir::Summary MakeSummary(const SummaryInfo& info, const std::vector<RankOutcome>& ranks) {
  rundir::Summary s;
  s.run_id = info.run_id;
  s.host = info.host;
  s.exit_code = info.exit_code;
  s.restarts = info.restarts;
  s.updated_unix_ms = base::UnixMillis();
  s.error = info.error;
  s.truncated_logs = info.truncated_logs;
  s.stragglers = info.stragglers;
  s.attempts = info.attempts;
  for (const auto& r : ranks) {
    rundir::SummaryRank& rank = s.ranks.emplace_back(SummaryOfLocalRank(r));
    rank.host = info.host;
    rank.restarts = info.restarts;
  }
  for (const auto& n : info.nodes) {
    const bool done = n.status && n.status->done();
    rundir::SummaryNode& node = s.nodes.emplace_back();
    node.node_rank = n.node_rank;
    node.host = n.host;
    node.status = StateOf(n, info.exit_code);
    if (done) node.exit_code = n.status->exit_code();
    if (done) node.error = n.status->message();
    if (n.node_rank == 0 || !n.status) continue;
    for (const auto& r : n.status->ranks()) s.ranks.push_back(SummaryOfRemoteRank(n, r));
  }
  return s;
}

rundir::SummaryRank SummaryOfLocalRank(const RankOutcome& r) {
  rundir::SummaryRank rank;
  rank.rank = r.rank;
  rank.local_rank = r.local_rank;
  rank.pid = r.pid;
  rank.status = StateOf(r);
  rank.start_unix_ms = r.start_unix_ms;
  if (r.exited) {
    rank.end_unix_ms = r.end_unix_ms;
    rank.signal = r.signal;
    rank.exit_code = r.signal ? -r.signal : r.exit_code;  // torchrun's "killed by signal"
    rank.error = r.cause;
    rank.stopped_at_teardown = r.stopped_at_teardown;
  }
  return rank;
}

rundir::SummaryRank SummaryOfRemoteRank(const NodeView& n, const v1::RankExit& r) {
  rundir::SummaryRank rank;
  rank.rank = r.rank();
  rank.node_rank = n.node_rank;
  rank.host = n.host;
  rank.pid = r.pid();
  rank.status = StateOf(r, n.lost);
  if (r.exited()) {
    if (r.end_unix_ms() > 0) rank.end_unix_ms = r.end_unix_ms();
    rank.signal = r.signal();
    rank.exit_code = r.signal() ? -r.signal() : r.exit_code();
    rank.error = r.cause();
    rank.stopped_at_teardown = r.stopped_at_teardown();
  }
  return rank;
}

namespace {

bool IsNoSpace(const Error& e) {
  return std::string(e.what()).find(std::strerror(ENOSPC)) != std::string::npos ||
         std::string(e.what()).find(std::strerror(EDQUOT)) != std::string::npos;
}

// $TMPDIR/dlaunch-summary-<run-id>/<file>: a second place for the summary when the run
// directory's disk is full.
std::string FallbackPath(const std::string& path) {
  const fs::path p(path);
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp && *tmp ? tmp : "/tmp") /
                       ("dlaunch-summary-" + p.parent_path().filename().string());
  std::error_code ec;
  fs::create_directories(dir, ec);
  return (dir / p.filename()).string();
}

}  // namespace

SummaryWriter::SummaryWriter(std::string path)
    : path_(std::move(path)),
      reserve_(rundir::RunDir(fs::path(path_).parent_path().string()).reserve()),
      written_(path_) {
  // Room for the summary (and the diagnosis) on a disk the logs may fill: a file of real blocks,
  // given back when a write fails for lack of space.
  const int fd = ::open(reserve_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (::posix_fallocate(fd, 0, kReserveBytes) != 0) {
    ::close(fd);
    ::unlink(reserve_.c_str());
    return;
  }
  ::close(fd);
}

SummaryWriter::~SummaryWriter() { ::unlink(reserve_.c_str()); }

void SummaryWriter::Write(const SummaryInfo& info, const std::vector<RankOutcome>& ranks) {
  WriteText(rundir::SummaryToJson(MakeSummary(info, ranks)), true);
}

void SummaryWriter::WriteProgress(const SummaryInfo& info, int attempt,
                                  const AttemptResult& progress) {
  SummaryInfo now = info;
  now.exit_code = -1;
  now.restarts = attempt;
  now.error = progress.stop_reason;
  if (now.error.empty() && progress.first_failure) {
    const RankOutcome& f = progress.ranks[*progress.first_failure];
    now.error = "rank " + std::to_string(f.rank) + " failed: " + DescribeExit(f);
  }
  if (now.error.empty() && progress.interrupted_by) {
    now.error = "interrupted by " + SignalName(progress.interrupted_by);
  }
  WriteText(rundir::SummaryToJson(MakeSummary(now, progress.ranks)), false);
}

void SummaryWriter::WriteText(const std::string& text, bool final) {
  std::string problem;
  // The first retry gets the reserved room back; the second goes elsewhere. While the job runs
  // the reserve stays (the logs would fill it): a full disk keeps the last summary written, and
  // the one at the end takes the room.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt == 1 && !final && wrote_) return;
    const std::string target = attempt < 2 ? path_ : FallbackPath(path_);
    try {
      base::WriteFileAtomically(target, text);
      if (target != written_ && !said_) {
        std::cerr << "dlaunch: the disk of " << path_ << " is full: summary written to " << target
                  << " instead" << std::endl;
        said_ = true;
      }
      written_ = target;
      wrote_ = true;
      return;
    } catch (const Error& e) {
      problem = e.what();
      if (!IsNoSpace(e)) break;
      ::unlink(reserve_.c_str());
    }
  }
  if (!said_) {
    std::cerr << "dlaunch: warning: cannot write the summary: " << problem << std::endl;
    said_ = true;
  }
}

}  // namespace dlaunch::launcher
