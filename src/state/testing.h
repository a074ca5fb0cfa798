// Test fixtures for state/: records with every field set, and a fluent job builder.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "state/edits.h"
#include "state/records.h"
#include "state/row_codec.h"

namespace hachi::state::testing {

// A job with every field away from its default, so a round trip that drops one fails.
inline JobRecord FullJob(JobId id) {
  JobRecord j;
  j.id = id;
  j.req.gpus = 8;
  j.req.nodes = 2;
  j.req.gpus_per_node = 4;
  j.req.cpus_per_gpu = 6;
  j.req.cpus = 2;
  j.req.memory_mib_per_gpu = 65536;
  j.req.memory_mib = 1024;
  j.req.gpu_model = "NVIDIA H100 80GB HBM3";
  j.req.min_gpu_memory_mib = 40960;
  j.req.partition = "gpu8";
  j.req.qos = "high";
  j.req.user = "alice";
  j.req.account = "vision";
  j.req.time_limit = 3600;
  j.req.exclusive = true;
  j.req.dependencies = {{sched::DependencyKind::kAfterOk, 3},
                        {sched::DependencyKind::kAfterAny, 4}};
  j.req.gpu_share_milli = 250;
  j.req.gpu_memory_mib = 20480;
  j.req.constraint = "h100&[rack1|rack2]";
  j.req.nodelist = "gpu[01-02]";
  j.req.exclude = "gpu07";
  j.req.begin_time = 1700003600;
  j.req.deadline = 1700090000;
  j.req.nice = 100;
  j.req.mig_profile = "1g.10gb";
  j.spec.name = "train \"résumé\"";
  j.spec.workdir = "/home/alice";
  j.spec.SetPayload({"#!/bin/sh\necho hi\n",
                     {{"PATH", "/usr/bin:/bin"}, {"EQ", "a=b"}, {"EMPTY", ""}},
                     {"python", "train.py", "--lr=0.1", ""}});
  j.spec.stdout_path = "out-%j.txt";
  j.spec.stderr_path = "err-%j.txt";
  j.spec.uid = 4000000000u;
  j.spec.gid = 100;
  j.spec.container_image = "nvcr.io/nvidia/pytorch:24.01";
  j.spec.shm_mib = 8192;
  j.spec.requeue = true;
  j.spec.array_job_id = id - 1;
  j.spec.array_task_id = 7;
  j.spec.array_max_running = 10;
  j.spec.comment = "tab\there";
  j.spec.ntasks = 4;
  j.spec.ntasks_per_node = 2;
  j.spec.cpus_per_task = 3;
  j.spec.signal = 10;
  j.spec.signal_before = 90;
  j.spec.signal_batch_only = true;
  j.spec.open_append = true;
  j.spec.batch_on_first_node = true;
  j.spec.interactive = true;
  j.state = JobState::kPending;
  j.held = true;
  j.held_by_admin = true;  // version 9
  j.submit_time = 1700000000;
  j.start_time = 1700000100;
  j.end_time = 1700000200;
  j.allocations = {{"n1", GpuSet::FromIndices({0, 1, 2, 3}), 24, 262144, 0, 0, {}},
                   {"n2",
                    GpuSet::FromIndices({4, 6}),
                    12,
                    1024,
                    500,
                    4096,
                    {"MIG-4a", "MIG-6b"}}};  // MIG devices
  j.exit_code = 3;
  j.signal = 9;
  j.reason = "node n2 down";
  j.requeues = 2;
  j.master_port = 29517;
  j.gpu_memory_peak_mib = 11264;
  j.usage = {480, 87.5, 1234.5, 20480, 1};
  j.submit_key = "0123456789abcdef";  // the store's only: not in the API's objects
  return j;
}

// FullJob(id) as a new submit stores it: pending, not held, no array, never run.
inline JobRecord SubmittedJob(JobId id) {
  JobRecord j = FullJob(id);
  j.state = JobState::kPending;
  j.held = false;
  j.spec.array_job_id = 0;
  j.spec.array_task_id = -1;
  j.allocations.clear();
  j.start_time = 0;
  j.end_time = 0;
  return j;
}

inline NodeRecord FullNode(std::string name) {
  NodeRecord n;
  n.name = std::move(name);
  n.address = "10.0.0.7:7070";
  n.topology_json = "{\n  \"gpus\": []\n}\n";
  n.cpus = 96;
  n.memory_mib = 1 << 20;
  n.block = "leaf3";
  n.state = NodeState::kDrained;
  n.state_reason = "maintenance";
  n.state_since = 1700000300;
  n.unhealthy = GpuSet::FromIndices({0, 1, 2, 3, 6});
  n.unhealthy_reasons = {{0, "Xid 79: GPU has fallen off the bus"},
                         {6, "ECC: double-bit error"}};
  n.cgroup = "v2";
  n.gpu_sharing = "mps";
  // A failed burn-in of two GPUs (the node's own state aside).
  n.burn_in_passed = "0123456789abcdef";
  n.burn_in_run = 4;
  n.burn_in = BurnInPhase::kFailed;
  n.burn_in_gpus = GpuSet::FromIndices({2, 3});
  return n;
}

// A finished step with every field away from its default (a name that is not UTF-8).
inline StepRecord FullStep(JobId job, int step) {
  StepRecord s;
  s.job = job;
  s.job_start = 1700000100;
  s.step = step;
  s.name = "python \xff";
  s.user = "alice";
  s.nodes = {"n2", "n1"};
  s.ntasks = 16;
  s.cpus = 48;
  s.gpus = 8;
  s.state = JobState::kFailed;
  s.start_time = 1700000110;
  s.end_time = 1700000190;
  s.exit_code = 137;
  s.signal = 9;
  s.reason = "task 3 killed by signal 9";
  return s;
}

// A running step for edit tests, in the run Started() makes (job_start 2000, node n1):
// MakeStep(5, 0).Nodes({"n1", "n2"}).Tasks(4).
class MakeStep {
 public:
  MakeStep(JobId job, int step, Time job_start = 2000) {
    step_.job = job;
    step_.job_start = job_start;
    step_.step = step;
    step_.name = "train";
    step_.user = "bob";
    step_.nodes = {"n1"};
    step_.ntasks = 1;
    step_.cpus = 1;
    step_.gpus = 1;
    step_.start_time = job_start + 10;
  }
  MakeStep& Nodes(std::vector<std::string> nodes) {
    step_.nodes = std::move(nodes);
    return *this;
  }
  MakeStep& Tasks(int n) {
    step_.ntasks = n;
    return *this;
  }
  MakeStep& State(JobState s) {
    step_.state = s;
    return *this;
  }
  MakeStep& StartTime(Time t) {
    step_.start_time = t;
    return *this;
  }
  MakeStep& EndTime(Time t) {
    step_.end_time = t;
    return *this;
  }
  operator StepRecord() const { return step_; }  // NOLINT: fluent builder
  StepStarted Started() const { return StepStarted{step_}; }
  StepKey Key() const { return {step_.job, step_.job_start, step_.step}; }

