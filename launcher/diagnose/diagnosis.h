// The answer to "which rank is stuck, in which collective, doing what?" (or "why did it die?"),
// shared by the live hang monitor and `dlaunch diagnose`: diagnosis.json's struct, which
// core/run_dir owns with the file.
#pragma once

#include "core/run_dir/diagnosis_file.h"

namespace dlaunch::launcher {

using rundir::Diagnosis;

// The first line of torchrun's "Root Cause" block among a failure diagnosis' details; the lines
// of the block after it are indented.
inline constexpr char kRootCauseHeading[] = "Root Cause (first observed failure):";
using rundir::DiagnosisKind;
using rundir::DiagnosisKindName;
using rundir::RankDiagnosis;

}  // namespace dlaunch::launcher
