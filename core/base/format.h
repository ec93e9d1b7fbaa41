// Text for people: byte counts, durations, rank lists, times and signal names, written the same
// way by every part of dlaunch; and hex strings for tokens and ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::base {

std::string FormatHex(const unsigned char* bytes, size_t n);  // lowercase, two digits a byte
std::string RandomHex(size_t bytes);  // `bytes` from std::random_device, as FormatHex writes them

enum class ByteStyle {
  kCompact,     // "512 B", "4 MiB", "1.5 GiB": whole numbers where they are exact
  kOneDecimal,  // "512 B", "12 KiB", "64.0 MiB", "1.5 GiB": a fixed decimal from MiB on
};
// "?" for a negative count (unknown).
std::string FormatBytes(int64_t bytes, ByteStyle style = ByteStyle::kCompact);

std::string FormatDurationMs(int64_t ms);  // "310 s", "2.5 s", "40 ms"; "?" when negative
// Sorted, duplicates dropped, runs of three or more folded: "0,1,3" or "0-5,7".
std::string FormatRankList(std::vector<int> ranks);
// "rank 3" or "ranks 0-5,7": FormatRankList with its noun, singular for one distinct rank.
std::string NameRanks(std::vector<int> ranks);
// In the given order, every value: "3,1,2". For messages that list what was asked for.
std::string JoinInts(const std::vector<int>& values, std::string_view separator = ",");
std::string FormatUnixMs(int64_t unix_ms);  // "2026-11-29 21:03:04 UTC"; "?" when <= 0

// "SIGKILL" for 9; "signal 64" for a number it does not know.
std::string SignalName(int signal);
// 9 for "SIGKILL", "KILL" or "9"; 0 when it names no signal.
int SignalNumber(std::string_view name);

}  // namespace dlaunch::base
