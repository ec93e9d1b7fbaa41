#include "launcher/diagnose/torch_flight/torch_records.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <numeric>

namespace dlaunch::launcher::torch_flight {
namespace {

using python::TorchFlightDump;
using python::TorchFlightEntry;

// torch's dtype names as dlaunch's recorders write them; others as torch wrote them.
std::string DtypeOf(const std::string& torch_name) {
  static const std::map<std::string, std::string> dtypes = {
      {"Float", "float"},       {"Double", "double"}, {"Half", "half"},
      {"BFloat16", "bfloat16"}, {"Int", "int32"},     {"Long", "int64"},
      {"Byte", "uint8"},        {"Char", "int8"},     {"Bool", "bool"}};
  auto it = dtypes.find(torch_name);
  return it == dtypes.end() ? torch_name : it->second;
}

int64_t Elements(const std::vector<std::vector<int64_t>>& sizes) {
  if (sizes.empty()) return -1;
  int64_t total = 0;
  for (const std::vector<int64_t>& dims : sizes) {
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d > 0 && n > INT64_MAX / d)) return -1;
      n *= d;
    }
    if (total > INT64_MAX - n) return -1;
    total += n;
  }
  return total;
}

// A group rank of `e`'s process group as a global rank; the group rank itself when the dump
// holds no membership (the default group's ranks are the global ones).
int GlobalRank(const TorchFlightDump& dump, const TorchFlightEntry& e, int group_rank) {
  auto it = dump.process_groups.find(e.pg_name);
  if (group_rank < 0 || it == dump.process_groups.end() ||
      static_cast<size_t>(group_rank) >= it->second.ranks.size()) {
    return group_rank;
  }
  return it->second.ranks[static_cast<size_t>(group_rank)];
}

// The peer of a send ("send 0->1": to group rank 1) or recv ("recv 1<-0": from group rank 0);
// -1 when the name does not say (recv from any source writes "?").
int PeerOf(const TorchFlightDump& dump, const TorchFlightEntry& e, bool send) {
  const std::string op = e.op();
  const size_t space = op.find(' ');
  if (space == std::string::npos) return -1;
  const std::string meta = op.substr(space + 1);
  const size_t arrow = meta.find(send ? "->" : "<-");
  if (arrow == std::string::npos) return -1;
  const char* peer = meta.c_str() + arrow + 2;
  char* end = nullptr;
  const long v = std::strtol(peer, &end, 10);
  if (end == peer || v < 0 || v > INT_MAX) return -1;
  return GlobalRank(dump, e, static_cast<int>(v));
}

const python::TorchProcessGroup* StatusOf(const TorchFlightEntry& e, const TorchFlightDump& dump) {
  // pg_status is keyed by the group's id; some versions key it by name.
  auto it = dump.pg_status.find(std::to_string(e.pg_id));
  if (e.pg_id < 0 || it == dump.pg_status.end()) it = dump.pg_status.find(e.pg_name);
  return it == dump.pg_status.end() ? nullptr : &it->second;
}

bool InDefaultGroup(const TorchFlightEntry& e) { return e.pg_name == "0" || e.pg_id == 0; }

// One dump entry as a record; false when it is none the scope keeps.
bool ToRecord(const TorchFlightDump& dump, const TorchFlightEntry& e, size_t index, Scope scope,
              rundir::FlightEntry* out) {
  const OpSemantics sem = SemanticsOf(e.op());
  if (e.is_p2p && !sem.p2p) return false;  // coalesced point-to-point markers
  if (!sem.p2p && e.collective_seq_id < 0) return false;
  if (scope == Scope::kDefaultGroup && (sem.p2p || !InDefaultGroup(e))) return false;
  rundir::FlightEntry& r = *out;
  r.op = sem.op;
  if (scope == Scope::kDefaultGroup) {
    r.seq = e.collective_seq_id;
  } else {
    r.seq = e.record_id >= 0 ? e.record_id : static_cast<int64_t>(index);
  }
  r.collective_seq = sem.p2p ? -1 : e.collective_seq_id;
  // Dumps before process_group was recorded name the group by its id only.
  r.pg = !e.pg_name.empty() ? e.pg_name : e.pg_id >= 0 ? std::to_string(e.pg_id) : "0";
  r.pg_seq = sem.p2p ? -1 : e.collective_seq_id;
  // A send carries what it sends, a recv what it receives into (torch pairs send inputs with
  // recv outputs); a collective what its semantics say every rank carries alike.
  const bool outputs = sem.p2p ? r.op == "recv" : sem.compared == Compared::kOutputs;
  const auto& sizes = outputs && !e.output_sizes.empty() ? e.output_sizes : e.input_sizes;
  const auto& dtypes = outputs && !e.output_dtypes.empty() ? e.output_dtypes : e.input_dtypes;
  r.dtype = dtypes.empty() ? "" : DtypeOf(dtypes.front());
  // Counts, as the verdict words them ("allreduce float x1024"); torch records no bytes.
  if (sem.compared != Compared::kDtypeOnly) {
    r.count = Elements(sizes);
    if (!sizes.empty()) r.shape = sizes.front();
  }
  if (sem.p2p) r.peer = PeerOf(dump, e, r.op == "send");
  r.state = StateOf(e, dump);
  r.scheduled_unix_ns = e.time_created_ns;
  r.started_unix_ns = e.time_discovered_started_ns;
  r.completed_unix_ns = e.time_discovered_completed_ns;
  if (e.duration_ms >= 0) r.duration_us = static_cast<int64_t>(e.duration_ms * 1000);
  r.call_site = e.call_site();
  return true;
}

}  // namespace

