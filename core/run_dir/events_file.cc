#include "core/run_dir/events_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

using detail::GetDouble;
using detail::GetInt;
using detail::GetString;
using nlohmann::json;

EventKind ParseEventKind(std::string_view kind) {
  if (kind == "telemetry") return EventKind::kTelemetry;
  if (kind == "timeout") return EventKind::kTimeout;
  if (kind == "error") return EventKind::kError;
  if (kind == "oom") return EventKind::kOom;
  if (kind == "dumped") return EventKind::kDumped;
  return EventKind::kOther;
}

std::string EventToLine(int64_t unix_ms, int rank, const std::string& kind, const json& body) {
  json line = {
      {"schema", SchemaId(kEventsSchema)}, {"unix_ms", unix_ms}, {"rank", rank}, {"kind", kind}};
  if (body.is_object()) line.update(body);
  return detail::Dump(line);
}

json TelemetryToJson(const TelemetrySample& s) {
  json body = {{"step", s.step},
               {"total_steps", s.total_steps},
               {"loss", s.loss},
               {"phase", s.phase},
               {"samples_per_sec", s.samples_per_sec},
               {"step_ms", s.step_ms},
               {"compute_ms", s.compute_ms},
               {"comm_wait_ms", s.comm_wait_ms},
               {"bytes_communicated", s.bytes_communicated}};
  if (s.train_accuracy >= 0) body["train_accuracy"] = s.train_accuracy;
  PutMemoryFigures(s, &body);
  return body;
}

TelemetrySample TelemetryFromJson(const json& j) {
  TelemetrySample s;
  static_cast<MemoryFigures&>(s) = GetMemoryFigures(j);
  s.unix_ms = GetInt(j, "unix_ms", 0);
  s.step = GetInt(j, "step", -1);
  s.total_steps = GetInt(j, "total_steps", -1);
  s.loss = GetDouble(j, "loss", -1);
  s.train_accuracy = GetDouble(j, "train_accuracy", -1);
  s.phase = GetString(j, "phase");
  s.samples_per_sec = GetDouble(j, "samples_per_sec", -1);
  s.step_ms = GetDouble(j, "step_ms", -1);
  s.compute_ms = GetDouble(j, "compute_ms", -1);
  s.comm_wait_ms = GetDouble(j, "comm_wait_ms", -1);
  s.bytes_communicated = GetInt(j, "bytes_communicated", -1);
  return s;
}

EventLog::EventLog(const std::string& path) {
  if (!path.empty()) fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::Append(int rank, const std::string& kind, const json& body) {
  Append(base::UnixMillis(), rank, kind, body);
}

void EventLog::Append(int64_t unix_ms, int rank, const std::string& kind, const json& body) {
  if (fd_ < 0) return;
  const std::string line = EventToLine(unix_ms, rank, kind, body) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  // O_APPEND plus a single write keeps lines whole even with several writers.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
}

FileState ReadEvents(const std::string& path, const std::string& label, EventsFile* out,
                     std::vector<std::string>* problems) {
  std::string text;
  const base::ReadStatus status = base::ReadFileTail(path, kMaxEventsBytes, &text);
  if (status == base::ReadStatus::kMissing) return FileState::kAbsent;
  if (status != base::ReadStatus::kOk && status != base::ReadStatus::kTooLarge) {
    problems->push_back(label + " " + base::DescribeReadStatus(status, kMaxEventsBytes));
    return FileState::kInvalid;
  }
  size_t pos = 0;
  if (status == base::ReadStatus::kTooLarge) {
    problems->push_back(label + ": only its last " + std::to_string(kMaxEventsBytes >> 20) +
                        " MiB read");
    pos = text.find('\n');  // a partial first line
    pos = pos == std::string::npos ? text.size() : pos + 1;
  }
  int bad = 0;
  std::string schema_problem;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      ++bad;
      continue;
    }
    std::string problem;
    const SchemaMatch match = CheckSchema(j, kEventsSchema, &problem);
    if (match != SchemaMatch::kSame && schema_problem.empty()) schema_problem = problem;
    if (match == SchemaMatch::kOther) {
      ++bad;
      continue;
    }
    Event e;
    e.kind = GetString(j, "kind");
    e.unix_ms = GetInt(j, "unix_ms", 0);
    e.rank = detail::GetInt32(j, "rank", -1, -1);
    if (e.type() == EventKind::kTelemetry) {
      out->telemetry.push_back(TelemetryFromJson(j));
    } else {
      e.body = std::move(j);
      out->events.push_back(std::move(e));
    }
  }
  if (!schema_problem.empty()) problems->push_back(label + ": a line " + schema_problem);
  if (bad > 0) {
    problems->push_back(label + ": " + std::to_string(bad) +
                        " unreadable line(s) skipped (truncated write?)");
  }
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
