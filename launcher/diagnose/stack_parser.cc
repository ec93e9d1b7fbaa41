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

}  // namespace dlaunch::launcher
