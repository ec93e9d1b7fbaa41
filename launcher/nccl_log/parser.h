// A streaming, tolerant reader of NCCL debug logs (NCCL 2.4 to 2.28 shapes): one file per rank
// (dlaunch's rank<R>/nccl.log, NCCL_DEBUG_FILE=%h.%p) or one file with every rank interleaved
// (mpirun, srun, torchrun output, with or without the launcher's own line prefix). Lines it does
// not know are counted and skipped; nothing in a log makes it throw.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/nccl_log/records.h"

namespace dlaunch::launcher::nccl_log {

class LogParser {
 public:
  LogParser();
  ~LogParser();
  LogParser(const LogParser&) = delete;
  LogParser& operator=(const LogParser&) = delete;

  // Starts a new source: the lines that follow come from `name`. `rank_hint` is the rank the
  // source belongs to when its location says so (rank3/nccl.log), else -1.
  void BeginSource(const std::string& name, int rank_hint = -1);

  // One line without its newline. Does not block.
  void AddLine(std::string_view line);

  // BeginSource + every line of the file, read in fixed-size chunks: memory stays bounded
  // whatever the file's size (a line longer than 64 KiB is cut). Blocks on file I/O. Returns
  // false and records a problem when the file cannot be read.
  bool AddFile(const std::string& path, int rank_hint = -1);

  // Groups the lines into ranks (threads of one process that drive several GPUs become several
  // ranks; lines a process printed before its rank was known join it). Call once.
  ParseResult Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Calls `on_line` for every line of the file (without its newline; a line longer than 64 KiB is
// cut), reading fixed-size chunks so memory stays bounded; adds the bytes read to *bytes.
// Blocks on file I/O. Returns false with *error ("cannot be read", "read error") on failure.
bool ReadLines(const std::string& path, const std::function<void(std::string_view)>& on_line,
               int64_t* bytes, std::string* error);

// The files' ranks, each file parsed with LogParser::AddFile.
ParseResult ParseFiles(const std::vector<std::string>& paths);

// Every NCCL log of every rank<R>/ under `dir` (a dlaunch run directory, see core/run_dir),
// each with rank R as its hint.
// Blocks on file I/O; a missing directory gives an empty result with a problem.
ParseResult ParseRankDirs(const std::string& dir);

// "0000:07:00.0", "0x7000", "07000" -> "7000": NCCL prints bus ids in several spellings.
std::string NormalizeBusId(std::string_view id);

}  // namespace dlaunch::launcher::nccl_log
