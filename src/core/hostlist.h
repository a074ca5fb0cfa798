// Slurm's compressed host lists ("gpu[01-04,07],login1"), as SLURM_JOB_NODELIST and
// squeue's NODELIST print them. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace hachi {

// The hosts as one Slurm host list: each name splits into a prefix and its trailing
// digits; names of one prefix are sorted by number and runs of consecutive numbers of
// the same width are joined ("gpu01,gpu02,gpu03" -> "gpu[01-03]"; "n9,n10" ->
// "n[9-10]"; "a01,a1" -> "a[01,1]"); a prefix with one host stays as written ("gpu01").
// Prefixes are in sorted order, duplicates dropped, as Slurm's job node list (node
// table order) reads for names that sort as they number. "" for no hosts.
std::string CompressHostList(const std::vector<std::string>& hosts);

}  // namespace hachi