 private:
  StepRecord step_;
};

// A plain pending job for edit tests: MakeJob(5).Gpus(2).Held().
class MakeJob {
 public:
  explicit MakeJob(JobId id) {
    job_.id = id;
    job_.req.gpus = 1;
    job_.req.user = "bob";
    job_.submit_time = 1000 + id;
  }
  MakeJob& Gpus(int n) {
    job_.req.gpus = n;
    return *this;
  }
  MakeJob& Held(bool held = true) {
    job_.held = held;
    return *this;
  }
  MakeJob& State(JobState s) {
    job_.state = s;
    return *this;
  }
  operator JobRecord() const { return job_; }  // NOLINT: fluent builder
  JobSubmitted Submitted() const { return JobSubmitted{job_}; }

 private:
  JobRecord job_;
};

inline JobStarted Started(JobId id, std::string node = "n1") {
  return JobStarted{id, 2000, {{std::move(node), GpuSet::FirstN(1), 4, 1024, 0, 0}}};
}

// Every record of an image as the store's row text, for comparing images: two images
// hold the same state when their dumps are equal.
inline std::string DumpImage(const StateImage& image) {
  std::string out = "last=" + std::to_string(image.last_job_id) + "\n";
  for (const auto& [id, job] : image.jobs) out += EncodeJobRow(job) + "\n";
  for (const auto& [name, node] : image.nodes) out += EncodeNodeRow(node) + "\n";
  for (const auto& [id, token] : image.tokens) out += EncodeTokenRow(token) + "\n";
  for (const auto& [key, step] : image.steps) out += EncodeStepRow(step) + "\n";
  return out;
}

}  // namespace hachi::state::testing
