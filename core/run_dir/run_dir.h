// The run directory module: paths, the structs of each file, one writer and one reader per file.
// See docs/run-directory.md for the formats.
#pragma once

#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/error_file.h"
#include "core/run_dir/events_file.h"
#include "core/run_dir/flight_file.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/memory_figures.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/rank_logs.h"
#include "core/run_dir/report_files.h"
#include "core/run_dir/run_reader.h"
#include "core/run_dir/schema.h"
#include "core/run_dir/summary_file.h"
