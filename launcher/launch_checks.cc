#include "launcher/launch_checks.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/files.h"
#include "core/error.h"

namespace dlaunch::launcher {
namespace {

// What a host name may hold (RFC 1123, and '_' which some clusters' names have).
constexpr const char* kHostNameChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";

bool IsIpv6(const std::string& text) {
  in6_addr addr{};
  return ::inet_pton(AF_INET6, text.c_str(), &addr) == 1;
}

// 1 to 65535 in decimal digits only ("+5", " 5" and "5x" are not ports); 0 when not.
int ParsePort(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  const int port = std::stoi(text);
  return port <= 65535 ? port : 0;
}

// The host part of an endpoint without brackets; `port` gets the text after its ':'. Throws
// `bad(why)`.
template <typename Bad>
std::string SplitHost(const std::string& endpoint, std::string* port, const Bad& bad) {
  if (!endpoint.empty() && endpoint[0] == '[') {
    const size_t close = endpoint.find(']');
    if (close == std::string::npos) throw bad("the '[' of an IPv6 address has no ']'");
    const std::string host = endpoint.substr(1, close - 1);
    if (!IsIpv6(host)) throw bad("'" + host + "' in brackets is not an IPv6 address");
    if (endpoint.compare(close + 1, 1, ":") != 0) {
      throw bad("a ':' and the port must follow the ']' (as in [::1]:29400)");
    }
    *port = endpoint.substr(close + 2);
    return host;
  }
  const size_t colon = endpoint.find(':');
  if (colon == std::string::npos) throw bad("no ':' and port (as in " + endpoint + ":29400)");
  const size_t last = endpoint.rfind(':');
  if (last != colon) {
    const std::string head = endpoint.substr(0, last);
    if (IsIpv6(head)) {
      throw bad("an IPv6 address needs brackets: [" + head + "]" + endpoint.substr(last));
    }
    throw bad("more than one ':' (an IPv6 address goes in brackets, as in [::1]:29400)");
  }
  const std::string host = endpoint.substr(0, colon);
  if (host.empty()) throw bad("the host is empty");
  if (const size_t c = host.find_first_not_of(kHostNameChars); c != std::string::npos) {
    throw bad("'" + host + "' is not a host name (it holds '" + host[c] + "')");
  }
  *port = endpoint.substr(colon + 1);
  return host;
}

// The program env runs for `args`, the text after "#!/usr/bin/env" (one argument to the kernel):
// a single word, or with -S the first word that is neither an option nor VAR=VALUE. "" when
// that cannot be told without env's own parsing (other options, words without -S).
std::string EnvProgram(const std::string& args) {
  std::istringstream in(args);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return "";
  if (words[0] == "-S" || words[0] == "--split-string") {
    words.erase(words.begin());
  } else if (words[0].rfind("-S", 0) == 0) {
    words[0] = words[0].substr(2);
  } else {
    return words.size() == 1 && words[0][0] != '-' ? words[0] : "";
  }
  for (const std::string& w : words) {
    if (w[0] == '-') return "";  // -u NAME, -C DIR, -P PATH...: left to env
    if (w.find('=') == std::string::npos) return w;
  }
  return "";
}

}  // namespace

std::pair<std::string, int> SplitEndpoint(const std::string& endpoint, const std::string& flag) {
  auto bad = [&](const std::string& why) {
    return UsageError(flag + " '" + endpoint + "' is not host:port: " + why);
  };
  std::string port_text;
  std::string host = SplitHost(endpoint, &port_text, bad);
  const int port = ParsePort(port_text);
  if (port == 0) throw bad("the port must be a number from 1 to 65535 (got '" + port_text + "')");
  return {std::move(host), port};
}

std::string JoinEndpoint(const std::string& host, const std::string& port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
}

void CheckHostResolves(const std::string& host, const std::string& flag,
                       std::vector<std::string>* notes) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc == 0) {
    ::freeaddrinfo(found);
    return;
  }
  // No DNS server answering is often a moment's state (a cluster's DNS starting with the job):
  // the join's retries may outlast it. A name that does not exist never will.
  if (rc == EAI_AGAIN || (rc == EAI_SYSTEM && errno == EINTR)) {
    notes->push_back(flag + ": cannot resolve host '" + host + "' yet (" + ::gai_strerror(rc) +
                     "); the join retries until its timeout");
    return;
  }
  throw UsageError(flag + ": cannot resolve host '" + host + "' (" + ::gai_strerror(rc) + ")");
}

