// Hang and failure diagnosis, everything the launcher uses:
//   RunDiagnoseCommand  - `dlaunch diagnose <run-dir> [--json] [--trace]`
//   HangMonitor/JobView - live stall detection for the supervisor
//   LoadRunDir/Analyze  - the analysis engine, also for failures after teardown
//   FormatDiagnosis, WriteDiagnosisFiles, WriteTrace - the writers
#pragma once

#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/hang_monitor.h"
#include "launcher/diagnose/job_view.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/stack_capture.h"
#include "launcher/diagnose/trace_writer.h"