OpSemantics SemanticsOf(const std::string& torch_op) {
  // "send 0->1": the name is the first word.
  const std::string name = torch_op.substr(0, torch_op.find(' '));
  static const std::map<std::string, OpSemantics> ops = {
      {"all_reduce", {"allreduce"}},
      {"allreduce_coalesced", {"allreduce"}},
      {"all_reduce_coalesced", {"allreduce"}},
      {"all_gather", {"allgather"}},
      {"_allgather_base", {"allgather"}},
      {"_all_gather_base", {"allgather"}},
      {"allgather_coalesced", {"allgather"}},
      {"all_gather_into_tensor_coalesced", {"allgather"}},
      {"allgather_into_tensor_coalesced", {"allgather"}},
      {"reduce_scatter", {"reduce_scatter"}},
      {"_reduce_scatter_base", {"reduce_scatter"}},
      {"reduce_scatter_tensor_coalesced", {"reduce_scatter"}},
      // Each rank's own split sizes: the counts differ by design.
      {"all_to_all", {"alltoall", Compared::kDtypeOnly}},
      {"all_to_all_single", {"alltoall", Compared::kDtypeOnly}},
      {"alltoall", {"alltoall", Compared::kDtypeOnly}},
      {"alltoall_base", {"alltoall", Compared::kDtypeOnly}},
      {"all_gather_v", {"allgather", Compared::kDtypeOnly}},
      {"reduce_scatter_v", {"reduce_scatter", Compared::kDtypeOnly}},
      // The source's tensor and every other rank's receiving one: all hold the outputs.
      {"broadcast", {"broadcast", Compared::kOutputs}},
      {"_broadcast_oop", {"broadcast", Compared::kOutputs}},
      // Only the source passes a scatter_list; every rank receives its chunk.
      {"scatter", {"scatter", Compared::kOutputs}},
      // Every rank sends its tensor; only the destination passes a gather_list.
      {"gather", {"gather", Compared::kInputs}},
      {"reduce", {"reduce", Compared::kInputs}},
      {"barrier", {"barrier", Compared::kInputs}},
      {"send", {"send", Compared::kInputs, true}},
      {"recv", {"recv", Compared::kOutputs, true}},
      {"recv_any_source", {"recv", Compared::kOutputs, true}},
  };
  auto it = ops.find(name);
  return it == ops.end() ? OpSemantics{name} : it->second;
}

rundir::OpState StateOf(const TorchFlightEntry& e, const TorchFlightDump& dump) {
  if (e.state == "completed" || e.retired || e.time_discovered_completed_ns > 0) {
    return rundir::OpState::kCompleted;
  }
  // A group's collectives complete in order: up to last_completed_collective all did.
  const python::TorchProcessGroup* status = e.is_p2p ? nullptr : StatusOf(e, dump);
  const int64_t seq = e.collective_seq_id;
  if (status && seq >= 0 && seq <= status->last_completed) return rundir::OpState::kCompleted;
  if (e.state == "started" || e.time_discovered_started_ns > 0 ||
      (status && seq >= 0 && seq <= status->last_started)) {
    return rundir::OpState::kStarted;
  }
  return rundir::OpState::kScheduled;
}

rundir::FlightDump ToFlightRecords(const TorchFlightDump& dump, Scope scope,
                                   std::vector<size_t>* source) {
  rundir::FlightDump flight;
  flight.rank = dump.rank;
  flight.reason = "torch";
  std::vector<rundir::FlightEntry> records;
  std::vector<size_t> from;
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    const TorchFlightEntry& e = dump.entries[i];
    rundir::FlightEntry r;
    if (!ToRecord(dump, e, i, scope, &r)) continue;
    if (flight.backend.empty()) {
      const size_t colon = e.profiling_name.find(':');
      if (colon != std::string::npos) flight.backend = e.profiling_name.substr(0, colon);
    }
    // Dated by its entries, not by written_unix_ms (the file's mtime, which a copy resets).
    flight.dumped_unix_ms =
        std::max(flight.dumped_unix_ms, std::max({e.time_created_ns, e.time_discovered_started_ns,
                                                  e.time_discovered_completed_ns}) /
                                            1000000);
    records.push_back(std::move(r));
    from.push_back(i);
  }
  if (flight.backend.empty()) flight.backend = "nccl";
  // In seq order, one record a seq (a ring may hold an entry twice across a dump's rewrites).
  std::vector<size_t> order(records.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return records[a].seq < records[b].seq; });
  for (size_t k : order) {
    if (!flight.entries.empty() && flight.entries.back().seq == records[k].seq) continue;
    flight.entries.push_back(std::move(records[k]));
    if (source) source->push_back(from[k]);
  }
  return flight;
}

}  // namespace dlaunch::launcher::torch_flight
