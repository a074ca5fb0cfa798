// Slurm host lists: "gpu[01-04],gpu07" <-> the names. Shared by the config reader
// (node ranges), the scheduler (-w/--nodelist, -x/--exclude), the CLI, and the job's
// environment (SLURM_JOB_NODELIST, compressed as squeue's NODELIST prints it). Pure
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

// The hosts as one Slurm host list: each name splits into a prefix and its trailing
// digits; names of one prefix are sorted by number and runs of consecutive numbers of
// the same width are joined ("gpu01,gpu02,gpu03" -> "gpu[01-03]"; "n9,n10" ->
// "n[9-10]"; "a01,a1" -> "a[01,1]"); a prefix with one host stays as written ("gpu01").
// Prefixes are in sorted order, duplicates dropped, as Slurm's job node list (node
// table order) reads for names that sort as they number. "" for no hosts.
std::string CompressHostList(const std::vector<std::string>& hosts);

}  // namespace hachi
