// Pure parsers for the text files Probe reads (/proc/driver/nvidia/version, /proc/meminfo,
// /proc/cpuinfo, /etc/os-release), kept apart so tests run them on fixture files. All are pure
// except ReadSmallTextFile; none blocks beyond a local file read.
#pragma once

#include <cstdint>
#include <string>

namespace dlaunch::launcher {

// The kernel module version from /proc/driver/nvidia/version ("535.104.05"), for both the
// proprietary ("Kernel Module  535.104.05") and the open ("Open Kernel Module for x86_64
// 550.54.14") modules; "" when the text names none.
std::string ParseNvidiaDriverVersion(const std::string& proc_text);

// MemTotal and MemAvailable in bytes; false when MemTotal is missing.
bool ParseMemInfo(const std::string& text, uint64_t* total_bytes, uint64_t* available_bytes);

// The first "model name" and the number of "processor" entries.
void ParseCpuInfo(const std::string& text, std::string* model, int* count);

// PRETTY_NAME without quotes; "" when absent.
std::string ParseOsRelease(const std::string& text);

// Reads a whole (small) file; false when it cannot be opened. Does not block beyond the read.
bool ReadSmallTextFile(const std::string& path, std::string* text);

// "24.0 GiB", "64.0 MiB", "512 KiB", "100 B".
std::string FormatByteCount(uint64_t bytes);

}  // namespace dlaunch::launcher
