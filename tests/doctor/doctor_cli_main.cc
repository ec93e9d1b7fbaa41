// `dlaunch_doctor_cli [--json]`: the doctor command on its own, for tests and for GPU machines
// where the whole launcher is not wanted.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "launcher/doctor/doctor.h"

int main(int argc, char** argv) {
  try {
    return dlaunch::launcher::RunDoctorCommand(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "dlaunch doctor: " << e.what() << "\n";
    return 2;
  }
}
