#include "launcher/diagnose/torch_flight/torch_findings.h"

#include <algorithm>
#include <map>

#include "core/base/format.h"
#include "launcher/diagnose/mismatch_finder.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/torch_flight/torch_records.h"

namespace dlaunch::launcher::torch_flight {
namespace {

using base::NameRanks;
using python::TorchFlightDump;
using python::TorchFlightEntry;

constexpr size_t kTensorsInText = 8;

// Every rank's newest dump as records, and the way back from a record to its dump entry.
struct TorchRecords {
  explicit TorchRecords(const RunSnapshot& run)
      : dumps(run.ranks.size(), nullptr), flights(run.ranks.size()), source(run.ranks.size()) {
    for (const RankRecord& r : run.ranks) {
      if (r.torch_flight.empty() || r.rank < 0 || static_cast<size_t>(r.rank) >= dumps.size()) {
        continue;
      }
      dumps[r.rank] = &r.torch_flight.back();
      flights[r.rank] = ToFlightRecords(*dumps[r.rank], Scope::kEveryGroup, &source[r.rank]);
    }
  }
  const TorchFlightEntry* EntryOf(int rank, int64_t seq) const {
    const std::vector<rundir::FlightEntry>& es = flights[rank].entries;
    for (size_t i = 0; i < es.size(); ++i) {
      if (es[i].seq == seq) return &dumps[rank]->entries[source[rank][i]];
    }
    return nullptr;
  }
  std::vector<const TorchFlightDump*> dumps;  // index == rank; null without a dump
  std::vector<rundir::FlightDump> flights;
  std::vector<std::vector<size_t>> source;
};

std::string GroupLabel(const TorchFlightEntry& e) {
  return "pg " + e.pg_name + (e.pg_desc.empty() ? "" : " (" + e.pg_desc + ")");
}

// What the engine compared of `e`: its profiling name and the tensors every rank carries.
std::string DescribeCompared(const TorchFlightEntry& e) {
  const OpSemantics sem = SemanticsOf(e.op());
  const bool outputs = sem.p2p ? sem.op == "recv" : sem.compared == Compared::kOutputs;
  const std::string tensors = outputs ? DescribeTensors(e.output_sizes, e.output_dtypes)
                                      : DescribeTensors(e.input_sizes, e.input_dtypes);
  return e.profiling_name + (tensors.empty() ? "" : " " + tensors);
}

std::string TieNote(const Mismatch& m) {
  switch (m.tie) {
    case TieBreak::kCallSite:
      return " (a tie, decided by each rank's own earlier calls at " + m.site.call_site + ": " +
             NameRanks(m.site.changed) + " changed its call there)";
    case TieBreak::kPattern:
      return " (a tie, decided by the calls before it: " + NameRanks(m.pattern.broke) +
             " broke the pattern)";
    case TieBreak::kPeerSizeAbort:
      return " (a tie, decided by Gloo's abort of a rank that received more than it posted)";
    case TieBreak::kUndecided:
      return " (a tie: nothing in the evidence tells which side is wrong)";
    default:
      return "";
  }
}

// The engine's lowest mismatch in torch's records, as a finding; false when the ranks agree.
bool FindMismatch(const RunSnapshot& run, const TorchRecords& recs, nlohmann::json* findings,
                  std::vector<std::string>* lines) {
  std::vector<RankFacts> facts(run.ranks.size());
  for (size_t r = 0; r < facts.size(); ++r) {
    facts[r].rank = static_cast<int>(r);
    if (recs.dumps[r]) facts[r].flight = &recs.flights[r];
    // Gloo's size abort is evidence for a tie, as it is for dlaunch's own records.
    if (r < run.ranks.size()) AddPythonEvidence(run.ranks[r], facts[r]);
  }
  Mismatch m;
  bool p2p_not_compared = false;
  if (!FindFirstMismatch(facts, &m, &p2p_not_compared) && !FindFirstP2PMismatch(facts, &m)) {
    return false;
  }
  const char* kind = rundir::MismatchKindName(m.kind);
  std::string wrong, right, where;
  for (const MismatchGroup& g : m.groups) {
    const TorchFlightEntry* e = recs.EntryOf(g.ranks.front(), g.seq);
    if (e == nullptr) continue;
    if (where.empty()) where = GroupLabel(*e);
    std::string& side = g.culprit || m.tie == TieBreak::kUndecided ? wrong : right;
    side += (side.empty() ? "" : "; ") + NameRanks(g.ranks) + " called " + DescribeCompared(*e);
  }
  std::string line = "PyTorch flight recorder: " + std::string(kind) + " at " + where;
  line += m.p2p ? " send/recv: " : " collective #" + std::to_string(m.pg_seq) + ": ";
  line += m.tie == TieBreak::kUndecided ? wrong : wrong + " while " + right;
  line += TieNote(m);
  lines->push_back(line);
  findings->push_back(
      {{"kind", kind},
       {"pg", m.pg},
       {"collective_seq_id", m.p2p ? nlohmann::json(nullptr) : nlohmann::json(m.pg_seq)},
       {"culprit_ranks", m.culprits},
       {"line", line}});
  return true;
}

// Per group, the first collective some member did not complete, and who never reached it.
void FindIncomplete(const TorchRecords& recs, const std::string& skip_pg, nlohmann::json* findings,
                    std::vector<std::string>* lines) {
  std::map<std::string, std::map<int64_t, std::map<int, const rundir::FlightEntry*>>> by_pg;
  std::map<std::string, std::map<int, int64_t>> last_seq;  // pg -> rank -> its highest pg_seq
  std::map<std::string, std::vector<int>> members;
  for (size_t r = 0; r < recs.dumps.size(); ++r) {
    if (!recs.dumps[r]) continue;
    for (const rundir::FlightEntry& e : recs.flights[r].entries) {
      if (e.pg_seq < 0) continue;
      by_pg[e.pg][e.pg_seq][static_cast<int>(r)] = &e;
      int64_t& last = last_seq[e.pg].try_emplace(static_cast<int>(r), -1).first->second;
      last = std::max(last, e.pg_seq);
    }
    for (const auto& [name, g] : recs.dumps[r]->process_groups) {
      if (!g.ranks.empty()) members[name] = g.ranks;
    }
  }
  for (const auto& [pg, seqs] : by_pg) {
    if (pg == skip_pg) continue;
    if (findings->size() >= kMaxFindings) break;
    std::vector<int> group = members.count(pg) ? members[pg] : std::vector<int>{};
    if (group.empty()) {
      for (const auto& [rank, last] : last_seq[pg]) group.push_back(rank);
    }
    for (const auto& [seq, entries] : seqs) {
      std::map<rundir::OpState, std::vector<int>> states;
      std::vector<int> joined, missing;
      for (const auto& [rank, e] : entries) {
        states[e->state].push_back(rank);
        joined.push_back(rank);
      }
      for (int m : group) {
        auto it = last_seq[pg].find(m);
        if (!entries.count(m) && it != last_seq[pg].end() && it->second < seq) missing.push_back(m);
      }
      const bool all_completed =
          states.size() == 1 && states.begin()->first == rundir::OpState::kCompleted;
      if (all_completed && missing.empty()) continue;
      const int first_rank = entries.begin()->first;
      const TorchFlightEntry* first = recs.EntryOf(first_rank, entries.begin()->second->seq);
      std::string line = "PyTorch flight recorder: " + (first ? GroupLabel(*first) : "pg " + pg) +
                         " collective #" + std::to_string(seq) + " " +
                         (first ? first->profiling_name : entries.begin()->second->op) + ": ";
      const char* sep = "";
      for (const auto& [state, ranks] : states) {
        line += sep + NameRanks(ranks) + " " + rundir::OpStateName(state);
        sep = ", ";
      }
      if (!missing.empty()) {
        line += "; " + NameRanks(missing) + " never joined it (not all ranks joined collective #" +
                std::to_string(seq) + ")";
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

std::string DescribeTensors(const std::vector<std::vector<int64_t>>& sizes,
                            const std::vector<std::string>& dtypes) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i == kTensorsInText) {
      out += ",... (" + std::to_string(sizes.size()) + " tensors)";
      break;
    }
    if (i) out += ",";
    out += i < dtypes.size() ? dtypes[i] : "";
    out += "[";
    for (size_t d = 0; d < sizes[i].size(); ++d) {
      out += (d ? "," : "") + std::to_string(sizes[i][d]);
    }
    out += "]";
  }
  return out;
}

void FindAcrossRanks(const RunSnapshot& run, nlohmann::json* findings,
                     std::vector<std::string>* lines) {
  const TorchRecords recs(run);
  const size_t before = findings->size();
  std::string mismatched_pg;
  if (FindMismatch(run, recs, findings, lines)) {
    mismatched_pg = (*findings)[before].value("pg", std::string());
  }
  FindIncomplete(recs, mismatched_pg, findings, lines);
}

}  // namespace dlaunch::launcher::torch_flight
