// PyTorch's own flight recorder (torch >= 2.2, ProcessGroupNCCL): the pickle each rank dumps on a
// watchdog timeout into TORCH_NCCL_DEBUG_INFO_TEMP_FILE / TORCH_FR_DUMP_TEMP_FILE + <rank>, which
// dlaunch points at rank<R>/torch_trace_<R>. The dump is a dict: "version" ("2.4"...), "pg_config"
// (name -> {name, desc, ranks: "[0, 1]"}), "pg_status" (pg id -> last enqueued/started/completed
// collective), "entries" (record_id, pg_id, process_group (name, desc), collective_seq_id,
// p2p_seq_id, op_id, profiling_name "nccl:all_reduce", time_created_ns, input_sizes /
// input_dtypes / output_sizes / output_dtypes, state scheduled|started|completed,
// time_discovered_started_ns / _completed_ns, retired, timeout_ms, is_p2p, duration_ms, frames
// [{name, filename, line}]). Versions 1.x name collective_seq_id "seq_id".
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::launcher::python {

inline constexpr size_t kMaxTorchDumpBytes = 64 << 20;
inline constexpr size_t kMaxTorchDumpsPerRank = 8;
// What is kept of one dump (and so what diagnosis.json can show of it): the newest entries; each
// name, path, state and dtype cut to kMaxTorchText bytes; per entry the innermost frames and the
// first tensors of each size and dtype list; the first process groups, whose ranks together are
// bounded too.
inline constexpr size_t kMaxTorchEntries = 4096;
inline constexpr size_t kMaxTorchText = 256;
inline constexpr size_t kMaxTorchFrames = 32;
inline constexpr size_t kMaxTorchTensors = 64;
inline constexpr size_t kMaxTorchDims = 16;
inline constexpr size_t kMaxTorchGroups = 1024;
inline constexpr size_t kMaxTorchGroupRanks = 1 << 20;

// The limits of one pass over a run directory's dumps, all ranks together: the bytes of the files
// read, what the dumps read take once decoded, and the time. Each file is also bounded alone
// (kMaxTorchDumpBytes, PickleLimits::max_memory_bytes of decoding). kept_bytes is looked at
// before each read, so the dumps other threads are reading when it is reached are kept too: at
// most kTorchReadThreads - 1 more, each within its own bound.
struct TorchReadLimits {
  size_t file_bytes = 256u << 20;
  size_t kept_bytes = 128u << 20;
  std::chrono::milliseconds time{20000};
};
// For the launcher's own diagnoses (after a failed attempt, a live hang, a dump): its exit waits
// for them.
inline constexpr TorchReadLimits kLauncherTorchRead{256u << 20, 128u << 20,
                                                    std::chrono::milliseconds(3000)};
// Dumps decoded at the same time, each within PickleLimits::max_memory_bytes.
inline constexpr int kTorchReadThreads = 2;

// What is left of TorchReadLimits; shared by the threads of a pass. The clock starts at
// construction.
class TorchReadBudget {
 public:
  explicit TorchReadBudget(const TorchReadLimits& limits = {});
  // Takes a file of `bytes` out of the budget: "" when it may be read, else why not ("not read:
  // the 256 MiB of torch dumps one diagnosis reads are spent").
  std::string Take(size_t bytes);
  void Keep(size_t bytes);  // a dump read is kept: its decoded size
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  const TorchReadLimits limits_;
  const std::chrono::steady_clock::time_point deadline_;
  std::mutex mu_;
  size_t file_bytes_ = 0;
  size_t kept_bytes_ = 0;
};

struct TorchFrame {
  std::string name, filename;
  int64_t line = -1;
};

struct TorchFlightEntry {
  int64_t record_id = -1;
  int64_t pg_id = -1;
  std::string pg_name, pg_desc;
  int64_t collective_seq_id = -1;
  int64_t p2p_seq_id = -1;
  int64_t op_id = -1;
  std::string profiling_name;  // "nccl:all_reduce"
  bool is_p2p = false;
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;  // "Float", "BFloat16"...
  std::string state;                                     // scheduled | started | completed
  int64_t time_created_ns = 0;
  int64_t time_discovered_started_ns = 0;    // 0: not discovered
  int64_t time_discovered_completed_ns = 0;  // 0: not discovered
  double duration_ms = -1;
  int64_t timeout_ms = -1;
  bool retired = false;
  std::vector<TorchFrame> frames;  // innermost first

  std::string op() const;  // "all_reduce" from "nccl:all_reduce"
  // The innermost frame outside torch, "train.py:42 train_step"; "" without frames.
  std::string call_site() const;
  int64_t elements() const;  // of the inputs; -1 without sizes
};

struct TorchProcessGroup {
  std::string name, desc;
  std::vector<int> ranks;  // from pg_config's "[0, 1, 2]"
  int64_t last_enqueued = -1, last_started = -1, last_completed = -1;  // pg_status, by pg id
};

struct TorchFlightDump {
  int rank = -1;  // from the file name
  std::string file;
  // The file's mtime: when torch dumped it, shown only; never a duration (a copy resets it).
  int64_t written_unix_ms = 0;
  std::string version;
  std::string comm_lib_version;
  std::map<std::string, TorchProcessGroup> process_groups;  // pg_config name (pg_status by id)
  std::map<std::string, TorchProcessGroup> pg_status;       // pg id -> status fields
  std::vector<TorchFlightEntry> entries;                    // as recorded (oldest first)
};

// From the pickle's object (pickle_reader.h). nullopt with `error` when it is not a dump: not a
// dict, no "entries" list nor "version". Odd fields are skipped, never thrown on.
std::optional<TorchFlightDump> TorchFlightFromJson(const nlohmann::json& doc, std::string* error);

// Reads and decodes one dump file: bounded (kMaxTorchDumpBytes, the pickle reader's limits,
// `budget` when given), regular files only. Never throws: running out of memory is an error too.
std::optional<TorchFlightDump> ReadTorchFlightDump(const std::string& path, std::string* error,
                                                   TorchReadBudget* budget = nullptr);

// Roughly what `dump` takes in memory.
size_t KeptBytes(const TorchFlightDump& dump);

// The dump files in one rank folder: `torch_trace_<digits>`, sorted, at most
// kMaxTorchDumpsPerRank. Never throws.
std::vector<std::string> FindTorchFlightDumps(const std::string& rank_dir);

// The dump as JSON for diagnosis.json (the fields above, the frames as call sites).
nlohmann::json TorchFlightToJson(const TorchFlightDump& dump);

}  // namespace dlaunch::launcher::python
