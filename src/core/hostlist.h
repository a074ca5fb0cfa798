// Slurm host lists: "gpu[01-04],gpu07" <-> the names. Shared by the config reader
// (node ranges), the scheduler (-w/--nodelist, -x/--exclude) and the CLI. Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi {

// Expands a Slurm-style host list: comma-separated names, each with at most one
// bracket group of numbers and ranges ("n[0001-0016]", "n[1-3,7]", "gpu9"). A range
// keeps the width of its first bound when that has a leading zero (n[0098-0102] ->
// n0098 .. n0102), as Slurm does. Names come out in the order written; at most 100,000.
Result<std::vector<std::string>> ExpandHostList(std::string_view text);

}  // namespace hachi
