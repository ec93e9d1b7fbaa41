#include "core/run_dir/flight_file.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/run_dir/flight_fast_reader.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

using detail::GetInt;
using detail::GetString;
using nlohmann::json;

namespace {

constexpr const char* kOpStateNames[] = {"scheduled", "started", "completed", "failed"};

// The Python agent's group names are small integers in strings; anything else is kept as named.
void ReadProcessGroups(const json& doc, std::map<std::string, ProcessGroupInfo>* out) {
  auto groups = doc.find("process_groups");
  if (groups == doc.end() || !groups->is_object()) return;
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) continue;
    ProcessGroupInfo& info = (*out)[name];
    info.ranks = detail::GetInts(g, "ranks", 0, kMaxRanks);
    info.backend = GetString(g, "backend");
    info.desc = GetString(g, "desc");
  }
}

std::vector<int64_t> ReadShape(const json& entry) {
  std::vector<int64_t> shape;
  auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array()) return shape;
  for (const json& d : *it) {
    if (d.is_number_integer()) shape.push_back(d.get<int64_t>());
  }
  return shape;
}

}  // namespace

const char* OpStateName(OpState state) { return detail::NameOf(state, kOpStateNames); }
OpState ParseOpState(std::string_view name) {
  return detail::ParseName(name, kOpStateNames, OpState::kScheduled);
}

bool IsPointToPoint(std::string_view op) { return op == "send" || op == "recv"; }

const FlightEntry* FlightDump::Find(int64_t seq) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), seq,
                             [](const FlightEntry& e, int64_t s) { return e.seq < s; });
  if (it == entries.end() || it->seq != seq) return nullptr;
  return &*it;
}

int64_t FlightDump::LastCompletedSeq() const {
  // Collectives complete in order on one communicator, but a ring buffer may hold a failed entry;
  // "completed" means every earlier one completed too.
  int64_t last = -1;
  for (const FlightEntry& e : entries) {
    if (e.state != OpState::kCompleted) break;
    last = e.seq;
  }
  if (last == -1 && !entries.empty() && entries.front().seq > 0) {
    last = entries.front().seq - 1;  // older entries fell out of the ring: they completed
  }
  return last;
}

int64_t FlightDump::LastStartedSeq() const {
  int64_t last = -1;
  for (const FlightEntry& e : entries) {
    if (e.state != OpState::kScheduled) last = std::max(last, e.seq);
  }
  return last;
}

std::string FlightToJson(const FlightDump& dump) {
  json entries = json::array();
  for (const FlightEntry& e : dump.entries) {
    json entry = {{"seq", e.seq},
                  {"collective_seq", e.collective_seq},
                  {"op", e.op},
                  {"dtype", e.dtype},
                  {"count", e.count},
                  {"bytes", e.bytes},
                  {"peer", e.peer},
                  {"root", e.root},
                  {"state", OpStateName(e.state)},
                  {"scheduled_unix_ns", e.scheduled_unix_ns},
                  {"started_unix_ns", e.started_unix_ns},
                  {"completed_unix_ns", e.completed_unix_ns},
                  {"duration_us", e.duration_us},
                  {"error", e.error}};
    // A native recorder's entries stay as they were: the Python fields only where set.
    if (!e.pg.empty()) entry["pg"] = e.pg;
    if (e.pg_seq >= 0) entry["pg_seq"] = e.pg_seq;
    if (!e.shape.empty()) entry["shape"] = e.shape;
    if (!e.call_site.empty()) entry["call_site"] = e.call_site;
    if (e.bucket >= 0) entry["bucket"] = e.bucket;
    entries.push_back(std::move(entry));
  }
  json doc = {{"schema", SchemaId(kFlightSchema)},
              {"rank", dump.rank},
              {"world_size", dump.world_size},
              {"backend", dump.backend},
              {"reason", dump.reason},
              {"dumped_unix_ms", dump.dumped_unix_ms},
              {"capacity", dump.capacity},
              {"entries", std::move(entries)}};
  if (!dump.process_groups.empty()) {
    json groups = json::object();
    for (const auto& [name, g] : dump.process_groups) {
      groups[name] = {{"ranks", g.ranks}, {"backend", g.backend}};
      if (!g.desc.empty()) groups[name]["desc"] = g.desc;
    }
    doc["process_groups"] = std::move(groups);
  }
  return detail::Dump(doc);
}

void WriteFlight(const std::string& path, const FlightDump& dump) {
  base::WriteFileAtomically(path, FlightToJson(dump) + "\n");
}

