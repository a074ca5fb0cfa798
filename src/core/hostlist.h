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

// The hosts as one Slurm host list, as Slurm prints a job's sorted node list
// (SLURM_JOB_NODELIST, squeue's NODELIST): each name splits into a prefix and its
// trailing digits; runs of consecutive numbers join when one zero padding prints them
// all ("gpu01,gpu02,gpu03" -> "gpu[01-03]"; "n9,n10" -> "n[9-10]"; "gpu08,gpu09,gpu10"
// -> "gpu[08-10]"). Numbers whose paddings differ stay apart, narrower first, in the
// prefix's one bracket ("a01,a2" -> "a[2,01]"). A prefix with one host stays as
// written ("gpu01"); a name without digits comes before its prefix's numbered names.
// Prefixes in byte order, duplicates dropped. "" for no hosts.
std::string CompressHostList(const std::vector<std::string>& hosts);

}  // namespace hachi
