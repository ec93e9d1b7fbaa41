#include "launcher/diagnose/python_evidence.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/base/files.h"
#include "core/base/format.h"

namespace dlaunch::launcher {
namespace {

// 64 slots of 1 KiB as the agent writes it; anything far larger is not the agent's.
constexpr size_t kMaxTailBytes = 1 << 20;
constexpr char kGlooSizeEnforce[] = "op.preamble.length <= op.nbytes. ";

constexpr size_t kTorchEntriesInJson = 32;  // per rank, the newest: diagnosis.json stays small
constexpr size_t kTorchEntriesInText = 3;   // per rank, the oldest not completed
constexpr size_t kTorchTensorsInText = 8;   // of an entry's inputs
constexpr size_t kTorchGroupsInText = 8;    // process groups in a dump's line
constexpr size_t kTorchFindings = 16;       // of the comparison across ranks

// torch's names for what dlaunch's recorders call op and dtype.
std::string DlaunchOp(const std::string& op) {
  static const std::map<std::string, std::string> names = {
      {"all_reduce", "allreduce"},
      {"allreduce_coalesced", "allreduce"},
      {"all_reduce_coalesced", "allreduce"},
      {"all_gather", "allgather"},
      {"_allgather_base", "allgather"},
      {"all_gather_into_tensor_coalesced", "allgather"},
      {"allgather_into_tensor_coalesced", "allgather"},
      {"reduce_scatter", "reduce_scatter"},
      {"_reduce_scatter_base", "reduce_scatter"},
      {"reduce_scatter_tensor_coalesced", "reduce_scatter"},
      {"all_to_all", "alltoall"},
      {"alltoall", "alltoall"},
      {"alltoall_base", "alltoall"},
      {"broadcast", "broadcast"},
      {"reduce", "reduce"},
      {"gather", "gather"},
      {"scatter", "scatter"},
      {"barrier", "barrier"},
      {"send", "send"},
      {"recv", "recv"}};
  auto it = names.find(op);
  return it == names.end() ? op : it->second;
}

std::string DlaunchDtype(const std::string& dtype) {
  static const std::map<std::string, std::string> names = {
      {"Float", "float"}, {"Double", "double"}, {"Half", "half"},  {"BFloat16", "bfloat16"},
      {"Int", "int32"},   {"Long", "int64"},    {"Byte", "uint8"}, {"Char", "int8"}};
  auto it = names.find(dtype);
  return it == names.end() ? dtype : it->second;
}

// "Float[1024]" or "Float[4,256],Float[16]": what torch recorded of the inputs.
std::string DescribeInputs(const python::TorchFlightEntry& e) {
  std::string out;
  for (size_t i = 0; i < e.input_sizes.size(); ++i) {
    if (i == kTorchTensorsInText) {
      out += ",... (" + std::to_string(e.input_sizes.size()) + " tensors)";
      break;
    }
    if (i) out += ",";
    out += i < e.input_dtypes.size() ? e.input_dtypes[i] : "";
    out += "[";
    for (size_t d = 0; d < e.input_sizes[i].size(); ++d) {
      out += (d ? "," : "") + std::to_string(e.input_sizes[i][d]);
    }
    out += "]";
  }
  return out;
}

std::string DescribeEntry(const python::TorchFlightEntry& e) {
  std::string out = "#" + std::to_string(e.collective_seq_id) + " " + e.profiling_name;
  const std::string inputs = DescribeInputs(e);
  if (!inputs.empty()) out += " " + inputs;
  out += " " + (e.state.empty() ? std::string("(no state)") : e.state);
  if (e.state != "completed" && e.timeout_ms > 0) {
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
  // Its exit is what a peer's size did to it, not a failure of its own.
  facts.failure.consequence = true;
  facts.notes.push_back("aborted by Gloo: a peer sent " + std::to_string(abort->sent_bytes) +
                        " bytes where it expected at most " +
                        std::to_string(abort->expected_bytes) +
                        " (op.preamble.length <= op.nbytes), so the sender's size is wrong");
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
    const python::TorchFlightDump& dump = r.torch_flight.back();
    rundir::FlightDump flight;
    flight.rank = r.rank;
    flight.backend = "nccl";
    flight.reason = "torch";
    // Dated by its entries, not by written_unix_ms (the file's mtime, which a copy resets).
    for (const python::TorchFlightEntry& e : dump.entries) {
      // Only the default group's collectives line up across every rank by collective_seq_id.
      if (e.is_p2p || e.collective_seq_id < 0 || (e.pg_name != "0" && e.pg_id != 0)) continue;
      rundir::FlightEntry f;
      f.seq = f.collective_seq = e.collective_seq_id;
      f.op = DlaunchOp(e.op());
      f.dtype = e.input_dtypes.empty() ? "" : DlaunchDtype(e.input_dtypes.front());
      f.count = e.elements();
      if (!e.input_sizes.empty()) f.shape = e.input_sizes.front();
      f.state = e.state == "completed" ? rundir::OpState::kCompleted
                : e.state == "started" ? rundir::OpState::kStarted
                                       : rundir::OpState::kScheduled;
      f.scheduled_unix_ns = e.time_created_ns;
      f.started_unix_ns = e.time_discovered_started_ns;
      f.completed_unix_ns = e.time_discovered_completed_ns;
      if (e.duration_ms >= 0) f.duration_us = static_cast<int64_t>(e.duration_ms * 1000);
      f.pg = e.pg_name;
      f.pg_seq = e.collective_seq_id;
      f.call_site = e.call_site();
      flight.dumped_unix_ms =
          std::max(flight.dumped_unix_ms, std::max({e.time_created_ns, e.time_discovered_started_ns,
                                                    e.time_discovered_completed_ns}) /
                                              1000000);
      flight.entries.push_back(std::move(f));
    }
    if (flight.entries.empty()) continue;
    std::sort(
        flight.entries.begin(), flight.entries.end(),
        [](const rundir::FlightEntry& a, const rundir::FlightEntry& b) { return a.seq < b.seq; });
    flight.entries.erase(std::unique(flight.entries.begin(), flight.entries.end(),
                                     [](const rundir::FlightEntry& a,
                                        const rundir::FlightEntry& b) { return a.seq == b.seq; }),
                         flight.entries.end());
    r.flight = std::move(flight);
    r.flight_state = rundir::FileState::kOk;
  }
}

namespace {

using TorchEntries = std::map<int, const python::TorchFlightEntry*>;  // rank -> its entry

// Comparing the dumps across ranks as torch's fr_trace does: per process group and
// collective_seq_id, the first op/dtype/size disagreement, and the first collective that some
// ranks never joined.
void CompareTorchDumps(const RunSnapshot& run, nlohmann::json* findings,
                       std::vector<std::string>* lines) {
  std::map<std::string, std::map<int64_t, TorchEntries>> by_pg;  // pg -> seq -> rank -> entry
  std::map<std::string, std::map<int, int64_t>> last_seq;        // pg -> rank -> highest seq
  std::map<std::string, std::vector<int>> members;
  for (const RankRecord& r : run.ranks) {
    if (r.torch_flight.empty()) continue;
    const python::TorchFlightDump& d = r.torch_flight.back();
    for (const python::TorchFlightEntry& e : d.entries) {
      if (e.is_p2p || e.collective_seq_id < 0) continue;
      by_pg[e.pg_name][e.collective_seq_id][r.rank] = &e;
      int64_t& last = last_seq[e.pg_name].try_emplace(r.rank, -1).first->second;
      last = std::max(last, e.collective_seq_id);
    }
    for (const auto& [name, g] : d.process_groups) {
      if (!g.ranks.empty()) members[name] = g.ranks;
    }
  }
  for (const auto& [pg, seqs] : by_pg) {
    if (findings->size() >= kTorchFindings) break;
    bool mismatch_found = false;
    for (const auto& [seq, entries] : seqs) {
      std::map<std::tuple<std::string, std::vector<std::string>, std::vector<std::vector<int64_t>>>,
               std::vector<int>>
          groups;
      for (const auto& [rank, e] : entries) {
        groups[{e->profiling_name, e->input_dtypes, e->input_sizes}].push_back(rank);
      }
      if (groups.size() < 2) continue;
      auto best = groups.begin();
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        if (it->second.size() > best->second.size()) best = it;
      }
      const python::TorchFlightEntry& good = *entries.at(best->second.front());
      std::string kind = "SIZE_OR_SYNTAX_MISMATCH";
      std::vector<int> culprits;
      std::string odd;
      for (auto it = groups.begin(); it != groups.end(); ++it) {
        if (it == best) continue;
        const python::TorchFlightEntry& e = *entries.at(it->second.front());
        if (e.profiling_name != good.profiling_name) {
          kind = "COLLECTIVE_TYPE_MISMATCH";
        } else if (e.input_dtypes != good.input_dtypes && kind != "COLLECTIVE_TYPE_MISMATCH") {
          kind = "COLLECTIVE_DTYPE_MISMATCH";
        }
        culprits.insert(culprits.end(), it->second.begin(), it->second.end());
        odd += (odd.empty() ? "" : "; ") + base::NameRanks(it->second) + " called " +
               e.profiling_name + " " + DescribeInputs(e);
      }
      std::sort(culprits.begin(), culprits.end());
      const std::string line = "PyTorch flight recorder: " + kind + " at " + GroupLabel(good) +
                               " collective #" + std::to_string(seq) + ": " + odd + " while " +
                               base::NameRanks(best->second) + " called " + good.profiling_name +
                               " " + DescribeInputs(good);
      lines->push_back(line);
      findings->push_back({{"kind", kind},
                           {"pg", pg},
                           {"collective_seq_id", seq},
                           {"culprit_ranks", culprits},
                           {"line", line}});
      mismatch_found = true;
      break;
    }
    if (mismatch_found) continue;
    // The first collective not completed everywhere it was recorded, and who never recorded it.
    for (const auto& [seq, entries] : seqs) {
      bool all_completed = true;
      for (const auto& [rank, e] : entries)
        all_completed = all_completed && e->state == "completed";
      std::vector<int> joined, missing;
      for (const auto& [rank, e] : entries) joined.push_back(rank);
      std::vector<int> group = members.count(pg) ? members[pg] : std::vector<int>{};
      if (group.empty()) {
        for (const auto& [rank, last] : last_seq[pg]) group.push_back(rank);
      }
      for (int m : group) {
        auto it = last_seq[pg].find(m);
        if (!entries.count(m) && it != last_seq[pg].end() && it->second < seq) missing.push_back(m);
      }
      if (all_completed && missing.empty()) continue;
      const python::TorchFlightEntry& first = *entries.begin()->second;
      std::string line = "PyTorch flight recorder: " + GroupLabel(first) + " collective #" +
                         std::to_string(seq) + " " + first.profiling_name + ": " +
                         base::NameRanks(joined) + " " + first.state;
      if (!missing.empty()) {
        line += "; " + base::NameRanks(missing) +
                " never joined it (not all ranks joined collective #" + std::to_string(seq) + ")";
      }
      lines->push_back(line);
      findings->push_back({{"kind", missing.empty() ? "not_completed" : "missing_ranks"},
                           {"pg", pg},
                           {"collective_seq_id", seq},
                           {"entered_ranks", joined},
                           {"missing_ranks", missing},
                           {"line", line}});
      break;
    }
  }
}

}  // namespace

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
        if (e.state == "completed") {
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
        lines.push_back("  " + GroupLabel(*e) + " " + DescribeEntry(*e));
      }
    }
  }
  if (dumps.empty()) return;
  nlohmann::json findings = nlohmann::json::array();
  CompareTorchDumps(run, &findings, &lines);
  diagnosis->torch_flight = {{"dumps", std::move(dumps)}, {"findings", std::move(findings)}};
  diagnosis->details.insert(diagnosis->details.end(), lines.begin(), lines.end());
}

}  // namespace dlaunch::launcher
