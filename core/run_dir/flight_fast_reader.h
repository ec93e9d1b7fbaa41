// A fast path for rank<R>/flight.json (simdjson's DOM parser), for directories of thousands of
// ranks: the nlohmann DOM costs ~20 ms per 2,000-entry dump. It reads exactly what ReadFlight's
// nlohmann path reads from a well-formed file, and declines anything else (invalid JSON, a foreign
// or newer schema, no entries array, more than kMaxFlightEntries entries) so that the nlohmann
// path words the problem as it always has.
#pragma once

#include <string>

#include "core/run_dir/flight_file.h"

namespace dlaunch::rundir::detail {

// True when `text` was read into `out`; false when the caller must read it another way (`out` is
// then unspecified). Converts only the entries that may be among the newest `max_entries` by seq
// (ties may leave a few more: the caller trims). Never throws; one parser per thread, reused.
// Blocks for the parse only (~1 ms per 2,000 entries).
bool ReadFlightFast(const std::string& text, size_t max_entries, FlightDump* out);

}  // namespace dlaunch::rundir::detail
