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

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::launcher::python {

inline constexpr size_t kMaxTorchDumpBytes = 64 << 20;
inline constexpr size_t kMaxTorchDumpsPerRank = 8;

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
  int64_t written_unix_ms = 0;  // the file's mtime: when torch dumped it
  std::string version;
  std::string comm_lib_version;
  std::map<std::string, TorchProcessGroup> process_groups;  // pg_config name (pg_status by id)
  std::map<std::string, TorchProcessGroup> pg_status;       // pg id -> status fields
  std::vector<TorchFlightEntry> entries;                    // as recorded (oldest first)
};

// From the pickle's object (pickle_reader.h). nullopt with `error` when it is not a dump: not a
// dict, no "entries" list nor "version". Odd fields are skipped, never thrown on.
std::optional<TorchFlightDump> TorchFlightFromJson(const nlohmann::json& doc, std::string* error);

// Reads and decodes one dump file: bounded (kMaxTorchDumpBytes), regular files only. Never throws.
std::optional<TorchFlightDump> ReadTorchFlightDump(const std::string& path, std::string* error);

// The dump files in one rank folder: `torch_trace_<digits>`, sorted, at most
// kMaxTorchDumpsPerRank. Never throws.
std::vector<std::string> FindTorchFlightDumps(const std::string& rank_dir);

// The dump as JSON for diagnosis.json (the fields above, the frames as call sites).
nlohmann::json TorchFlightToJson(const TorchFlightDump& dump);

}  // namespace dlaunch::launcher::python
