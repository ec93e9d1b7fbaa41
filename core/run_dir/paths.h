// Where everything of a run lives. This is the one place that names the files of a run
// directory; docs/run-directory.md describes each of them.
//
//   <run-dir>/summary.json  summary.node<N>.json  preflight.json  diagnosis.txt  diagnosis.json
//             trace.json  report.html  .reserve (while the launcher runs)
//   <run-dir>/dumps/<name>/  a dump of the running job (dump_file.h)
//   <run-dir>/live.json  node 0's status endpoint and token, while it runs (live_file.h)
//   <run-dir>/attempt<N>/  an earlier attempt's (or an earlier run's) rank<R>/ and reports
//   <run-dir>/rank<R>/stdout.log stderr.log events.jsonl flight.json error.json stacks.txt
//                     nccl.log torch_error.json flight-hang-test.json
//                     filtered_stdout.log filtered_stderr.log (--duplicate-*-filters)
//                     all_reduce_perf.txt ... (rank 0 of preflight: one op's table each)
//                     heartbeat.json dump_request py_stacks.txt flight_tail.jsonl torch_trace_<R>
//                     agent_error.txt (Python ranks)
#pragma once

#include <optional>
#include <string>

namespace dlaunch::rundir {

// The most ranks a run directory is read for: rank numbers above it (a hostile or corrupt file
// claiming rank 2147483647) are reported and ignored rather than allocated.
inline constexpr int kMaxRanks = 1 << 16;

// One rank's folder.
class RankDir {
 public:
  explicit RankDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  std::string stdout_log() const;  // the rank's standard output, as the launcher captured it
  std::string stderr_log() const;  // its standard error
  std::string events() const;      // events.jsonl, written by the rank
  std::string flight() const;      // flight.json, the flight recorder's latest dump
  // flight-hang-test.json: the recorder of preflight's deliberate hang, kept apart from flight.json
  std::string hang_test_flight() const;
  // <perf_name>.txt (all_reduce_perf.txt, ...): one preflight op's table alone, as the nccl-tests
  // program of that name prints it, for tools that read one program's output (rank 0 only).
  std::string op_table(const std::string& perf_name) const;
  std::string error() const;        // error.json, why the rank failed, written by the rank
  std::string stacks() const;       // stacks.txt, native stacks the launcher took
  std::string nccl_log() const;     // nccl.log, NCCL_DEBUG_FILE when --nccl-debug is given
  std::string torch_error() const;  // torch_error.json, TORCHELASTIC_ERROR_FILE for Python ranks
  // filtered_stdout.log, filtered_stderr.log: the lines holding one of torchrun's
  // --duplicate-std{out,err}-filters, when given
  std::string filtered_stdout_log() const;
  std::string filtered_stderr_log() const;

  // Python ranks' agent (docs/run-directory.md, "Python ranks").
  std::string heartbeat() const;     // heartbeat.json, rewritten by the agent every interval
  std::string dump_request() const;  // dump_request, replaced by the launcher to ask for a dump
  std::string py_stacks() const;     // py_stacks.txt, the agent's Python stacks on request
  std::string agent_error() const;   // agent_error.txt, why the agent did not start
  // flight_tail.jsonl, the agent's last entries, written as they change (survives a SIGABRT)
  std::string flight_tail() const;
  // PyTorch's NCCL flight-recorder dumps (TORCH_NCCL_DEBUG_INFO_TEMP_FILE): torch appends the
  // rank, so torch_trace_<R>.
  std::string torch_trace_prefix() const;

  // Whether a file name in a rank folder is an NCCL debug log (nccl.log, or the names NCCL makes
  // from NCCL_DEBUG_FILE patterns such as nccl.%h.%p.log).
  static bool IsNcclLog(const std::string& file_name);

 private:
  std::string path_;
};

// A run directory, dlaunch-logs/<run-id>/.
class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  std::string summary() const;                    // summary.json, written by the launcher
  std::string node_summary(int node_rank) const;  // summary.node<N>.json of a joining node
  std::string preflight() const;                  // preflight.json, rank 0 of `preflight`
  std::string diagnosis_text() const;             // diagnosis.txt
  std::string diagnosis_json() const;             // diagnosis.json
  std::string trace() const;                      // trace.json (Chrome trace events)
  std::string report() const;                     // report.html, `dlaunch report`'s page
  // .reserve: room the launcher keeps while the job runs, so a disk the logs fill still takes
  // the summary and diagnosis; removed at the end.
  std::string reserve() const;
  RankDir rank(int rank) const;  // rank<R>/
  std::string dumps() const;     // dumps/, of `dlaunch dump` (dump_file.h)
  // live.json: where node 0 answers `dlaunch status`, and its status token (live_file.h); owner
  // only, while the launcher runs.
  std::string live() const;
  std::string attempt(const std::string& folder) const;  // attempt<N>/, by its name

  // "rank3"; and back: the rank of a folder name, nullopt unless it is "rank" and at most nine
  // digits below kMaxRanks.
  static std::string RankDirName(int rank);
  static std::optional<int> ParseRankDirName(const std::string& name);
  // "attempt3"; and back, nullopt for any other name.
  static std::string AttemptDirName(int number);
  static std::optional<int> ParseAttemptDirName(const std::string& name);

 private:
  std::string path_;
};

// How problem lines name a file: "rank2/flight.json".
std::string RankFileLabel(int rank, const std::string& path);
// The last component of a path: "stacks.txt" of "run/rank2/stacks.txt".
std::string FileName(const std::string& path);

}  // namespace dlaunch::rundir
