// A bounded reader of Python pickles that hold plain data only — dicts, lists, tuples, strings,
// bytes, ints, floats, None, bools; protocols 2 to 5 — such as PyTorch's flight-recorder dumps
// (torch's C++ pickler writes protocol 2; Python's pickle.dump writes 4 or 5). It never runs or
// names anything: an opcode that would (GLOBAL, REDUCE, BUILD, PERSID...) is an error. Memory is
// bounded by the input size and the limits below, also for hostile input (memo references that
// build an exponential or cyclic structure, deep nesting).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dlaunch::launcher::python {

struct PickleLimits {
  size_t max_depth = 64;                 // nesting of containers in the result
  size_t max_values = 4u << 20;          // values in the result (memo references count each time)
  size_t max_string_bytes = 256u << 20;  // all strings of the result together
};

// The pickle's object as JSON: tuples become arrays, dict keys that are ints become their decimal
// text, bytes and strings become strings (invalid UTF-8 replaced by U+FFFD). nullopt with `error`
// set ("unsupported opcode 0x63 ('c') at offset 2: only plain data is read", "truncated at
// offset 10") otherwise. Never throws.
std::optional<nlohmann::json> ReadPickle(std::string_view bytes, std::string* error,
                                         const PickleLimits& limits = {});

}  // namespace dlaunch::launcher::python
