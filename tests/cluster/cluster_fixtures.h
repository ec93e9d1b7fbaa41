// Environments as each engine sets them, with the place DetectCluster must read from each
// (FormatPlace's line): shared by the detectors' table test and ResolveLaunch's.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

struct EnvFixture {
  std::string name;
  EnvMap env;
  std::string expect;  // FormatPlace(DetectCluster(env))
};

const std::vector<EnvFixture>& EnvFixtures();

}  // namespace dlaunch::launcher::cluster