void CheckRunId(const std::string& run_id) {
  if (run_id.empty()) return;
  const std::string quoted = "--run-id '" + run_id + "'";
  if (run_id == "." || run_id == "..") {
    throw UsageError(quoted +
                     " is not a folder name of its own: '.' and '..' name the log directory or "
                     "its parent (give a name such as job1)");
  }
  if (run_id.find('/') != std::string::npos) {
    throw UsageError(quoted + " holds a '/': the run id is one folder name inside --log-dir");
  }
  for (char c : run_id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw UsageError("--run-id holds a control character: give a plain folder name");
    }
  }
  if (run_id.size() > 255) {
    throw UsageError("--run-id is " + std::to_string(run_id.size()) +
                     " bytes long; a folder name has at most 255");
  }
}

void CheckProgramName(const std::string& name, bool module) {
  if (!name.empty()) return;
  throw UsageError(module ? "-m needs a module name, and got an empty one ('')"
                          : "the program name is empty ('' where dlaunch [options] PROGRAM "
                            "[ARGS...] takes the program)");
}

std::optional<Shebang> ParseShebang(const std::string& first_line) {
  if (first_line.rfind("#!", 0) != 0) return std::nullopt;
  // As the kernel reads it: the interpreter up to a blank, the rest one argument.
  Shebang s;
  const size_t start = first_line.find_first_not_of(" \t", 2);
  if (start == std::string::npos) return s;
  const size_t end = std::min(first_line.find_first_of(" \t", start), first_line.size());
  s.interpreter = first_line.substr(start, end - start);
  const size_t slash = s.interpreter.rfind('/');
  const std::string base =
      slash == std::string::npos ? s.interpreter : s.interpreter.substr(slash + 1);
  if (base == "env") s.env_name = EnvProgram(first_line.substr(end));
  return s;
}

void CheckShebang(const std::string& program) {
  char head[256];  // the kernel reads at most this much of a #! line
  std::ifstream in(program, std::ios::binary);
  in.read(head, sizeof(head));
  const std::string text(head, static_cast<size_t>(in.gcount()));
  const std::optional<Shebang> s = ParseShebang(text.substr(0, text.find('\n')));
  if (!s) return;
  const std::string what = "program '" + program + "'";
  if (s->interpreter.empty()) throw UsageError(what + " has a #! line naming no interpreter");
  if (s->interpreter.back() == '\r') {
    throw UsageError(what +
                     " has Windows line endings: its #! interpreter ends in '\\r' (convert " +
                     "it with dos2unix)");
  }
  const std::string named = what + ": its #! interpreter '" + s->interpreter + "'";
  struct stat st {};
  if (::stat(s->interpreter.c_str(), &st) != 0) throw UsageError(named + " does not exist");
  if (S_ISDIR(st.st_mode)) throw UsageError(named + " is a directory");
  if (::access(s->interpreter.c_str(), X_OK) != 0) throw UsageError(named + " is not executable");
  if (!s->env_name.empty() && base::FindExecutable(s->env_name).empty()) {
    throw UsageError(what + ": its #! line runs '" + s->env_name + "' through " + s->interpreter +
                     ", and no executable '" + s->env_name + "' is in PATH");
  }
}

void CheckTokenFile(const std::string& path) {
  const std::string what = "--token-file '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw UsageError("cannot read " + what + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    throw UsageError(what + " is a directory, not a file holding the job token");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot read " + what + ": " + std::strerror(errno));
  ::close(fd);
}

std::string ResolveProgram(const std::string& program) {
  auto check = [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) throw UsageError("program '" + path + "' is a directory");
    if (::access(path.c_str(), X_OK) != 0) {
      throw UsageError("program '" + path +
                       "' is not executable (chmod +x, or run it with an "
                       "interpreter: dlaunch ... -- python3 " +
                       path + ")");
    }
    // execve would fail with ENOEXEC after the run directory exists: neither ELF nor "#!".
    char head[4] = {};
    std::ifstream(path, std::ios::binary).read(head, sizeof(head));
    if (std::string(head, 4) !=
            "\x7f"
            "ELF" &&
        std::string(head, 2) != "#!") {
      throw UsageError("program '" + path + "' is neither a binary nor a script with a #! line");
    }
    CheckShebang(path);  // a missing interpreter fails execve in every rank, after the start
    return true;
  };
  if (program.find('/') != std::string::npos) {
    if (!check(program)) throw UsageError("program '" + program + "' does not exist");
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), F_OK) == 0 && check(candidate)) return candidate;
    start = end + 1;
  }
  throw UsageError("program '" + program + "' not found in PATH");
}

}  // namespace dlaunch::launcher
