// Lays a Diagnosis out for people (console, diagnosis.txt); diagnosis.json is core/run_dir's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "launcher/diagnose/diagnosis.h"

namespace dlaunch::launcher {

// One straggler verdict for diagnosis.txt: its text and the steps it spanned ("... (from step
// 27, still on)"). Does not block.
std::string StragglerLine(const rundir::StragglerVerdict& verdict);

// Multi-line text: headline, per-rank lines, details, the job's stragglers, problems. Does not
// block.
std::string FormatDiagnosis(const Diagnosis& diagnosis);
// The same without its torchrun-style "Root Cause (first observed failure)" block: for the console
// after a rank failure, where the launcher has just printed that block for the same rank.
std::string FormatDiagnosisAfterRootCause(Diagnosis diagnosis);
using rundir::DiagnosisToJson;

// Writes <run_dir>/diagnosis.txt and diagnosis.json, each atomically (rundir::WriteDiagnosis).
// Blocks on file I/O only; throws Error(kInternal) naming the path when a file cannot be written.
void WriteDiagnosisFiles(const Diagnosis& diagnosis, const std::string& run_dir);

}  // namespace dlaunch::launcher
