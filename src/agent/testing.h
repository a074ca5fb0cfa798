// Fixture builder for agent tests: a api::LaunchSpec on a line,
// MakeLaunch(7).Gpus({1, 3}).Node("n1").Argv({"/bin/true"}).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/launch_spec.h"

namespace hachi::agent {

struct LaunchBuilder {
  api::LaunchSpec s;
  LaunchBuilder& Gpus(const std::vector<int>& g) {
    s.gpus = GpuSet::FromIndices(g);
    s.gpus_per_node = static_cast<int>(g.size());
    return *this;
  }
  LaunchBuilder& Node(std::string n) {
    s.node = std::move(n);
    return *this;
  }
  LaunchBuilder& Nodes(std::vector<std::string> l, int rank) {
    s.nodelist = std::move(l);
    s.node_rank = rank;
    s.node = s.nodelist[rank];
    return *this;
  }
  LaunchBuilder& Addresses(std::vector<std::string> a) {
    s.node_addresses = std::move(a);
    return *this;
  }
  LaunchBuilder& Name(std::string n) {
    s.spec.name = std::move(n);
    return *this;
  }
  LaunchBuilder& Argv(std::vector<std::string> a) {
    s.spec.set_argv(std::move(a));
    return *this;
  }
  LaunchBuilder& Sh(const std::string& cmd) { return Argv({"/bin/sh", "-c", cmd}); }
  LaunchBuilder& Script(std::string text) {
    s.spec.set_script(std::move(text));
    return *this;
  }
  LaunchBuilder& Workdir(std::string d) {
    s.spec.workdir = std::move(d);
    return *this;
  }
  LaunchBuilder& Env(std::string k, std::string v) {
    state::EnvList env = s.spec.env();
    env.emplace_back(std::move(k), std::move(v));
    s.spec.set_env(std::move(env));
    return *this;
  }
  LaunchBuilder& Out(std::string p) {
    s.spec.stdout_path = std::move(p);
    return *this;
  }
  LaunchBuilder& Err(std::string p) {
    s.spec.stderr_path = std::move(p);
    return *this;
  }
  LaunchBuilder& User(std::string name, uint32_t uid, uint32_t gid) {
    s.user = std::move(name);
    s.spec.uid = uid;
    s.spec.gid = gid;
    return *this;
  }
  LaunchBuilder& Partition(std::string p) {
    s.partition = std::move(p);
    return *this;
  }
  LaunchBuilder& Array(state::JobId array_job, int task) {
    s.spec.array_job_id = array_job;
    s.spec.array_task_id = task;
    return *this;
  }
  LaunchBuilder& Share(int milli, int64_t mem_mib) {
    s.share_milli = milli;
    s.gpu_memory_mib = mem_mib;
    return *this;
  }
  LaunchBuilder& Mps(std::string pipe_dir, std::string log_dir, std::string device) {
    s.mps_pipe_dir = std::move(pipe_dir);
    s.mps_log_dir = std::move(log_dir);
    s.mps_device = std::move(device);
    return *this;
  }
  LaunchBuilder& Image(std::string i) {
    s.spec.container_image = std::move(i);
    return *this;
  }
  LaunchBuilder& Shm(int64_t mib) {
    s.spec.shm_mib = mib;
    return *this;
  }
  LaunchBuilder& Start(Time start_time) {  // the run's id, as the server sets it
    s.start_time = start_time;
    return *this;
  }
  LaunchBuilder& TimeLimit(Duration limit, Duration grace) {
    s.time_limit = limit;
    s.kill_grace = grace;
    return *this;
  }
  LaunchBuilder& TimeLeft(Duration left) {  // what the server said is left of the limit
    s.time_left = left;
    return *this;
  }
  LaunchBuilder& Grace(Duration grace) {
    s.kill_grace = grace;
    return *this;
  }
  LaunchBuilder& MasterPort(int port) {
    s.master_port = port;
    return *this;
  }
  LaunchBuilder& Cpus(int n) {
    s.cpus = n;
    return *this;
  }
  LaunchBuilder& Tasks(int ntasks, int per_node, int cpus_per_task) {
    s.spec.ntasks = ntasks;
    s.spec.ntasks_per_node = per_node;
    s.spec.cpus_per_task = cpus_per_task;
    return *this;
  }
  LaunchBuilder& Signal(int sig, int before, bool batch_only) {
    s.spec.signal = sig;
    s.spec.signal_before = before;
    s.spec.signal_batch_only = batch_only;
    return *this;
  }
  LaunchBuilder& Append() {
    s.spec.open_append = true;
    return *this;
  }
  LaunchBuilder& Restarts(int n) {
    s.restart_count = n;
    return *this;
  }
  operator api::LaunchSpec() const { return s; }  // NOLINT: a builder converts implicitly
};

inline LaunchBuilder MakeLaunch(state::JobId job) {
  LaunchBuilder b;
  b.s.job = job;
  b.s.node = "n1";
  b.s.spec.workdir = "/tmp";
  return b;
}

}  // namespace hachi::agent
