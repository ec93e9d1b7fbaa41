// dumps/<name>/: a dump of a running job, asked for by `dlaunch dump RUN_DIR` or by SIGUSR1 to a
// Python rank (its agent asks). The asker creates the folder with request.json; node 0's launcher
// takes the dump (flight recorders, native and Python stacks, heartbeats into rank<R>/), writes
// diagnosis.txt and diagnosis.json, and dump.json last, which says the dump is complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

// dumps/<name>/request.json. Its schema id is the rank folder's dump_request's (heartbeat_file.h)
// for the readers that know it by that name; the two are told apart by where they lie.
inline constexpr char kDumpFolderRequestSchema[] = "dump_request";
inline constexpr char kDumpSchema[] = "dump";
inline constexpr size_t kMaxDumpBytes = 16 << 20;

// One dump folder, dumps/<name>/.
class DumpDir {
 public:
  explicit DumpDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string request() const;         // request.json, written by the asker
  std::string manifest() const;        // dump.json, written by the launcher when it is done
  std::string diagnosis_text() const;  // diagnosis.txt
  std::string diagnosis_json() const;  // diagnosis.json
  std::string rank(int rank) const;    // rank<R>/, the rank's files as they were at the dump

  // "20261202T071502.123Z" for a Unix time in ms (UTC), with `suffix` ("-rank3") after it.
  static std::string NameAt(int64_t unix_ms, const std::string& suffix = "");

 private:
  std::string path_;
};

struct DumpRequest {
  int64_t unix_ms = 0;
  int pid = 0;             // of the asker
  std::string trigger;     // "dlaunch dump" | "SIGUSR1"
  std::vector<int> ranks;  // the ranks to dump; empty: every rank
};

// What one rank gave to a dump.
struct DumpRank {
  int rank = -1;
  int pid = 0;                     // 0 for a rank on another node
  bool answered = false;           // rewrote its flight recorder for this dump
  bool exited = false;             // had exited: its files are its last ones
  std::string process_state;       // "S (sleeping)", "T (stopped)"; "" when unknown or gone
  std::string where;               // one line: the collective it is in, or its step and phase
  std::vector<std::string> files;  // the file names copied into rank<R>/
};

struct DumpManifest {
  int64_t requested_unix_ms = 0;
  int64_t done_unix_ms = 0;
  std::string trigger;
  int world_size = 0;
  int attempt = 0;
  std::vector<std::string> summary;  // the lines `dlaunch dump` prints: where the ranks stand
  std::string headline;              // the diagnosis' headline
  std::vector<DumpRank> ranks;
  std::vector<std::string> problems;  // what could not be taken or written
};

// Atomically. Block for the write; throw Error(kInternal).
void WriteDumpRequest(const std::string& path, const DumpRequest& request);
void WriteDumpManifest(const std::string& path, const DumpManifest& manifest);
// Never throw.
FileState ReadDumpRequest(const std::string& path, const std::string& label, DumpRequest* out,
                          std::vector<std::string>* problems);
FileState ReadDumpManifest(const std::string& path, const std::string& label, DumpManifest* out,
                           std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
