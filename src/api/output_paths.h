// A job's output file names and its name as the job sees them (Slurm's output patterns
// %j %x %A %a %u %N %n): pure functions of the LaunchSpec, in api/ because both the agent
// (which opens the files, agent/launcher.h) and the server (which reads a job's log for
// the dashboard, server/job_log.h) must expand them the same way.
//
// Pure functions; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

#include "api/launch_spec.h"

namespace hachi::api {

// Expands Slurm's output patterns: %j and %J job id, %x name, %A array job id (the job
// id for a plain job), %a array task id ("0" for a plain job), %u user, %N this node,
// %n this node's rank, %% a percent; a width between % and the letter zero-pads numbers
// ("%4a" -> "0007"); unknown patterns stay as written. An empty pattern is
// "hachi-%j.out". Relative results are under spec.spec.workdir.
std::string ExpandOutputPath(const std::string& pattern, const LaunchSpec& spec);

struct OutputFiles {
  std::string out;
  std::string err;  // == out when the job has no separate stderr file
};
// The job's stdout and stderr paths (empty stderr_path: the stdout file).
OutputFiles JobOutputFiles(const LaunchSpec& spec);

// The job's name as HACHI_JOB_NAME and %x show it: spec.spec.name, else the base name
// of the command, else "hachi".
std::string JobName(const LaunchSpec& spec);

// The umask a job's files (its output files, what its tasks create) are made under: the
// submitter's, which the client sends in SLURM_UMASK ("0022") as sbatch does, whatever
// --export says; without one (a job submitted through the API) 077, so that its output
// is the user's alone rather than readable by everyone.
inline constexpr char kUmaskVariable[] = "SLURM_UMASK";
inline constexpr mode_t kDefaultJobUmask = 077;
mode_t JobUmask(const state::EnvList& env);
bool HasUmask(const state::EnvList& env);
// SLURM_UMASK's text for `mask` ("0022").
std::string UmaskText(mode_t mask);

}  // namespace hachi::api
