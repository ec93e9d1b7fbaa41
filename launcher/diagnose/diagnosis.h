// The answer to "which rank is stuck, in which collective, doing what?" (or "why did it die?"),
// shared by the live hang monitor and `dlaunch diagnose`: diagnosis.json's struct, which
// core/run_dir owns with the file.
#pragma once

#include "core/run_dir/diagnosis_file.h"

namespace dlaunch::launcher {

using rundir::Diagnosis;
using rundir::DiagnosisKind;
using rundir::DiagnosisKindName;
using rundir::RankDiagnosis;

}  // namespace dlaunch::launcher
