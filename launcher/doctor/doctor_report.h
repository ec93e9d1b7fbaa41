// Renders facts and checks as the readable table or the JSON document of `dlaunch doctor`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/doctor/doctor_facts.h"
#include "launcher/doctor/verdict.h"

namespace dlaunch::launcher {

class DoctorReport {
 public:
  // Pure; do not block.
  static std::string Table(const DoctorFacts& facts, const std::vector<CheckResult>& checks);
  // {"ok":bool,"gpu_present":bool,"summary":str,"checks":[{id,title,status,symbol,detail,fix,
  //  fatal}],"facts":{...DoctorFacts...}}
  static nlohmann::json Json(const DoctorFacts& facts, const std::vector<CheckResult>& checks);
  // One line: "2 problems, 1 warning" or "no problems"; says plainly when there is no GPU.
  static std::string Summary(const DoctorFacts& facts, const std::vector<CheckResult>& checks);
};

}  // namespace dlaunch::launcher
