#include "core/run_dir/flight_fast_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/run_dir/paths.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir::detail {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// The same conversions as json_fields.cc's GetInt on the nlohmann value: integers as they are (an
// unsigned one past INT64_MAX converts as nlohmann's get<int64_t> does), doubles within range.
int64_t Int(const element* v, int64_t fallback) {
  if (v == nullptr) return fallback;
  switch (v->type()) {
    case element_type::INT64:
      return v->get_int64().value_unsafe();
    case element_type::UINT64:
      return static_cast<int64_t>(v->get_uint64().value_unsafe());
    case element_type::DOUBLE: {
      const double d = v->get_double().value_unsafe();
      if (!(d > -9.2e18 && d < 9.2e18)) return fallback;
      return static_cast<int64_t>(d);
    }
    default:
      return fallback;
  }
}

int Int32(const element* v, int fallback, int lo, int hi = INT32_MAX) {
  return static_cast<int>(std::clamp<int64_t>(Int(v, fallback), lo, hi));
}

std::string String(const element* v) {
  if (v == nullptr || v->type() != element_type::STRING) return "";
  return std::string(v->get_string().value_unsafe());
}

bool IsInteger(const element& v) {
  return v.type() == element_type::INT64 || v.type() == element_type::UINT64;
}

int64_t IntegerValue(const element& v) {
  return v.type() == element_type::INT64 ? v.get_int64().value_unsafe()
                                         : static_cast<int64_t>(v.get_uint64().value_unsafe());
}

// The value of each key an entry may hold; a repeated key's last value wins, as with nlohmann.
struct EntryFields {
  element seq, collective_seq, op, dtype, count, bytes, peer, root, state, scheduled, started,
      completed, duration, error, pg, pg_seq, shape, call_site, bucket;
  bool has[19] = {};
};

element* Slot(EntryFields& f, std::string_view key, int* index) {
  static constexpr std::string_view kKeys[] = {"seq",
                                               "collective_seq",
                                               "op",
                                               "dtype",
                                               "count",
                                               "bytes",
                                               "peer",
                                               "root",
                                               "state",
                                               "scheduled_unix_ns",
                                               "started_unix_ns",
                                               "completed_unix_ns",
                                               "duration_us",
                                               "error",
                                               "pg",
                                               "pg_seq",
                                               "shape",
                                               "call_site",
                                               "bucket"};
  element* slots[] = {&f.seq,     &f.collective_seq, &f.op,        &f.dtype, &f.count,
                      &f.bytes,   &f.peer,           &f.root,      &f.state, &f.scheduled,
                      &f.started, &f.completed,      &f.duration,  &f.error, &f.pg,
                      &f.pg_seq,  &f.shape,          &f.call_site, &f.bucket};
  for (int i = 0; i < 19; ++i) {
    if (key == kKeys[i]) {
      *index = i;
      return slots[i];
    }
  }
  return nullptr;
}

// FlightEntryFromJson on a simdjson value.
bool ReadEntry(const element& value, FlightEntry* out) {
  simdjson::dom::object object;
  if (value.get_object().get(object)) return false;
  EntryFields f;
  for (const simdjson::dom::key_value_pair& field : object) {
    int index = 0;
    if (element* slot = Slot(f, field.key, &index)) {
      *slot = field.value;
      f.has[index] = true;
    }
  }
  auto at = [&f](const element& e, int index) { return f.has[index] ? &e : nullptr; };
  FlightEntry& entry = *out;
  entry.seq = Int(at(f.seq, 0), -1);
  if (entry.seq < 0) return false;
  entry.collective_seq = Int(at(f.collective_seq, 1), -1);
  entry.op = String(at(f.op, 2));
  entry.dtype = String(at(f.dtype, 3));
  entry.count = Int(at(f.count, 4), -1);
  entry.bytes = Int(at(f.bytes, 5), -1);
  entry.peer = Int32(at(f.peer, 6), -1, -1);
  entry.root = Int32(at(f.root, 7), -1, -1);
  entry.state = ParseOpState(String(at(f.state, 8)));
  entry.scheduled_unix_ns = Int(at(f.scheduled, 9), 0);
  entry.started_unix_ns = Int(at(f.started, 10), 0);
  entry.completed_unix_ns = Int(at(f.completed, 11), 0);
  entry.duration_us = Int(at(f.duration, 12), 0);
  entry.error = String(at(f.error, 13));
  entry.pg = String(at(f.pg, 14));
  entry.pg_seq = Int(at(f.pg_seq, 15), -1);
  simdjson::dom::array shape;
  if (f.has[16] && !f.shape.get_array().get(shape)) {
    for (const element& d : shape) {
      if (IsInteger(d)) entry.shape.push_back(IntegerValue(d));
    }
  }
  entry.call_site = String(at(f.call_site, 17));
  entry.bucket = Int32(at(f.bucket, 18), -1, -1);
  return true;
}

