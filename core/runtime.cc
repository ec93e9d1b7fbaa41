#include "core/runtime.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/proc.h"
#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/grpc_setup.h"
#include "core/run_dir/events_file.h"
#include "core/run_dir/paths.h"

namespace dlaunch::core {
namespace {

constexpr std::chrono::milliseconds kEventTimeout{5000};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("environment variable ") + name + "='" + v + "' is not an integer");
  }
}

std::string EnvStr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

v1::Phase ToProto(Phase p) { return static_cast<v1::Phase>(static_cast<int>(p)); }

constexpr std::pair<EventKind, const char*> kEventNames[] = {
    {EventKind::kUnspecified, "unspecified"},
    {EventKind::kError, "error"},
    {EventKind::kTimeout, "timeout"},
    {EventKind::kOom, "oom"},
    {EventKind::kTelemetry, "telemetry"},
    {EventKind::kDumped, "dumped"},
    {EventKind::kResumed, "resumed"},
    {EventKind::kCheckpoint, "checkpoint"},
    {EventKind::kPreflight, "preflight"},
    {EventKind::kPreflightHangTest, "preflight_hang_test"},
    {EventKind::kEval, "eval"},
    {EventKind::kMemory, "memory"},
    {EventKind::kNan, "nan"},
};
static_assert(static_cast<int>(EventKind::kNan) == v1::EVENT_NAN &&
                  v1::EventKind_MAX == v1::EVENT_NAN,
              "core::EventKind and v1::EventKind must match value for value");

class LocalRuntime : public Runtime {
 public:
  LocalRuntime(int rank, int world_size, int local_rank, int local_world_size, int restart_count,
               std::string rank_dir)
      : rank_(rank),
        world_size_(world_size),
        local_rank_(local_rank),
        local_world_size_(local_world_size),
        restart_count_(restart_count),
        rank_dir_(std::move(rank_dir)),
        events_(rank_dir_.empty() ? "" : rundir::RankDir(rank_dir_).events()) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }
  int local_world_size() const override { return local_world_size_; }
  int restart_count() const override { return restart_count_; }
  const std::string& rank_dir() const override { return rank_dir_; }

  std::shared_ptr<Store> store() override {
    if (!store_) store_ = MakeMemoryStore();
    return store_;
  }

  void UpdateStatus(const std::function<void(RankStatus&)>& update) override {
    std::lock_guard<std::mutex> lock(status_mu_);
    Phase before = status_.phase;
    update(status_);
    if (status_.phase != before) phase_since_ms_ = base::UnixMillis();
  }

  RankStatus status() const override {
    std::lock_guard<std::mutex> lock(status_mu_);
    return status_;
  }

  void ReportEvent(EventKind kind, const std::string& json_object) override {
    events_.Append(rank_, EventKindName(kind), nlohmann::json::parse(json_object, nullptr, false));
  }

  void OnCommand(std::function<void(CommandKind, const std::string&)> handler) override {
    std::lock_guard<std::mutex> lock(status_mu_);
    command_handler_ = std::move(handler);
  }

 protected:
  int rank_, world_size_, local_rank_, local_world_size_, restart_count_;
  std::string rank_dir_;
  rundir::EventLog events_;
  std::shared_ptr<Store> store_;
  mutable std::mutex status_mu_;
  RankStatus status_;
  int64_t phase_since_ms_ = base::UnixMillis();
  std::function<void(CommandKind, const std::string&)> command_handler_;
};

// A rank of a launched job: store, heartbeats and events go to the coordinator.
class CoordinatedRuntime : public LocalRuntime {
 public:
  CoordinatedRuntime(std::shared_ptr<CoordinatorClient> client, const v1::RegisterResponse& reg,
                     int restart_count, std::string rank_dir, std::chrono::milliseconds interval)
      : LocalRuntime(reg.rank(), reg.world_size(), reg.local_rank(), reg.local_world_size(),
                     restart_count, std::move(rank_dir)),
        client_(std::move(client)),
        interval_(interval) {
    store_ = MakeCoordinatorStore(client_);
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }

  ~CoordinatedRuntime() override {
    {
      std::lock_guard<std::mutex> lock(hb_mu_);
      stopping_ = true;
      if (stream_ctx_) stream_ctx_->TryCancel();
    }
    hb_cv_.notify_all();
    heartbeat_.join();
  }

  void ReportEvent(EventKind kind, const std::string& json_object) override {
    LocalRuntime::ReportEvent(kind, json_object);
    v1::Event event;
    event.set_rank(rank_);
    event.set_kind(static_cast<v1::EventKind>(kind));
    event.set_json(json_object);
    event.set_unix_ms(base::UnixMillis());
    try {
      client_->ReportEvent(event, kEventTimeout);
    } catch (const Error&) {
      // The event is in events.jsonl already; a coordinator that is gone must not stop the rank.
    }
  }

