// A bounded reader of Python pickles that hold plain data only — dicts, lists, tuples, strings,
// bytes, ints, floats, None, bools; protocols 2 to 5 — such as PyTorch's flight-recorder dumps
// (torch's C++ pickler writes protocol 2; Python's pickle.dump writes 4 or 5). It never runs or
// names anything: an opcode that would (GLOBAL, REDUCE, BUILD, PERSID...) is an error. Memory and
// time are bounded by the limits below, also for hostile input (millions of tiny objects, memo
// references that build an exponential or cyclic structure, deep nesting, huge strings): what the
// reader allocates is counted as it goes, and it stops at the limit, not after.
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dlaunch::launcher::python {

struct PickleLimits {
  size_t max_depth = 64;                // nesting of containers in the result
  size_t max_values = 4u << 20;         // values in the result (memo references count each time)
  size_t max_string_bytes = 64u << 20;  // all strings of the result together
  // What reading may allocate: the objects, the stack, the marks, the memo and the JSON result
  // together, as counted by the reader (within a few percent of the heap it uses).
  size_t max_memory_bytes = 128u << 20;
  // Reading stops with an error once this passes (checked every few thousand opcodes and values).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// What one read cost, also when it failed.
struct PickleUsage {
  size_t peak_memory_bytes = 0;  // the most the reader's count reached
  size_t opcodes = 0;
  bool out_of_time = false;    // stopped at the deadline
  bool out_of_memory = false;  // stopped at max_memory_bytes (or the heap ran out)
};

// The pickle's object as JSON: tuples become arrays, dict keys that are ints become their decimal
// text, bytes and strings become strings (invalid UTF-8 replaced by U+FFFD). nullopt with `error`
// set ("unsupported opcode 0x63 ('c') at offset 2: only plain data is read", "truncated at
// offset 10", "needs more than 128 MiB to read") otherwise. Never throws; `usage` may be null.
std::optional<nlohmann::json> ReadPickle(std::string_view bytes, std::string* error,
                                         const PickleLimits& limits = {},
                                         PickleUsage* usage = nullptr);

}  // namespace dlaunch::launcher::python
