// `hachi doctor`: the field's runbook checks of this node, each OK / WARN / FAIL with its
// evidence and fix (diag/doctor.h). Registration and handler; single-threaded.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

// Adds `doctor` to `app`; its handler sets *exit_code (0 all OK, 1 the worst is a
// warning, 2 a failure or bad input).
void AddDoctorCommand(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
