// Test fixtures for server/: a submit request on a line (MakeSubmit().Gpus(4).Time(60)),
// a fake agent's registration from a topology preset, and a harness that drives a
// Controller the way agents and users do (register, submit, cycle, poll, report).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/cluster_config.h"
#include "server/controller.h"
#include "state/pg_testing.h"
#include "state/store.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::server::testing {

struct SubmitBuilder {
  SubmitRequest r;
  SubmitBuilder& Gpus(int g) {
    r.req.gpus = g;
    return *this;
  }
  SubmitBuilder& Gang(int nodes, int gpus_per_node) {
    r.req.nodes = nodes;
    r.req.gpus_per_node = gpus_per_node;
    r.req.gpus = nodes * gpus_per_node;
    return *this;
  }
  SubmitBuilder& Share(int milli) {
    r.req.gpus = 1;
    r.req.gpu_share_milli = milli;
    return *this;
  }
  SubmitBuilder& Partition(std::string p) {
    r.req.partition = std::move(p);
    return *this;
  }
  SubmitBuilder& Time(Duration limit) {
    r.req.time_limit = limit;
    return *this;
  }
  SubmitBuilder& After(sched::DependencyKind kind, state::JobId job) {
    r.req.dependencies.push_back({kind, job});
    return *this;
  }
  SubmitBuilder& Hold() {
    r.hold = true;
    return *this;
  }
  SubmitBuilder& Requeue() {
    r.spec.requeue = true;
    return *this;
  }
  SubmitBuilder& Array(std::vector<int> tasks, int max_running) {
    r.array_tasks = std::move(tasks);
    r.array_max_running = max_running;
    return *this;
  }
  operator SubmitRequest() const { return r; }  // NOLINT: a builder converts implicitly
};

inline SubmitBuilder MakeSubmit() {
  SubmitBuilder b;
  b.r.req.gpus = 1;
  b.r.spec.set_argv({"/bin/true"});
  b.r.spec.workdir = "/tmp";
  return b;
}

inline std::string PresetJson(const std::string& preset) {
  Result<topo::Topology> t = topo::LoadPreset(preset);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? topo::TopologyToJson(*t) : "";
}

// A registration as an agent on an 8-GPU HGX H100 server sends it.
inline AgentRegistration MakeAgent(const std::string& node, Time agent_started = 0) {
  static const std::string kTopology = PresetJson("hgx-h100");
  AgentRegistration r;
  r.node = node;
  r.address = "10.0.0." + std::to_string(node.size());
  r.topology_json = kTopology;
  r.cpus = 128;
  r.memory_mib = 1 << 20;
  r.agent_started = agent_started;
  r.simulated = true;  // a preset's GPUs: no burn-in unless a test's config asks
  return r;
}

// Controller options with the cluster config `toml` and the clock `clock` (null: the
// real one); a test failure when the config does not parse.
inline ControllerOptions WithConfig(const std::string& toml,
                                    const Clock* clock = nullptr) {
  ControllerOptions o;
  if (clock != nullptr) o.clock = clock;
  Result<config::ClusterConfig> cfg = config::ParseClusterConfig(toml, "c.toml");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (cfg.ok()) o.config = *cfg;
  return o;
}

// Callers as the HTTP layer makes them (server/http_auth.h): authenticated by the kernel
// or a token.
inline const Caller kAlice{"alice", 1000, 1000, true, false};
inline const Caller kRoot{"root", 0, 0, true, true};

// The store a test's controller runs on: memory, or with HACHI_TEST_STORE=postgres a
// fresh database on the PostgreSQL the test binary starts (state/pg_testing.h), so the
// controller's tests run on both engines (ctest's server_test_postgres).
inline std::unique_ptr<state::Store> TestStore() {
  const char* kind = std::getenv("HACHI_TEST_STORE");
  if (kind == nullptr || std::string(kind) != "postgres") return state::NewMemoryStore();
  std::string why;
  const std::string db = state::testing::FreshPostgresSchema(&why);
  EXPECT_FALSE(db.empty()) << why;
  Result<std::unique_ptr<state::Store>> s = state::OpenPostgresStore(db);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : state::NewMemoryStore();
}

// A Controller on a memory store with node `node` registered as an HGX H100 agent and,
// when `start`, its loop running (50 ms cycles): what the HTTP tests serve. Null (with a
// test failure) when it cannot be made.
inline std::unique_ptr<Controller> RunningController(const std::string& node = "n1",
                                                     bool start = true) {
  ControllerOptions o;
  o.cycle_interval_ms = 50;
  Result<std::unique_ptr<Controller>> c = Controller::Create(o, TestStore());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  Status s = (*c)->nodes().Register(MakeAgent(node));
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (start) (*c)->Start();
  return std::move(*c);
}

// Drives a Controller with no loop thread: the test decides when cycles run.
class Harness {
 public:
  explicit Harness(ControllerOptions options = {},
                   std::unique_ptr<state::Store> store = TestStore()) {
    Result<std::unique_ptr<Controller>> c =
        Controller::Create(std::move(options), std::move(store));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) c_ = std::move(*c);
  }
  Controller& c() { return *c_; }
  Controller* operator->() { return c_.get(); }

  void Register(const std::string& node, Time agent_started = 0) {
    Status s = c_->nodes().Register(MakeAgent(node, agent_started));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  // The first id of the submit (0 on error, with a test failure).
  state::JobId Submit(const SubmitRequest& r) {
    Result<std::vector<state::JobId>> ids = c_->jobs().Submit(r, kAlice);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() && !ids->empty() ? ids->front() : 0;
  }
  state::JobRecord Job(state::JobId id) {
    Result<state::JobRecord> j = c_->job_views().Job(id);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : state::JobRecord{};
  }
  state::JobState StateOf(state::JobId id) { return Job(id).state; }
  // What the agent of `node` gets now (no waiting).
  AgentWork Work(const std::string& node) { return c_->nodes().Poll(node, 0); }
  void Exit(const std::string& node, state::JobId id, int code,
            api::ExitKind kind = api::ExitKind::kExited) {
    api::JobExit e;
    e.job = id;
    e.kind = kind;
    e.exit_code = code;
    Status s = c_->nodes().ReportExits(node, {e});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

 private:
  std::unique_ptr<Controller> c_;
};

}  // namespace hachi::server::testing
