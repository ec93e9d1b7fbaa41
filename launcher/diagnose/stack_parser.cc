#include "launcher/diagnose/stack_parser.h"

#include <regex>
#include <sstream>
#include <vector>

namespace dlaunch::launcher {
namespace {

// The main thread's frames ("Thread 1" in gdb's output), innermost first.
std::string MainThreadStack(const std::string& stacks) {
  size_t at = stacks.rfind("\nThread 1 ");
  if (at != std::string::npos) {
    ++at;
  } else if (stacks.rfind("Thread 1 ", 0) == 0) {
    at = 0;
  } else {
    return "";
  }
  size_t end = stacks.find("\n\n", at + 1);
  return stacks.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Innermost frames of the main thread, for one-line display.
std::string StackTop(const std::string& main) {
  std::istringstream in(main);
  std::string line;
  std::getline(in, line);  // "Thread 1 (...)"
  static const std::regex frame_re(R"(^#[0-9]+\s+(?:0x[0-9a-fA-F]+ in )?([^\s(]+))");
  std::vector<std::string> frames;
  while (std::getline(in, line) && !line.empty() && frames.size() < 4) {
    std::smatch m;
    if (std::regex_search(line, m, frame_re)) frames.push_back(m[1].str());
  }
  std::string out;
  for (const std::string& f : frames) out += (out.empty() ? "" : " < ") + f;
  return out;
}

StackActivity Classify(const std::string& main) {
  static const std::regex comm(
      "gloo|nccl|c10d|ProcessGroup|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|"
      "MPI_|cudaStreamSynchronize|cudaDeviceSynchronize|Work::Wait",
      std::regex::icase);
  if (std::regex_search(main, comm)) return StackActivity::kCollective;
  static const std::regex sleep_re("nanosleep|pysleep|time_sleep|usleep|\\bsleep",
                                   std::regex::icase);
  static const std::regex wait_re(
      "\\b(__GI___libc_)?(read|recv|recvfrom|recvmsg|poll|ppoll|select|epoll_wait|accept|"
      "futex_wait|__futex_abstimed_wait|pthread_cond_(timed)?wait|sem_wait|pause|sigwait)",
      std::regex::icase);
  // Only the innermost frames decide: everything is called from main().
  std::istringstream in(main);
  std::string line, top;
  std::getline(in, line);
  for (int i = 0; i < 3 && std::getline(in, line); ++i) top += line + "\n";
  if (std::regex_search(top, sleep_re)) return StackActivity::kSleep;
  if (std::regex_search(top, wait_re)) return StackActivity::kWait;
  return StackActivity::kRun;
}

// One frame of Python's traceback.format_stack: `  File "PATH", line N, in FUNC` and the source
// line below it.
struct PythonFrame {
  std::string file, line, func, code;
};

// The main thread's frames in py_stacks.txt, outermost first, as Python prints them.
std::vector<PythonFrame> PythonMainThreadFrames(const std::string& stacks) {
  static const std::regex frame_re(R"re(^\s*File "([^"]*)", line (\d+), in (.*)$)re");
  std::istringstream in(stacks);
  std::string line;
  std::vector<PythonFrame> frames;
  bool in_main = false;
  while (std::getline(in, line)) {
    if (line.rfind("Thread ", 0) == 0) {
      if (in_main) break;  // the main thread's block ended
      in_main = line.find(" (main) ") != std::string::npos;
      continue;
    }
    if (!in_main) continue;
    std::smatch m;
    if (std::regex_search(line, m, frame_re)) {
      frames.push_back({m[1].str(), m[2].str(), m[3].str(), ""});
    } else if (!frames.empty() && frames.back().code.empty()) {
      const size_t start = line.find_first_not_of(' ');
      if (start != std::string::npos) frames.back().code = line.substr(start);
    }
  }
  return frames;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

StackActivity ClassifyPython(const PythonFrame& innermost) {
  const std::string text = innermost.file + " " + innermost.func + " " + innermost.code;
  static const std::regex comm(
      "torch/distributed/|c10d|all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|"
      "\\bsynchronize\\(",
      std::regex::icase);
  if (std::regex_search(text, comm)) return StackActivity::kCollective;
  static const std::regex sleep_re("\\bsleep\\(");
  if (std::regex_search(innermost.code, sleep_re)) return StackActivity::kSleep;
  static const std::regex wait_re(
      "\\.(wait|join|acquire|get|recv|read|readline|accept|select|poll)\\(|\\bselect\\(|"
      "\\binput\\(");
  if (std::regex_search(innermost.code, wait_re)) return StackActivity::kWait;
  return StackActivity::kRun;
}

}  // namespace

const char* StackActivityName(StackActivity activity) {
  switch (activity) {
    case StackActivity::kNone:
      return "";
    case StackActivity::kCollective:
      return "collective";
    case StackActivity::kWait:
      return "wait";
    case StackActivity::kSleep:
      return "sleep";
    case StackActivity::kRun:
      return "run";
  }
  return "";
}

StackSummary ParseGdbStacks(const std::string& stacks) {
  StackSummary out;
  const std::string main = MainThreadStack(stacks);
  out.top = StackTop(main);
  if (!main.empty()) out.activity = Classify(main);
  return out;
}

StackSummary ParsePythonStacks(const std::string& stacks) {
  StackSummary out;
  const std::vector<PythonFrame> frames = PythonMainThreadFrames(stacks);
  if (frames.empty()) return out;
  out.activity = ClassifyPython(frames.back());
  if (!frames.back().code.empty()) out.top = frames.back().code;
  for (size_t i = 0; i < 3 && i < frames.size(); ++i) {
    const PythonFrame& f = frames[frames.size() - 1 - i];
    out.top += (out.top.empty() ? "" : " < ") + BaseName(f.file) + ":" + f.line + " " + f.func;
  }
  return out;
}

}  // namespace dlaunch::launcher
