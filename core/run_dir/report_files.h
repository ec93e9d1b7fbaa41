// The run-level reports: preflight.json (the `preflight` suite's verdict and tables, written by
// its rank 0) and trace.json (a Chrome trace-event timeline of all ranks, written by diagnosis).
// Their bodies belong to the code that builds them; this module owns the envelope: the path, the
// schema field, atomic writes and bounded reads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/run_dir/flight_file.h"

namespace dlaunch::rundir {

inline constexpr char kPreflightSchema[] = "preflight";
inline constexpr char kTraceSchema[] = "trace";
inline constexpr char kOpTableSchema[] = "op_table";
inline constexpr size_t kMaxOpTableBytes = 16 << 20;
inline constexpr size_t kMaxPreflightBytes = 64 << 20;
inline constexpr size_t kMaxTraceBytes = 256 << 20;

struct PreflightReport {
  std::string verdict;               // PASS | FAIL
  std::vector<std::string> reasons;  // why FAIL, one sentence each
  int world_size = 0;
  std::string backend;
  int64_t unix_ms = 0;
  // The whole document, the fields above included: options, bandwidth, p2p, node_matrix,
  // hang_test (see docs/run-directory.md).
  nlohmann::json document = nlohmann::json::object();
};

// `document` as built by the suite (an object holding at least verdict and reasons); the schema
// is added. Atomically; blocks for the write; throws Error(kInternal).
void WritePreflight(const std::string& path, nlohmann::json document);
FileState ReadPreflight(const std::string& path, const std::string& label, PreflightReport* out,
                        std::vector<std::string>* problems);

// An op table (rank<R>/<perf_name>.txt): nccl-tests' text for one op, after a first comment line
// "# schema: dlaunch.op_table/1" that nccl-tests parsers skip as they skip its other comments.
// Atomically; blocks for the write; throws Error(kInternal).
void WriteOpTable(const std::string& path, const std::string& table);
// The table without the schema line; kInvalid (a problem line says why) for another file's or a
// later version's first line, or a file over kMaxOpTableBytes.
FileState ReadOpTable(const std::string& path, const std::string& label, std::string* table,
                      std::vector<std::string>* problems);

// `trace` holds traceEvents and displayTimeUnit; the schema is added (trace viewers ignore it).
void WriteTrace(const std::string& path, nlohmann::json trace);
FileState ReadTrace(const std::string& path, const std::string& label, nlohmann::json* out,
                    std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
