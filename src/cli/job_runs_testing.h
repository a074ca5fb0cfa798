// What the fleet end-to-end tests (cli/fleet_testing.h) judge by: each job's runs as the
// job itself wrote them, and its record as `hachi show job --json` gives it. The jobs'
// own timestamps, not the server's, because the question is what really ran when.
//
// A job's script appends to its runs file (one per job, in a directory every host
// shares):
//   start <date +%s.%N> <node> <CUDA_VISIBLE_DEVICES> [<pid>]
//   end <date +%s.%N> <node> [how]      (at its normal exit, or from a TERM trap)
// A SIGKILLed run writes no end.
//
// Test-only, header-only. Not thread-safe: call from the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_testing.h"

namespace hachi::cli::testing {

// Seconds since the epoch: the jobs' `date +%s.%N` on the same machine's clock.
inline double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The job's record (`hachi show job ID --json`), or null when the server does not answer.
inline nlohmann::json Job(int64_t id) {
  nlohmann::json j = nlohmann::json::parse(
      Hachi("show job " + std::to_string(id) + " --json", false).out, nullptr, false);
  return j.is_object() && j.contains("job") ? j["job"] : nlohmann::json();
}

// One run of a job, from its file.
struct JobRun {
  int64_t job = 0;
  std::string node;
  std::vector<int> gpus;
  int pid = 0;  // the job script's, when it wrote one
  double start = 0;
  double end = std::numeric_limits<double>::infinity();  // still running, or SIGKILLed
  bool ended() const { return end != std::numeric_limits<double>::infinity(); }
};

// Every run in `text`, in order of their starts, ended or not: a start that follows a
// start leaves the first open until an end from its node comes (the two overlapped), or
// for good (it was SIGKILLed). The caller judges which.
inline std::vector<JobRun> ParseRuns(int64_t job, const std::string& text) {
  std::vector<JobRun> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string what, node, gpus;
    double at = 0;
    l >> what >> at >> node;
    if (what == "start") {
      JobRun r;
      r.job = job;
      r.node = node;
      r.start = at;
      l >> gpus >> r.pid;
      std::stringstream g(gpus);
      for (std::string x; std::getline(g, x, ',');)
        r.gpus.push_back(std::atoi(x.c_str()));
      out.push_back(r);
    } else if (what == "end") {
      // The latest open run on the end's node: a run stopped late ends after a later run
      // of its job started elsewhere.
      auto open = std::find_if(out.rbegin(), out.rend(), [&](const JobRun& r) {
        return !r.ended() && r.node == node;
      });
      if (open != out.rend()) open->end = at;
    }
  }
  return out;
}

// The runs in `path`, in order; false (with a test failure) when the file is not a
// sequence of start/end pairs, i.e. a run began while the last one still ran.
inline bool ReadRuns(int64_t job, const std::string& path, std::vector<JobRun>* out) {
  std::istringstream in(ReadFile(path));
  bool open = false;
  for (std::string line; std::getline(in, line);) {
    const std::string what = line.substr(0, line.find(' '));
    if (what == "start" && open) {
      ADD_FAILURE() << "job " << job << ": a run started before the last one ended:\n"
                    << ReadFile(path);
      return false;
    }
    if (what == "end" && !open) {
      ADD_FAILURE() << "job " << job << ": an end without a start:\n" << ReadFile(path);
      return false;
    }
    if (what == "start" || what == "end") open = what == "start";
  }
  const std::vector<JobRun> runs = ParseRuns(job, ReadFile(path));
  out->insert(out->end(), runs.begin(), runs.end());
  return true;
}

// Test failures for every two runs, of one job or of two, that shared a GPU of one node
// at the same time.
inline void ExpectNoGpuTwice(const std::vector<JobRun>& all) {
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      const JobRun& a = all[i];
      const JobRun& b = all[j];
      if (a.node != b.node) continue;
      const bool share = std::any_of(a.gpus.begin(), a.gpus.end(), [&](int g) {
        return std::find(b.gpus.begin(), b.gpus.end(), g) != b.gpus.end();
      });
      const bool overlap = a.start < b.end && b.start < a.end;
      EXPECT_FALSE(share && overlap)
          << "jobs " << a.job << " and " << b.job << " on one GPU of " << a.node
          << " at once: [" << a.start << ", " << a.end << ") and [" << b.start << ", "
          << b.end << ")";
    }
  }
}

// `dir`/job.sh: a job of `$1` seconds that writes its runs to `dir`/<job id>.runs in the
// format above, its end from a TERM trap too.
inline void WriteRunsJobScript(const std::string& dir) {
  std::ofstream(dir + "/job.sh")
      << "f=" << dir << "/$HACHI_JOB_ID.runs\n"
      << "echo \"start $(date +%s.%N) $HACHI_NODENAME $CUDA_VISIBLE_DEVICES $$\" >> "
         "$f\n"
      << "trap 'kill $! 2>/dev/null; echo \"end $(date +%s.%N) $HACHI_NODENAME term\" "
         ">> $f; exit 143' TERM\n"
      << "sleep $1 & wait\n"
      << "echo \"end $(date +%s.%N) $HACHI_NODENAME done\" >> $f\n";
}

}  // namespace hachi::cli::testing
