#include "launcher/doctor/python_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace dlaunch::launcher {
namespace {

constexpr size_t kMaxCapture = 1 << 20;

// Prints one JSON line; every torch question is asked separately, so a CPU-only build or a
// missing NCCL still answers the rest.
constexpr const char* kProbeScript = R"PY(
import json, sys
out = {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3]}
try:
    import torch
    out["torch"] = True
    out["torch_version"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda or ""
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["cuda_devices"] = torch.cuda.device_count() if out["cuda_available"] else 0
    except Exception:
        pass
    try:
        v = torch.cuda.nccl.version()
        if isinstance(v, tuple):
            v = v[0] * (10000 if tuple(v[:2]) >= (2, 9) else 1000) + v[1] * 100 + v[2]
        out["nccl_version"] = int(v)
    except Exception:
        pass
    try:
        out["cudnn_version"] = int(torch.backends.cudnn.version() or 0)
    except Exception:
        pass
    try:
        import torch.distributed as dist
        out["distributed"] = bool(dist.is_available())
        out["gloo"] = bool(dist.is_gloo_available())
        out["nccl"] = bool(dist.is_nccl_available())
    except Exception:
        pass
except Exception as e:
    out["torch"] = False
    out["error"] = "%s: %s" % (type(e).__name__, e)
print("DLAUNCH_PROBE " + json.dumps(out))
)PY";

}  // namespace

CapturedRun RunCaptured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CapturedRun run;
  if (argv.empty()) return run;
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return run;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    run.out = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
    return run;
  }
  run.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (run.out.size() < kMaxCapture) run.out.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!run.timed_out && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

PythonFacts ProbePython(const std::string& interpreter, const std::string& source,
                        std::chrono::milliseconds timeout) {
  PythonFacts facts;
  facts.interpreter = interpreter;
  facts.source = source;
  // -I: the user's PYTHONPATH and site dirs can shadow torch for the ranks too, but -I would
  // hide them; the probe runs as the ranks will, in this environment.
  CapturedRun run = RunCaptured({interpreter, "-c", kProbeScript}, timeout);
  if (!run.started) {
    facts.error = run.out.empty() ? "cannot run " + interpreter : run.out;
    return facts;
  }
  if (run.timed_out) {
    facts.error =
        interpreter + " did not answer within " + std::to_string(timeout.count() / 1000) + " s";
    return facts;
  }
  const size_t at = run.out.rfind("DLAUNCH_PROBE ");
  if (at == std::string::npos) {
    std::string text = run.out.substr(0, 400);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    facts.error = interpreter + " exited with code " + std::to_string(run.exit_code) +
                  (text.empty() ? "" : ": " + text);
    return facts;
  }
  const size_t end = run.out.find('\n', at);
  auto j = nlohmann::json::parse(
      run.out.substr(at + 14, end == std::string::npos ? end : end - at - 14), nullptr, false);
  if (!j.is_object()) {
    facts.error = interpreter + " answered the probe with something that is not JSON";
    return facts;
  }
  j["interpreter"] = interpreter;
  j["source"] = source;
  j["runs"] = true;
  facts = j.get<PythonFacts>();
  return facts;
}

bool PythonHasModule(const std::string& interpreter, const std::string& module) {
  CapturedRun run = RunCaptured(
      {interpreter, "-c",
       "import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)",
       module},
      std::chrono::seconds(30));
  return run.exit_code == 0;
}

}  // namespace dlaunch::launcher
