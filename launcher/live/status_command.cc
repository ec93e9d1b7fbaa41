#include "launcher/live/status_command.h"

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/run_dir/live_file.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/diagnose/job_liveness.h"
#include "launcher/live/live_snapshot.h"

namespace dlaunch::launcher {
namespace {

namespace po = boost::program_options;

constexpr char kTokenEnv[] = "DLAUNCH_STATUS_TOKEN";

// What one ask gave: the document, or why not (and whether it is worth a one-line exit 2).
struct Answer {
  bool ok = false;
  bool refused = false;  // wrong token
  std::string json;
  std::string error;
};

Answer Ask(const std::string& endpoint, const std::string& token, double timeout_s) {
  Answer a;
  try {
    core::CoordinatorClient client(endpoint, token, core::TlsFiles::FromEnv());
    auto ctx = client.NewContext(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    v1::StatusRequest req;
    v1::StatusResponse resp;
    const grpc::Status status = client.stub().GetStatus(ctx.get(), req, &resp);
    if (status.ok()) {
      a.ok = true;
      a.json = resp.json();
      return a;
    }
    a.refused = status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
    a.error = a.refused ? "node 0 at " + endpoint + " refused the token: " + status.error_message()
              : status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      status.error_message() == "the job's ranks are not started yet"
                  ? "the job at " + endpoint + " has not started its ranks yet"
                  : "no answer from node 0 at " + endpoint + ": " + status.error_message();
  } catch (const std::exception& e) {
    a.error = e.what();
  }
  return a;
}

// Where to ask, and with what token; "" endpoint and a line in `why` when it cannot be known.
struct Target {
  std::string run_dir;
  std::string endpoint;
  std::string token;
};

bool Resolve(const po::variables_map& vm, Target* t, std::string* why, bool* finished) {
  *finished = false;
  if (vm.count("endpoint")) {
    t->endpoint = vm["endpoint"].as<std::string>();
    const char* token = std::getenv(kTokenEnv);
    if (!token || !*token) token = std::getenv("DLAUNCH_JOB_TOKEN");
    if (!token || !*token) {
      *why =
          std::string("--endpoint needs the job's status token (or its job token) in ") + kTokenEnv;
      return false;
    }
    t->token = token;
    return true;
  }
  t->run_dir = vm["run-dir"].as<std::string>();
  const JobLiveness live = CheckJobLiveness(t->run_dir, "status");
  if (live.kind != JobLiveness::kRunning) {
    *finished = live.kind == JobLiveness::kEnded;
    *why = (*finished ? "job finished: " : "") + live.why;
    return false;
  }
  rundir::LiveEndpoint e;
  std::vector<std::string> problems;
  switch (rundir::ReadLiveEndpoint(rundir::RunDir(t->run_dir).live(), "live.json", &e, &problems)) {
    case rundir::FileState::kAbsent:
      *why = t->run_dir +
             " has no live.json: its launcher has not started the ranks yet, or is an older "
             "dlaunch (try --endpoint)";
      return false;
    case rundir::FileState::kInvalid:
      *why = problems.empty() ? "live.json is unreadable" : problems.front();
      return false;
    case rundir::FileState::kOk:
      break;
  }
  t->endpoint = e.endpoint;
  t->token = e.status_token;
  return true;
}

// One view: printed, or a line on stderr. 0, or 2 for an error.
int Show(const Target& t, const Answer& a, bool json, bool clear) {
  nlohmann::json doc = nlohmann::json::parse(a.json, nullptr, false);
  LiveSnapshot s;
  std::string problem;
  if (!StatusFromJson(doc, &s, &problem)) {
    std::cerr << "dlaunch status: node 0 at " << t.endpoint << " answered " << problem << "\n";
    return 2;
  }
  std::string text = json ? doc.dump(2) + "\n" : RenderStatusText(s);
  if (clear) text = "\033[H\033[2J" + text;  // home and clear, as top redraws
  std::cout << text << std::flush;
  return 0;
}

}  // namespace

int RunStatusCommand(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: dlaunch status [<run-dir> | --endpoint HOST:PORT] [--json] [--watch [S]]");
  visible.add_options()("help,h", "show this help")(
      "endpoint", po::value<std::string>(),
      "node 0's coordinator, HOST:PORT (token in DLAUNCH_STATUS_TOKEN or DLAUNCH_JOB_TOKEN)")(
      "json", "print the dlaunch.status/1 document (docs/status.md)")(
      "watch", po::value<double>()->implicit_value(2),
      "redraw every S seconds (2 when S is left out) until the job ends")(
      "timeout", po::value<double>()->default_value(5), "seconds to wait for node 0's answer");
  po::variables_map vm;
  if (std::optional<int> done = ParseRunDirCommand(args, "status", visible, &vm)) return *done;
  if (!vm.count("run-dir") && !vm.count("endpoint")) {
    std::cerr << "dlaunch status: missing <run-dir> (e.g. dlaunch-logs/<run-id>) or --endpoint\n"
              << visible;
    return 2;
  }
  if (vm.count("run-dir") && vm.count("endpoint")) {
    std::cerr << "dlaunch status: give <run-dir> or --endpoint, not both\n";
    return 2;
  }
  const double timeout_s = vm["timeout"].as<double>();
  if (!(timeout_s > 0) || timeout_s > 3600) {
    std::cerr << "dlaunch status: --timeout must be in (0, 3600] seconds, got " << timeout_s
              << "\n";
    return 2;
  }
  const bool watch = vm.count("watch") > 0;
  const double every_s = watch ? vm["watch"].as<double>() : 0;
  if (watch && !(every_s >= 0.1 && every_s <= 3600)) {
    std::cerr << "dlaunch status: --watch must be in [0.1, 3600] seconds, got " << every_s << "\n";
    return 2;
  }
  const bool json = vm.count("json") > 0;
  Target t;
  std::string why;
  bool finished = false;
  if (!Resolve(vm, &t, &why, &finished)) {
    std::cerr << "dlaunch status: " << why << "\n";
    return 2;
  }
  for (bool first = true;; first = false) {
    const Answer a = Ask(t.endpoint, t.token, timeout_s);
    if (!a.ok) {
      // The job may have ended meanwhile: say so rather than the lost connection.
      Target again;
      if (!t.run_dir.empty() && !a.refused && !Resolve(vm, &again, &why, &finished) && finished) {
        std::cerr << "dlaunch status: " << why << "\n";
        return watch && !first ? 0 : 2;
      }
      std::cerr << "dlaunch status: " << a.error << "\n";
      return 2;
    }
    if (int rc = Show(t, a, json, watch); rc != 0 || !watch) return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(every_s * 1000)));
  }
}

}  // namespace dlaunch::launcher
