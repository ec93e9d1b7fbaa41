// torchrun's flags whose values dlaunch reads its own way (--rdzv-conf's keys, --start-method,
// -r/-t, ...), and those it refuses. What torchrun accepts is accepted with torchrun's meaning,
// or with a note where it has none here; what dlaunch cannot do is refused, saying why. Each
// returns a value: the command line's parsers (options.h) put it into the options.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::launcher {

// torchrun's -r/--redirects or -t/--tee value: "3" for every local rank, or "0:1,1:2" per local
// rank (the others 0); the bits are 1 stdout, 2 stderr.
struct StdStreams {
  int all = 0;
  std::map<int, int> by_local_rank;
  int For(int local_rank) const {
    if (by_local_rank.empty()) return all;
    auto it = by_local_rank.find(local_rank);
    return it == by_local_rank.end() ? 0 : it->second;
  }
};

// What torchrun's --rdzv-conf sets: the timeouts it names (unset: the options' own), and a note
// for each of torchrun's keys without a counterpart here, saying why it does nothing.
struct RdzvConf {
  std::optional<std::chrono::milliseconds> join_timeout;
  std::optional<std::chrono::milliseconds> last_call_timeout;
  std::optional<std::chrono::milliseconds> close_timeout;
  std::vector<std::string> notes;
};

// torchrun's --rdzv-conf: comma-separated key=value pairs, the timeouts in seconds. `timeout` (or
// `join_timeout`), `last_call_timeout` and `close_timeout` are read; torchrun's keys without a
// counterpart here (read_timeout, is_host, keep_alive_interval, ...) give a note. Throws
// UsageError for any other key or a bad value. Pure.
RdzvConf ParseRdzvConf(const std::string& text);

// torchrun's --start-method: spawn, fork or forkserver. dlaunch always starts each rank as a fresh
// program, as spawn does: fork and forkserver give a note saying so (spawn none). Throws
// UsageError. Pure.
std::optional<std::string> ParseStartMethod(const std::string& method);

// torchrun's -r/--redirects and -t/--tee value (`flag` names it in errors): "0" to "3" for every
// local rank, or "LOCAL:N,..." per local rank. Throws UsageError. Pure.
StdStreams ParseStdStreams(const std::string& text, const std::string& flag);

// torchrun's --duplicate-std{out,err}-filters: comma-separated strings, ",," a comma inside one;
// empty ones are dropped (an empty list duplicates nothing). Pure.
std::vector<std::string> ParseFilterList(const std::string& text);

// torchrun's --event-log-handler: null and dynamic_rendezvous (torchrun's no-op handlers) are
// accepted; console is refused, pointing at --events-file; anything else is refused, as torchrun
// does. Throws UsageError. Pure.
void CheckEventLogHandler(const std::string& name);

// Why dlaunch refuses torchrun's flag `name` (either spelling, without the dashes: "logs_specs"),
// or nullptr when it does not refuse it.
const char* RefusedTorchrunFlag(const std::string& name);

}  // namespace dlaunch::launcher
