// The rendering layer's wording of a mismatch (render_text.h renders the rest): the headline, the
// table of what each side called, and the evidence that decided a tie. Does not block, never
// throws.
#pragma once

#include <cstdint>
#include <string>

#include "core/run_dir/diagnosis_file.h"
#include "launcher/diagnose/inference.h"

namespace dlaunch::launcher {

// "allreduce float 8 KiB", "allreduce float x2048" without bytes, "?" without an op.
std::string DescribeCollective(const std::string& op, const std::string& dtype, int64_t count,
                               int64_t bytes);

// Words `mismatch` into `d`'s headline and details; `d`'s op, dtype and count are the right
// side's call.
void RenderMismatch(const Mismatch& mismatch, rundir::Diagnosis* d);

}  // namespace dlaunch::launcher
