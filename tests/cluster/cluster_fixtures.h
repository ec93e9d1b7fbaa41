// Environments as each engine sets them, with the place DetectCluster must read from each
// (FormatPlace's line): shared by the table test and its cross-check against the old code path.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

struct EnvFixture {
  std::string name;
  EnvMap env;
  std::string expect;       // FormatPlace(DetectCluster(env))
  bool cross_check = true;  // false where today's code fails other than with a UsageError
};

const std::vector<EnvFixture>& EnvFixtures();

}  // namespace dlaunch::launcher::cluster
