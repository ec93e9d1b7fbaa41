// torchrun's flags whose values dlaunch reads its own way (--rdzv-conf's keys, --start-method,
// -r/-t, ...), and those it refuses. What torchrun accepts is accepted with torchrun's meaning,
// or with a note where it has none here; what dlaunch cannot do is refused, saying why.
#pragma once

#include <string>
#include <vector>

#include "launcher/options.h"

namespace dlaunch::launcher {

// torchrun's --rdzv-conf: comma-separated key=value pairs, the timeouts in seconds. `timeout` (or
// `join_timeout`), `last_call_timeout` and `close_timeout` set `o`'s; torchrun's keys without a
// counterpart here (read_timeout, is_host, keep_alive_interval, ...) add a note to o->notes saying
// why they do nothing. Throws UsageError for any other key or a bad value. Pure.
void ParseRdzvConf(const std::string& text, LaunchOptions* o);

// torchrun's --start-method: spawn, fork or forkserver. dlaunch always starts each rank as a fresh
// program, as spawn does: fork and forkserver add a note saying so. Throws UsageError. Pure.
void ParseStartMethod(const std::string& method, LaunchOptions* o);

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
