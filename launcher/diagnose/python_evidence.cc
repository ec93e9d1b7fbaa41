#include "launcher/diagnose/python_evidence.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/files.h"

namespace dlaunch::launcher {
namespace {

// 64 slots of 1 KiB as the agent writes it; anything far larger is not the agent's.
constexpr size_t kMaxTailBytes = 1 << 20;
constexpr char kGlooSizeEnforce[] = "op.preamble.length <= op.nbytes. ";

bool ParseCount(const std::string& text, size_t* pos, int64_t* out) {
  const char* start = text.c_str() + *pos;
  char* end = nullptr;
  const long long v = std::strtoll(start, &end, 10);
  if (end == start || v < 0) return false;
  *out = v;
  *pos += static_cast<size_t>(end - start);
  return true;
}

}  // namespace

void MergeFlightTail(const rundir::RankDir& dir, rundir::RankFiles* rank,
                     std::vector<std::string>* problems) {
  std::string text;
  const base::ReadStatus status = base::ReadFileBounded(dir.flight_tail(), kMaxTailBytes, &text);
  if (status == base::ReadStatus::kMissing) return;
  const std::string label = rundir::RankFileLabel(rank->rank, dir.flight_tail());
  if (status != base::ReadStatus::kOk) {
    problems->push_back(label + " is " + base::DescribeReadStatus(status, kMaxTailBytes) +
                        ": not read");
    return;
  }
  std::map<int64_t, rundir::FlightEntry> merged;
  if (rank->flight_state == rundir::FileState::kOk) {
    for (rundir::FlightEntry& e : rank->flight.entries) merged[e.seq] = std::move(e);
  }
  size_t from_tail = 0;
  int64_t newest_ns = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(' ') == std::string::npos) continue;  // an unused slot
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    rundir::FlightEntry entry;
    if (!rundir::FlightEntryFromJson(j, &entry)) continue;
    newest_ns = std::max({newest_ns, entry.started_unix_ns, entry.completed_unix_ns});
    merged[entry.seq] = std::move(entry);
    ++from_tail;
  }
  if (from_tail == 0) return;
  rundir::FlightDump& flight = rank->flight;
  if (rank->flight_state != rundir::FileState::kOk) {
    flight = rundir::FlightDump{};
    flight.rank = rank->rank;
    flight.reason = "tail";  // the rank died before it wrote a flight.json
    rank->flight_state = rundir::FileState::kOk;
  }
  flight.entries.clear();
  for (auto& [seq, e] : merged) flight.entries.push_back(std::move(e));
  flight.dumped_unix_ms = std::max(flight.dumped_unix_ms, newest_ns / 1000000);
}

std::optional<PeerSizeAbort> FindGlooSizeAbort(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    size_t pos = line.find(kGlooSizeEnforce);
    if (pos == std::string::npos) continue;
    pos += sizeof(kGlooSizeEnforce) - 1;
    PeerSizeAbort a;
    if (!ParseCount(line, &pos, &a.sent_bytes) || line.compare(pos, 4, " vs ") != 0) continue;
    pos += 4;
    if (!ParseCount(line, &pos, &a.expected_bytes)) continue;
    return a;
  }
  return std::nullopt;
}

void AddPythonEvidence(const RankRecord& record, RankFacts& facts) {
  const std::optional<PeerSizeAbort> abort = FindGlooSizeAbort(record.stderr_tail);
  if (!abort) return;
  facts.peer_sent_bytes = abort->sent_bytes;
  facts.peer_expected_bytes = abort->expected_bytes;
  // Its exit is what a peer's size did to it, not a failure of its own.
  facts.failure.consequence = true;
  facts.notes.push_back("aborted by Gloo: a peer sent " + std::to_string(abort->sent_bytes) +
                        " bytes where it expected at most " +
                        std::to_string(abort->expected_bytes) +
                        " (op.preamble.length <= op.nbytes), so the sender's size is wrong");
}

}  // namespace dlaunch::launcher