 private:
  v1::RankStatus Snapshot() {
    std::lock_guard<std::mutex> lock(status_mu_);
    v1::RankStatus s;
    s.set_rank(rank_);
    s.set_step(status_.step);
    s.set_phase(ToProto(status_.phase));
    s.set_phase_since_unix_ms(phase_since_ms_);
    s.set_last_started_seq(status_.last_started_seq);
    s.set_last_completed_seq(status_.last_completed_seq);
    s.set_current_op(status_.current_op);
    s.set_rss_bytes(status_.rss_bytes >= 0 ? status_.rss_bytes : base::CurrentRssBytes());
    s.set_peak_rss_bytes(status_.peak_rss_bytes >= 0 ? status_.peak_rss_bytes
                                                     : base::PeakRssBytes());
    s.set_device_allocated_bytes(status_.device_allocated_bytes);
    s.set_device_reserved_bytes(status_.device_reserved_bytes);
    s.set_device_peak_bytes(status_.device_peak_bytes);
    s.set_loss(status_.loss);
    s.set_samples_per_sec(status_.samples_per_sec);
    s.set_steps_timed(status_.steps_timed);
    s.set_step_busy_ms_total(status_.step_busy_ms_total);
    s.set_arrivals_first_seq(status_.arrivals_first_seq);
    for (int64_t us : status_.arrival_unix_us) s.add_arrival_unix_us(us);
    s.set_unix_ms(base::UnixMillis());
    return s;
  }

  void Dispatch(const v1::Command& cmd) {
    std::function<void(CommandKind, const std::string&)> handler;
    {
      std::lock_guard<std::mutex> lock(status_mu_);
      handler = command_handler_;
    }
    if (!handler) return;
    switch (cmd.kind()) {
      case v1::Command::DUMP:
        handler(CommandKind::kDump, cmd.reason());
        break;
      case v1::Command::ABORT:
        handler(CommandKind::kAbort, cmd.reason());
        break;
      default:
        break;  // a command of a newer launcher: not ours to guess at
    }
  }

  // One stream for the life of the rank; reopened after a failure until the rank stops.
  void HeartbeatLoop() {
    std::unique_lock<std::mutex> lock(hb_mu_);
    while (!stopping_) {
      stream_ctx_ = client_->NewContext(std::chrono::hours(24 * 365));
      auto stream = client_->stub().Heartbeat(stream_ctx_.get());
      lock.unlock();
      std::thread reader([&] {
        v1::Command cmd;
        while (stream->Read(&cmd)) Dispatch(cmd);
      });
      lock.lock();
      while (!stopping_) {
        lock.unlock();
        bool ok = stream->Write(Snapshot());
        lock.lock();
        if (!ok) break;
        hb_cv_.wait_for(lock, interval_, [&] { return stopping_; });
      }
      stream_ctx_->TryCancel();
      lock.unlock();
      reader.join();
      stream->Finish();
      lock.lock();
      stream_ctx_.reset();
      if (!stopping_) hb_cv_.wait_for(lock, interval_, [&] { return stopping_; });
    }
  }

  std::shared_ptr<CoordinatorClient> client_;
  std::chrono::milliseconds interval_;
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool stopping_ = false;
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::thread heartbeat_;
};

}  // namespace

const char* EventKindName(EventKind kind) {
  for (const auto& [k, name] : kEventNames)
    if (k == kind) return name;
  return "unspecified";
}

std::optional<EventKind> EventKindFromName(std::string_view name) {
  for (const auto& [k, n] : kEventNames)
    if (k != EventKind::kUnspecified && name == n) return k;
  return std::nullopt;
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kUnknown:
      return "unknown";
    case Phase::kInit:
      return "init";
    case Phase::kData:
      return "data";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kCommunication:
      return "communication";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kCheckpoint:
      return "checkpoint";
    case Phase::kPreflight:
      return "preflight";
    case Phase::kDone:
      return "done";
  }
  return "unknown";
}

std::unique_ptr<Runtime> Runtime::FromEnv() {
  const int world_size = EnvInt("WORLD_SIZE", 1);
  const int rank = EnvInt("RANK", 0);
  const int restarts = EnvInt("TORCHELASTIC_RESTART_COUNT", 0);
  std::string rank_dir = EnvStr("DLAUNCH_RANK_DIR");
  if (!rank_dir.empty()) ::mkdir(rank_dir.c_str(), 0755);
  const std::string address = EnvStr("DLAUNCH_COORDINATOR");
  if (address.empty()) {
    if (world_size != 1) {
      throw Error(ErrorKind::kInvalidArgument,
                  "WORLD_SIZE=" + std::to_string(world_size) +
                      " but DLAUNCH_COORDINATOR is not set: start the program with dlaunch");
    }
    return std::make_unique<LocalRuntime>(0, 1, 0, 1, restarts, rank_dir);
  }
  // A joining node's ranks reach node 0 by its host name too (grpc_setup.h); a no-op when the
  // program started gRPC already.
  UseSystemResolver();
  auto client = std::make_shared<CoordinatorClient>(address, EnvStr("DLAUNCH_JOB_TOKEN"),
                                                    TlsFiles::FromEnv());
  v1::RegisterRequest req;
  req.set_rank(rank);
  req.set_pid(::getpid());
  req.set_node_rank(EnvInt("GROUP_RANK", 0));
  req.set_host(base::Hostname());
  auto timeout = std::chrono::seconds(EnvInt("DLAUNCH_RDZV_TIMEOUT", 300));
  v1::RegisterResponse reg = client->Register(req, timeout);
  auto interval = std::chrono::milliseconds(EnvInt("DLAUNCH_HEARTBEAT_MS", 1000));
  return std::make_unique<CoordinatedRuntime>(std::move(client), reg, restarts, rank_dir, interval);
}

}  // namespace dlaunch::core
