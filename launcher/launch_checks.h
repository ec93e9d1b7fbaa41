// Checks of a launch's input that go beyond one flag's value: the rendezvous endpoint's syntax
// and its host's name, the run id as a folder name, the program's name and its "#!" interpreter,
// the token file. Each throws UsageError with one line saying what is wrong, so that bad input
// ends dlaunch with exit code 2 before any rank starts and before the run directory exists.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlaunch::launcher {

// "host:port" or "[v6]:port" -> {host without brackets, port}. The host is a name (letters,
// digits, '.', '-', '_') or an IPv4 address, or an IPv6 address in brackets (a bare one is
// refused: its colons cannot be told from the port's); the port is 1 to 65535. Throws UsageError
// naming `flag` and what is wrong. Pure.
std::pair<std::string, int> SplitEndpoint(const std::string& endpoint,
                                          const std::string& flag = "--rdzv-endpoint");

// "host:port" of `host` and `port`, an IPv6 address in brackets (as SplitEndpoint reads it back).
// Pure.
std::string JoinEndpoint(const std::string& host, const std::string& port);

// Looks `host` up once, as the join will (getaddrinfo). Throws UsageError "cannot resolve host"
// when the name does not exist; a temporary failure (no DNS server answering yet) is not an
// error, since the join retries until its timeout: it adds a note to `notes` instead. Blocks for
// the lookup.
void CheckHostResolves(const std::string& host, const std::string& flag,
                       std::vector<std::string>* notes);

// --run-id (and --rdzv-id) as the run directory's name: one plain folder name, not "." or "..",
// without '/', at most 255 bytes; "" means a generated one. Throws UsageError. Pure.
void CheckRunId(const std::string& run_id);

// The first word after dlaunch's options: a program (or with -m, a module) must have a name.
// Throws UsageError. Pure.
void CheckProgramName(const std::string& name, bool module);

// A "#!" line's interpreter and, for "#!/usr/bin/env NAME" (or env -S), the NAME env looks up
// in PATH ("" for another interpreter).
struct Shebang {
  std::string interpreter;
  std::string env_name;
};
// The #! of `first_line` (the file's first line, without its '\n'); nullopt when it has none.
// Pure.
std::optional<Shebang> ParseShebang(const std::string& first_line);

// For an executable `program` that starts with "#!": the interpreter named there must exist and
// be executable, and env's NAME must be found in PATH, else execve fails in every rank after the
// run directory exists. Throws UsageError naming the program and the interpreter. Blocks for
// reading the file's first line.
void CheckShebang(const std::string& program);

// --token-file must be a readable file wherever it is given (on one node too, where the job
// needs no token: a wrong path is still a mistake). Throws UsageError ("is a directory", or why
// it cannot be read). Blocks for an open.
void CheckTokenFile(const std::string& path);

// Finds `program` as execvp would (PATH lookup when it has no '/'). Throws UsageError when it is
// missing or not executable, or is a script whose #! interpreter is. Blocks for reading the
// file's first bytes.
std::string ResolveProgram(const std::string& program);

}  // namespace dlaunch::launcher