// The entry's seq as ReadEntry reads it (the last "seq" key wins); -1 when it has none.
int64_t Seq(const element& value) {
  simdjson::dom::object object;
  if (value.get_object().get(object)) return -1;
  const element* seq = nullptr;
  element last;
  for (const simdjson::dom::key_value_pair& field : object) {
    if (field.key == "seq") {
      last = field.value;
      seq = &last;
    }
  }
  return Int(seq, -1);
}

void ReadProcessGroups(const element& groups, std::map<std::string, ProcessGroupInfo>* out) {
  simdjson::dom::object object;
  if (groups.get_object().get(object)) return;
  for (const simdjson::dom::key_value_pair& field : object) {
    simdjson::dom::object g;
    if (field.value.get_object().get(g)) continue;
    ProcessGroupInfo& info = (*out)[std::string(field.key)];
    info.ranks.clear();
    info.backend.clear();
    info.desc.clear();
    for (const simdjson::dom::key_value_pair& member : g) {
      if (member.key == "backend") {
        info.backend = String(&member.value);
      } else if (member.key == "desc") {
        info.desc = String(&member.value);
      } else if (member.key == "ranks") {
        info.ranks.clear();
        simdjson::dom::array ranks;
        if (member.value.get_array().get(ranks)) continue;
        for (const element& r : ranks) {
          if (!IsInteger(r)) continue;
          const int64_t x = IntegerValue(r);
          if (x >= 0 && x < kMaxRanks) info.ranks.push_back(static_cast<int>(x));
        }
      }
    }
  }
}

}  // namespace

bool ReadFlightFast(const std::string& text, size_t max_entries, FlightDump* out) {
  thread_local simdjson::dom::parser parser;
  element doc;
  simdjson::dom::object root;
  if (parser.parse(text).get(doc) || doc.get_object().get(root)) return false;
  const element *schema = nullptr, *rank = nullptr, *world = nullptr, *backend = nullptr,
                *reason = nullptr, *dumped = nullptr, *capacity = nullptr, *groups = nullptr,
                *entries = nullptr;
  // Pointers into the parser's tape stay valid until the next parse on this thread.
  std::vector<element> values;
  values.reserve(root.size());
  for (const simdjson::dom::key_value_pair& field : root) {
    values.push_back(field.value);
    const element* v = &values.back();
    const std::string_view key = field.key;
    if (key == "schema")
      schema = v;
    else if (key == "rank")
      rank = v;
    else if (key == "world_size")
      world = v;
    else if (key == "backend")
      backend = v;
    else if (key == "reason")
      reason = v;
    else if (key == "dumped_unix_ms")
      dumped = v;
    else if (key == "capacity")
      capacity = v;
    else if (key == "process_groups")
      groups = v;
    else if (key == "entries")
      entries = v;
  }
  if (schema != nullptr) {
    // Only this reader's own version: anything else is worded by the nlohmann path.
    std::string_view id;
    if (schema->get_string().get(id) || id != SchemaId(kFlightSchema)) return false;
  }
  simdjson::dom::array list;
  if (entries == nullptr || entries->get_array().get(list) || list.size() > kMaxFlightEntries) {
    return false;
  }
  FlightDump& flight = *out;
  flight = FlightDump();
  flight.rank = Int32(rank, -1, -1);
  flight.world_size = Int32(world, 0, 0);
  flight.backend = String(backend);
  flight.reason = String(reason);
  flight.dumped_unix_ms = Int(dumped, 0);
  flight.capacity = Int(capacity, 0);
  if (groups != nullptr) ReadProcessGroups(*groups, &flight.process_groups);
  // Only entries that can be among the newest `max_entries` by seq are converted: at a world of
  // thousands that is a tenth of them, and the conversion (strings) is most of the cost.
  int64_t lowest_kept = INT64_MIN;
  if (list.size() > max_entries) {
    std::vector<int64_t> seqs;
    seqs.reserve(list.size());
    for (const element& e : list) seqs.push_back(Seq(e));
    std::nth_element(seqs.begin(), seqs.begin() + (seqs.size() - max_entries), seqs.end());
    lowest_kept = seqs[seqs.size() - max_entries];
  }
  flight.entries.reserve(std::min(list.size(), max_entries));
  for (const element& e : list) {
    if (lowest_kept != INT64_MIN) {
      const int64_t seq = Seq(e);
      if (seq < lowest_kept) {
        flight.dropped_entries += seq >= 0;  // one ReadEntry would have taken
        continue;
      }
    }
    FlightEntry entry;
    if (ReadEntry(e, &entry)) flight.entries.push_back(std::move(entry));
  }
  return true;
}

}  // namespace dlaunch::rundir::detail