bool FlightEntryFromJson(const json& e, FlightEntry* out) {
  if (!e.is_object()) return false;
  FlightEntry& entry = *out;
  entry.seq = GetInt(e, "seq", -1);
  if (entry.seq < 0) return false;
  entry.collective_seq = GetInt(e, "collective_seq", -1);
  entry.op = GetString(e, "op");
  entry.dtype = GetString(e, "dtype");
  entry.count = GetInt(e, "count", -1);
  entry.bytes = GetInt(e, "bytes", -1);
  entry.peer = detail::GetInt32(e, "peer", -1, -1);
  entry.root = detail::GetInt32(e, "root", -1, -1);
  entry.state = ParseOpState(GetString(e, "state"));
  entry.scheduled_unix_ns = GetInt(e, "scheduled_unix_ns", 0);
  entry.started_unix_ns = GetInt(e, "started_unix_ns", 0);
  entry.completed_unix_ns = GetInt(e, "completed_unix_ns", 0);
  entry.duration_us = GetInt(e, "duration_us", 0);
  entry.error = GetString(e, "error");
  entry.pg = GetString(e, "pg");
  entry.pg_seq = GetInt(e, "pg_seq", -1);
  entry.shape = ReadShape(e);
  entry.call_site = GetString(e, "call_site");
  entry.bucket = detail::GetInt32(e, "bucket", -1, -1);
  return true;
}

namespace {

constexpr size_t kKeptReadBuffer = 8 << 20;

// Keeps the newest `max_entries` by seq, sorted; counts the rest in `dropped_entries`.
void SortAndBound(size_t max_entries, FlightDump* flight) {
  std::vector<FlightEntry>& entries = flight->entries;
  auto by_seq = [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; };
  if (!std::is_sorted(entries.begin(), entries.end(), by_seq)) {
    std::sort(entries.begin(), entries.end(), by_seq);
  }
  if (entries.size() > max_entries) {
    const size_t drop = entries.size() - max_entries;
    flight->dropped_entries += static_cast<int64_t>(drop);
    std::vector<FlightEntry> kept(std::make_move_iterator(entries.begin() + drop),
                                  std::make_move_iterator(entries.end()));
    entries = std::move(kept);
  }
}

}  // namespace

FileState ReadFlight(const std::string& path, const std::string& label, FlightDump* out,
                     std::vector<std::string>* problems, size_t max_entries) {
  max_entries = std::clamp<size_t>(max_entries, 1, kMaxFlightEntries);
  {
    // One buffer per thread, kept between files (a few MiB at most): thousands of ~1 MiB reads
    // would otherwise each grow a string from nothing, and simdjson finds its padding in it.
    thread_local std::string text;
    const base::ReadStatus status = base::ReadFileBounded(path, kMaxFlightBytes, &text);
    const bool fast =
        status == base::ReadStatus::kOk && detail::ReadFlightFast(text, max_entries, out);
    if (text.capacity() > kKeptReadBuffer) std::string().swap(text);
    if (status == base::ReadStatus::kMissing) return FileState::kAbsent;
    if (fast) {
      SortAndBound(max_entries, out);
      return FileState::kOk;
    }
  }
  // Anything the fast path declines is read (and its problems worded) as it always was.
  *out = FlightDump();
  json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kFlightSchema, kMaxFlightBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  FlightDump& flight = *out;
  flight.rank = detail::GetInt32(j, "rank", -1, -1);
  flight.world_size = detail::GetInt32(j, "world_size", 0, 0);
  flight.backend = GetString(j, "backend");
  flight.reason = GetString(j, "reason");
  flight.dumped_unix_ms = GetInt(j, "dumped_unix_ms", 0);
  flight.capacity = GetInt(j, "capacity", 0);
  ReadProcessGroups(j, &flight.process_groups);
  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array()) {
    problems->push_back(label + " has no entries array");
    return FileState::kInvalid;
  }
  if (entries->size() > kMaxFlightEntries) {
    problems->push_back(label + " holds " + std::to_string(entries->size()) +
                        " entries: only the last " + std::to_string(kMaxFlightEntries) + " read");
  }
  const size_t first =
      entries->size() > kMaxFlightEntries ? entries->size() - kMaxFlightEntries : 0;
  for (size_t i = first; i < entries->size(); ++i) {
    FlightEntry entry;
    if (FlightEntryFromJson((*entries)[i], &entry)) flight.entries.push_back(std::move(entry));
  }
  SortAndBound(max_entries, &flight);
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
