// torchrun's flags whose values dlaunch reads its own way: --rdzv-conf's keys and
// --start-method. What torchrun accepts is accepted; what has no meaning here is said in a note.
#pragma once

#include <string>

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

}  // namespace dlaunch::launcher
