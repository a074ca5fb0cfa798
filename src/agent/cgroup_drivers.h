// Internal to agent/: the cgroup v1 and v2 drivers (cgroup_drivers.cc), which
// OpenCgroups (cgroup.cc) builds once it has found their directories.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/cgroup.h"

namespace hachi::agent {

// The v1 controllers a job's cgroup uses, in the order its directories are made.
inline constexpr const char* kV1Controllers[] = {"memory", "cpuset", "pids", "devices",
                                                 "freezer"};

// `bases`: controller -> the parent directory of the jobs' cgroups (made already).
std::unique_ptr<CgroupDriver> NewV1Driver(CgroupFs* fs,
                                          std::map<std::string, std::string> bases);
// `enabled`: the controllers in the parent's cgroup.subtree_control.
std::unique_ptr<CgroupDriver> NewV2Driver(CgroupFs* fs, std::string base,
                                          std::set<std::string> enabled);

std::string TrimLine(std::string s);  // without trailing newlines and spaces
std::vector<std::string> SplitWords(const std::string& text);

}  // namespace hachi::agent
