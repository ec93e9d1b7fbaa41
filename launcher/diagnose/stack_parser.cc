#include "launcher/diagnose/stack_parser.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

namespace dlaunch::launcher {
namespace {

// The main thread of eu-stack's output ("PID P - process", then "TID T:" blocks): TID == PID.
std::string EuStackMainThread(const std::string& stacks) {
  static const std::regex pid_re(R"((?:^|\n)PID ([0-9]+) - process)");
  std::smatch m;
  if (!std::regex_search(stacks, m, pid_re)) return "";
  const std::string head = "TID " + m[1].str() + ":";
  size_t at = stacks.find("\n" + head);
  if (at == std::string::npos) return "";
  ++at;
  size_t end = stacks.find("\nTID ", at + 1);
  return stacks.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The main thread's frames ("Thread 1" in gdb's output, the process's own TID in eu-stack's),
// innermost first.
std::string MainThreadStack(const std::string& stacks) {
  size_t at = stacks.rfind("\nThread 1 ");
  if (at != std::string::npos) {
    ++at;
  } else if (stacks.rfind("Thread 1 ", 0) == 0) {
    at = 0;
  } else {
    return EuStackMainThread(stacks);
  }
  size_t end = stacks.find("\n\n", at + 1);
  return stacks.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Innermost frames of the main thread, for one-line display.
std::string StackTop(const std::string& main) {
  std::istringstream in(main);
  std::string line;
  std::getline(in, line);  // "Thread 1 (...)" or "TID N:"
  // gdb: "#0  0x... in poll () from ...", "#1  main () at x.cc:3"; eu-stack: "#0  0x... poll",
  // "#3  0x..." for a frame without a symbol.
  static const std::regex frame_re(R"(^#[0-9]+\s+(?:0x[0-9a-fA-F]+(?: in)?\s*)?([^\s(]*))");
  std::vector<std::string> frames;
  while (std::getline(in, line) && !line.empty() && frames.size() < 4) {
    std::smatch m;
    if (std::regex_search(line, m, frame_re))
      frames.push_back(m[1].str().empty() ? "??" : m[1].str());
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

// The agent's line on the DataLoader workers, after the threads.
const char kWorkersLine[] = "DataLoader workers of the main thread's loader: ";

// The main thread's frames in py_stacks.txt, outermost first, as Python prints them.
std::vector<PythonFrame> PythonMainThreadFrames(const std::string& stacks) {
  static const std::regex frame_re(R"re(^\s*File "([^"]*)", line (\d+), in (.*)$)re");
  std::istringstream in(stacks);
  std::string line;
  std::vector<PythonFrame> frames;
  bool in_main = false;
  while (std::getline(in, line)) {
    if (line.rfind("Thread ", 0) == 0 || line.rfind(kWorkersLine, 0) == 0) {
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

bool IsAgentFrame(const std::string& file) {
  static const std::string kHooks = "dlaunch/_torch_hooks.py";
  return file.size() >= kHooks.size() &&
         file.compare(file.size() - kHooks.size(), kHooks.size(), kHooks) == 0;
}

// Installed packages and the standard library, as opposed to the user's own files.
bool IsLibraryFile(const std::string& file) {
  static const std::regex library(R"((/site-packages/|/dist-packages/|/lib/python[0-9.]*/))");
  return std::regex_search(file, library);
}

// "train.py:12 for b in loader: > dataloader.py:1316 _next_data" when the innermost frame is in a
// library: the innermost frame of the user's own files and the library frame that says what it
// waits for (a DataLoader's _next_data, else the innermost torch frame). "" when the innermost
// frame is the user's (its code line already says it), the user's frame is among the three
// innermost ones, or no user frame exists.
std::string UserAndLibraryFrames(const std::vector<PythonFrame>& frames) {
  if (frames.size() < 2 || !IsLibraryFile(frames.back().file)) return "";
  size_t user = frames.size();
  for (size_t i = frames.size(); i-- > 0;) {
    if (!IsLibraryFile(frames[i].file)) {
      user = i;
      break;
    }
  }
  // Within the innermost frames shown anyway: nothing to add.
  if (user == frames.size() || user + 3 >= frames.size()) return "";
  const PythonFrame* explain = nullptr;
  for (size_t i = frames.size(); i-- > user + 1;) {
    const PythonFrame& f = frames[i];
    if (f.file.find("/torch/utils/data/") != std::string::npos && f.func == "_next_data") {
      explain = &f;
      break;
    }
    if (!explain && f.file.find("/torch/") != std::string::npos) explain = &f;
  }
  const PythonFrame& u = frames[user];
  std::string out = BaseName(u.file) + ":" + u.line + " " + (u.code.empty() ? u.func : u.code);
  if (explain) out += " > " + BaseName(explain->file) + ":" + explain->line + " " + explain->func;
  return out;
}

// "waits for DataLoader worker 0 (pid 4242, S (sleeping)) at data.py:52 __getitem__": the worker
// the main thread's loader waits for, from the agent's workers line, and the innermost frame of
// the user's own files in that worker's faulthandler stacks (most recent call first), else its
// innermost frame. "" without a workers line that names a waited-for worker.
std::string WaitedWorker(const std::string& stacks) {
  const size_t at = stacks.find(std::string("\n") + kWorkersLine);
  if (at == std::string::npos) return "";
  std::istringstream in(stacks.substr(at + 1));
  std::string summary;
  std::getline(in, summary);
  static const std::regex waits_re(R"(; it waits for worker (\d+) )");
  std::smatch m;
  if (!std::regex_search(summary, m, waits_re)) return "";
  const std::string id = m[1].str();
  const std::regex worker_re("worker " + id + R"( \((pid [^,]*, [^)]*\)?)\))");
  std::string out = "waits for DataLoader worker " + id;
  if (std::regex_search(summary, m, worker_re)) out += " (" + m[1].str() + ")";
  static const std::regex frame_re(R"re(^\s*File "([^"]*)", line (\d+) in (.*)$)re");
  // The thread that ran the signal handler (faulthandler's "Current thread", the worker's main
  // one), else the first; innermost frame first.
  std::string line;
  std::vector<PythonFrame> frames, current;
  bool in_worker = false, in_current = false;
  int blocks = 0;
  while (std::getline(in, line)) {
    if (line.rfind("Worker " + id + " ", 0) == 0) {
      in_worker = true;
    } else if (!in_worker) {
      continue;
    } else if (line.rfind("Current thread ", 0) == 0 || line.rfind("Thread ", 0) == 0) {
      in_current = line[0] == 'C';
      ++blocks;
    } else if (std::regex_search(line, m, frame_re)) {
      if (in_current || blocks <= 1) {
        (in_current ? current : frames).push_back({m[1].str(), m[2].str(), m[3].str(), ""});
      }
    } else if (!line.empty()) {
      break;  // past the worker's stacks
    }
  }
  if (!current.empty()) frames = current;
  if (frames.empty()) return out + ", whose stacks did not come";
  const PythonFrame* pick = &frames.front();
  for (const PythonFrame& f : frames) {
    if (!IsLibraryFile(f.file)) {
      pick = &f;
      break;
    }
  }
  return out + " at " + BaseName(pick->file) + ":" + pick->line + " " + pick->func;
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
  std::vector<PythonFrame> frames = PythonMainThreadFrames(stacks);
  // The agent's wrapper around each collective is no part of the user's program.
  frames.erase(std::remove_if(frames.begin(), frames.end(),
                              [](const PythonFrame& f) { return IsAgentFrame(f.file); }),
               frames.end());
  if (frames.empty()) return out;
  out.activity = ClassifyPython(frames.back());
  // Waiting deep inside a library (selectors.py poll < connection.py wait < ... for a stalled
  // DataLoader): the innermost frames alone do not say why. The user's own frame that called into
  // the library and the library frame that explains the wait come first.
  const std::string lead = UserAndLibraryFrames(frames);
  if (!lead.empty()) out.top = lead + "; innermost: ";
  std::string inner;
  if (!frames.back().code.empty()) inner = frames.back().code;
  for (size_t i = 0; i < 3 && i < frames.size(); ++i) {
    const PythonFrame& f = frames[frames.size() - 1 - i];
    inner += (inner.empty() ? "" : " < ") + BaseName(f.file) + ":" + f.line + " " + f.func;
  }
  out.top += inner;
  const std::string worker = WaitedWorker(stacks);
  if (!worker.empty()) out.top += "; " + worker;
  return out;
}

}  // namespace dlaunch::launcher
