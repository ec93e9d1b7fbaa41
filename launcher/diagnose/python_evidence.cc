#include "launcher/diagnose/python_evidence.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/base/format.h"
#include "launcher/diagnose/torch_flight/torch_findings.h"
#include "launcher/diagnose/torch_flight/torch_records.h"

namespace dlaunch::launcher {
namespace {

// 64 slots of 1 KiB as the agent writes it; anything far larger is not the agent's.
constexpr size_t kMaxTailBytes = 1 << 20;
constexpr char kGlooSizeEnforce[] = "op.preamble.length <= op.nbytes. ";

constexpr size_t kTorchEntriesInJson = 32;  // per rank, the newest: diagnosis.json stays small
constexpr size_t kTorchEntriesInText = 3;   // per rank, the oldest not completed
constexpr size_t kTorchGroupsInText = 8;    // process groups in a dump's line

// "#5 gloo:all_reduce Float[1024] started (timeout 600000 ms) at train.py:42 step": the state
// read from every signal of the dump (torch_records.h), torch's own beside it when they differ.
std::string DescribeEntry(const python::TorchFlightEntry& e, const python::TorchFlightDump& d) {
  std::string out = "#" + std::to_string(e.collective_seq_id) + " " + e.profiling_name;
  const std::string inputs = torch_flight::DescribeTensors(e.input_sizes, e.input_dtypes);
  if (!inputs.empty()) out += " " + inputs;
  const rundir::OpState state = torch_flight::StateOf(e, d);
  out += std::string(" ") + rundir::OpStateName(state);
  if (e.state != rundir::OpStateName(state)) {
    out += " (state " + (e.state.empty() ? std::string("unset") : e.state) + ")";
  }
  if (state != rundir::OpState::kCompleted && e.timeout_ms > 0) {
    out += " (timeout " + std::to_string(e.timeout_ms) + " ms)";
  }
  const std::string site = e.call_site();
  if (!site.empty()) out += " at " + site;
  return out;
}

std::string GroupLabel(const python::TorchFlightEntry& e) {
  return "pg " + e.pg_name + (e.pg_desc.empty() ? "" : " (" + e.pg_desc + ")");
}

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
  // The tail is read whole before anything of flight.json is touched: a tail that holds no entry
  // (blank slots, garbage, cut short) leaves the rank's flight recorder as it was.
  std::map<int64_t, rundir::FlightEntry> tail;
  int64_t newest_ns = 0;
  size_t unreadable = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // an unused slot
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    rundir::FlightEntry entry;
    if (!rundir::FlightEntryFromJson(j, &entry)) {
      ++unreadable;
      continue;
    }
    newest_ns = std::max({newest_ns, entry.started_unix_ns, entry.completed_unix_ns});
    tail[entry.seq] = std::move(entry);
  }
  if (text.empty()) {
    problems->push_back(label + " is empty: not read");
  } else if (unreadable > 0) {
    problems->push_back(label + ": " + std::to_string(unreadable) + " unreadable line" +
                        (unreadable == 1 ? "" : "s") + " skipped");
  }
  if (tail.empty()) return;
  rank->tail_first_seq = tail.begin()->first;
  rank->tail_last_seq = tail.rbegin()->first;
  std::map<int64_t, rundir::FlightEntry> merged;
  if (rank->flight_state == rundir::FileState::kOk) {
    for (rundir::FlightEntry& e : rank->flight.entries) merged[e.seq] = std::move(e);
  }
  for (auto& [seq, e] : tail) merged[seq] = std::move(e);
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
  // Its exit is what the size mismatch did to it, not a failure of its own.
  facts.failure.consequence = true;
  // Which side is wrong is the mismatch verdict's to say: a receiver whose own tensor shrank is
  // aborted just as one whose peer's grew.
  facts.notes.push_back("aborted by Gloo: a peer sent " + std::to_string(abort->sent_bytes) +
                        " bytes where it expected at most " +
                        std::to_string(abort->expected_bytes) +
                        " (op.preamble.length <= op.nbytes): the two ranks' sizes differ");
}

void ReadTorchFlight(const rundir::RankDir& dir, python::TorchReadBudget* budget,
                     RankRecord* record, std::vector<rundir::SkippedEvidence>* skipped) {
  for (const std::string& path : python::FindTorchFlightDumps(dir.path())) {
    std::string error;
    std::optional<python::TorchFlightDump> dump = python::ReadTorchFlightDump(path, &error, budget);
    if (!dump) {
      skipped->push_back({rundir::RankFileLabel(record->rank, path), error});
      continue;
    }
    if (dump->rank < 0) dump->rank = record->rank;
    record->torch_flight.push_back(std::move(*dump));
  }
}

void UseTorchFlightWithoutOther(RunSnapshot* run) {
  for (const RankRecord& r : run->ranks) {
    if (r.flight_state == rundir::FileState::kOk) return;
  }
  for (RankRecord& r : run->ranks) {
    if (r.torch_flight.empty()) continue;
    rundir::FlightDump flight =
        torch_flight::ToFlightRecords(r.torch_flight.back(), torch_flight::Scope::kDefaultGroup);
    if (flight.entries.empty()) continue;
    flight.rank = r.rank;
    r.flight = std::move(flight);
    r.flight_state = rundir::FileState::kOk;
  }
}

void AttachTorchFlight(const RunSnapshot& run, Diagnosis* diagnosis) {
  diagnosis->skipped_evidence = run.skipped_evidence;
  nlohmann::json dumps = nlohmann::json::array();
  std::vector<std::string> lines;
  size_t written = 0;
  for (const RankRecord& r : run.ranks) {
    for (const python::TorchFlightDump& d : r.torch_flight) {
      nlohmann::json j = python::TorchFlightToJson(d);
      nlohmann::json& entries = j["entries"];
      if (entries.size() > kTorchEntriesInJson) {
        entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(
                                                             entries.size() - kTorchEntriesInJson));
      }
      // What it adds to diagnosis.json; a dump past the bounds is left out, and said so.
      const size_t size = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      const std::string label = rundir::RankFileLabel(r.rank, d.file);
      if (size > kMaxTorchDumpJsonBytes || written + size > kMaxTorchFlightJsonBytes) {
        diagnosis->skipped_evidence.Add(
            {label,
             "read, but left out of diagnosis.json: " +
                 base::FormatBytes(static_cast<int64_t>(size)) + " of JSON, past " +
                 (size > kMaxTorchDumpJsonBytes
                      ? "the " + base::FormatBytes(kMaxTorchDumpJsonBytes) + " of one dump"
                      : "the " + base::FormatBytes(kMaxTorchFlightJsonBytes) + " of all dumps")});
        continue;
      }
      written += size;
      dumps.push_back(std::move(j));
      std::string line = "rank " + std::to_string(r.rank) + ": PyTorch flight recorder (" + label +
                         ", version " + d.version + ", " + std::to_string(d.entries.size()) +
                         " entries)";
      std::map<std::string, const python::TorchFlightEntry*> last_done;  // per process group
      std::vector<const python::TorchFlightEntry*> open;
      for (const python::TorchFlightEntry& e : d.entries) {
        if (torch_flight::StateOf(e, d) == rundir::OpState::kCompleted) {
          last_done[e.pg_name] = &e;
        } else if (open.size() < kTorchEntriesInText) {
          open.push_back(&e);
        }
      }
      const char* sep = ": last completed ";
      size_t shown = 0;
      for (const auto& [pg, e] : last_done) {
        if (shown++ == kTorchGroupsInText) {
          line += ", ... (" + std::to_string(last_done.size()) + " groups)";
          break;
        }
        line += sep + GroupLabel(*e) + " #" + std::to_string(e->collective_seq_id);
        sep = ", ";
      }
      lines.push_back(line);
      for (const python::TorchFlightEntry* e : open) {
        lines.push_back("  " + GroupLabel(*e) + " " + DescribeEntry(*e, d));
      }
    }
  }
  if (dumps.empty()) return;
  nlohmann::json findings = nlohmann::json::array();
  torch_flight::FindAcrossRanks(run, &findings, &lines);
  diagnosis->torch_flight = {{"dumps", std::move(dumps)}, {"findings", std::move(findings)}};
  diagnosis->details.insert(diagnosis->details.end(), lines.begin(), lines.end());
}

}  // namespace dlaunch::launcher
