// An array's script, environment and argv are kept once (the tasks share
// one state::JobPayload), every task still launches and reads back with all of it, and
// what one user may have pending is bounded.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/record_json_nlohmann.h"
#include "server/controller.h"
#include "server/testing.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::MakeSubmit;

std::vector<int> Tasks(int n) {
  std::vector<int> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i;
  return t;
}

const state::EnvList kEnv = {{"PATH", "/usr/bin:/bin"}, {"TOKEN", "t0ps3cret"}};

SubmitRequest BigArray(const std::string& script, int tasks) {
  SubmitRequest r = MakeSubmit().Gpus(1).Time(600).Array(Tasks(tasks), 0);
  r.spec.SetPayload({script, kEnv, {}});
  return r;
}

// Every task holds the very same payload (one copy in memory however many tasks), and
// each one's launch and API record carry the whole script and environment.
TEST(ArrayPayload, TasksShareOnePayloadAndEachLaunchesWithAllOfIt) {
  topo::TempDir dir;
  const std::string script = "#!/bin/sh\n# " + std::string(64 << 10, 'x') + "\n";
  std::vector<state::JobId> ids;
  {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir.path() + "/hachi.db");
    ASSERT_TRUE(store.ok());
    Harness h(ControllerOptions{}, std::move(*store));
    h.Register("n1");
    Result<std::vector<state::JobId>> submitted =
        h->jobs().Submit(BigArray(script, 200), kAlice);
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    ids = *submitted;
    ASSERT_EQ(ids.size(), 200u);
    const state::JobPayload* shared = h.Job(ids[0]).spec.payload.get();
    ASSERT_NE(shared, nullptr);
    for (state::JobId id : ids) ASSERT_EQ(h.Job(id).spec.payload.get(), shared) << id;

    h->RunCycle();
    const AgentWork work = h.Work("n1");
    ASSERT_EQ(work.launch.size(), 8u);  // n1's 8 GPUs
    for (const api::LaunchSpec& l : work.launch) {
      EXPECT_EQ(l.spec.script(), script) << l.job;
      EXPECT_EQ(l.spec.env(), kEnv) << l.job;
    }
    for (state::JobId id : {ids[0], ids[100], ids[199]}) {
      const nlohmann::json j = api::ToJson(h.Job(id));
      EXPECT_EQ(j["spec"]["script"], script) << id;
      EXPECT_EQ(j["spec"]["env"],
                nlohmann::json({"PATH=/usr/bin:/bin", "TOKEN=t0ps3cret"}))
          << id;
    }
    h.Exit("n1", work.launch[0].job, 0);
    ASSERT_EQ(h.StateOf(work.launch[0].job), JobState::kCompleted);
  }
  // After a restart the loaded tasks share one payload again; the finished one keeps
  // the script, without the environment.
  Result<std::unique_ptr<state::Store>> store =
      state::OpenSqliteStore(dir.path() + "/hachi.db");
  ASSERT_TRUE(store.ok());
  Harness h(ControllerOptions{}, std::move(*store));
  const state::JobPayload* shared = h.Job(ids[199]).spec.payload.get();
  ASSERT_NE(shared, nullptr);
  int finished = 0;
  for (state::JobId id : ids) {
    const state::JobRecord job = h.Job(id);
    EXPECT_EQ(job.spec.script(), script) << id;
    if (job.state == JobState::kCompleted) {
      ++finished;
      EXPECT_TRUE(job.spec.env().empty()) << id;
    } else {
      EXPECT_EQ(job.spec.payload.get(), shared) << id;
    }
  }
  EXPECT_EQ(finished, 1);
}

// Refusals name the user, the bound and what the user has; a job that leaves the queue
// frees its share.
TEST(ArrayPayload, PendingJobsAndBytesPerUserAreBounded) {
  ControllerOptions o;
  o.max_pending_jobs_per_user = 10;
  o.max_pending_bytes_per_user = 1000;
  Harness h(o);
  h.Register("n1");
  const std::string script(500, '#');  // + 31 bytes of environment: 531 a payload
  Result<std::vector<state::JobId>> first = h->jobs().Submit(BigArray(script, 8), kAlice);
  ASSERT_TRUE(first.ok()) << first.status().ToString();  // 531 bytes: counted once

  Result<std::vector<state::JobId>> refused = h->jobs().Submit(BigArray("", 3), kAlice);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kBusy);
  EXPECT_EQ(refused.status().message(),
            "user alice has 8 jobs pending and may have at most 10 (the server's "
            "--max-pending-jobs); this submit would add 3");

  refused = h->jobs().Submit(BigArray(script, 1), kAlice);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kBusy);
  EXPECT_EQ(refused.status().message(),
            "user alice has 531 bytes of scripts, environments and arguments pending and "
            "may have at most 1000 (the server's --max-pending-bytes); this submit would "
            "add 531");
  EXPECT_EQ(h->job_views().Jobs(true).size(), 8u)
      << "nothing of a refused submit is kept";

  // Another user is not counted against alice.
  const Caller bob{"bob", 1001, 1001, true, false};
  ASSERT_TRUE(h->jobs().Submit(BigArray(script, 8), bob).ok());

  // Started and cancelled tasks leave the queue: alice may submit again.
  h->RunCycle();  // 8 of the 16 start on n1's 8 GPUs
  for (state::JobId id : *first) {
    if (h.StateOf(id) == JobState::kPending) {
      ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
    }
  }
  Result<std::vector<state::JobId>> again =
      h->jobs().Submit(BigArray(script, 10), kAlice);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

// `hachi submit --array=... -- cmd <a megabyte of arguments>`: the argv is part of the
// payload the tasks share, in memory and in the store (one copy after a restart too);
// every launch and API record still carries all of it.
TEST(ArrayPayload, TasksShareOneArgv) {
  topo::TempDir dir;
  std::vector<std::string> argv = {"/bin/echo"};
  for (int i = 0; i < 64; ++i) argv.push_back(std::string(1000, 'a' + i % 26));
  SubmitRequest r = MakeSubmit().Gpus(1).Time(600).Array(Tasks(200), 0);
  r.spec.set_argv(argv);
  std::vector<state::JobId> ids;
  {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir.path() + "/hachi.db");
    ASSERT_TRUE(store.ok());
    Harness h(ControllerOptions{}, std::move(*store));
    h.Register("n1");
    Result<std::vector<state::JobId>> submitted = h->jobs().Submit(r, kAlice);
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    ids = *submitted;
    const state::JobPayload* shared = h.Job(ids[0]).spec.payload.get();
    ASSERT_NE(shared, nullptr);
    for (state::JobId id : ids) ASSERT_EQ(h.Job(id).spec.payload.get(), shared) << id;
    h->RunCycle();
    const AgentWork work = h.Work("n1");
    ASSERT_EQ(work.launch.size(), 8u);
    for (const api::LaunchSpec& l : work.launch) EXPECT_EQ(l.spec.argv(), argv) << l.job;
    EXPECT_EQ(api::ToJson(h.Job(ids[150]))["spec"]["argv"], nlohmann::json(argv));
    h.Exit("n1", work.launch[0].job, 0);
    ASSERT_EQ(h.StateOf(work.launch[0].job), JobState::kCompleted);
    EXPECT_EQ(h.Job(work.launch[0].job).spec.argv(), argv) << "sacct shows it";
  }
  Result<std::unique_ptr<state::Store>> store =
      state::OpenSqliteStore(dir.path() + "/hachi.db");
  ASSERT_TRUE(store.ok());
  Harness h(ControllerOptions{}, std::move(*store));
  const state::JobPayload* shared = h.Job(ids[199]).spec.payload.get();
  ASSERT_NE(shared, nullptr);
  for (state::JobId id : ids) {
    const state::JobRecord job = h.Job(id);
    EXPECT_EQ(job.spec.argv(), argv) << id;
    if (job.state == JobState::kPending) {
      EXPECT_EQ(job.spec.payload.get(), shared) << id;
    }
  }
}

// A requeue of an array's finished tasks reads their payload from the store once: the
// tasks share it again (one copy, counted once), with the environment and the argv.
TEST(ArrayPayload, RequeuedTasksShareOnePayloadAgain) {
  topo::TempDir dir;
  Result<std::unique_ptr<state::Store>> store =
      state::OpenSqliteStore(dir.path() + "/hachi.db");
  ASSERT_TRUE(store.ok());
  Harness h(ControllerOptions{}, std::move(*store));
  h.Register("n1");
  SubmitRequest r = MakeSubmit().Gpus(1).Array(Tasks(3), 0);
  r.spec.SetPayload({"", kEnv, {"/bin/echo", std::string(4096, 'a')}});
  Result<std::vector<state::JobId>> ids = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_TRUE(h->jobs().Cancel(ids->front(), kAlice).ok());
  ASSERT_TRUE(h.Job(ids->back()).spec.env().empty()) << "dropped at the end";
  ASSERT_TRUE(h->jobs().Requeue(ids->front(), kAlice).ok());
  const state::JobPayload* shared = h.Job(ids->front()).spec.payload.get();
  ASSERT_NE(shared, nullptr);
  for (state::JobId id : *ids) {
    const state::JobRecord job = h.Job(id);
    EXPECT_EQ(job.state, JobState::kPending) << id;
    EXPECT_EQ(job.spec.payload.get(), shared) << id;
  }
  EXPECT_EQ(shared->env, kEnv);
  EXPECT_EQ(shared->argv, r.spec.argv());
}

// The argv counts toward --max-pending-bytes as the script does: once for an array,
// once for a single job. Before, a command's arguments were not counted at all.
TEST(ArrayPayload, PendingBytesCountTheArgvOncePerArray) {
  ControllerOptions o;
  o.max_pending_bytes_per_user = 1 << 20;
  Harness h(o);
  h.Register("n1");
  std::vector<std::string> argv = {"/bin/echo"};  // 10 + 600 * 1001 bytes
  for (int i = 0; i < 600; ++i) argv.push_back(std::string(1000, 'x'));
  SubmitRequest r = MakeSubmit().Gpus(1).Array(Tasks(300), 0);
  r.spec.set_argv(argv);
  Result<std::vector<state::JobId>> first = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(first.ok()) << first.status().ToString();  // 600,610 bytes, counted once

  for (const SubmitRequest& again : {r, SubmitRequest(MakeSubmit().Gpus(1))}) {
    SubmitRequest big = again;
    big.spec.set_argv(argv);
    Result<std::vector<state::JobId>> refused = h->jobs().Submit(big, kAlice);
    ASSERT_FALSE(refused.ok()) << "an array, then a single job";
    EXPECT_EQ(refused.status().code(), StatusCode::kBusy);
    EXPECT_EQ(refused.status().message(),
              "user alice has 600610 bytes of scripts, environments and arguments "
              "pending and may have at most 1048576 (the server's --max-pending-bytes); "
              "this submit would add 600610");
  }
  // Cancelled (every task: the array's id), the array frees what it counted.
  ASSERT_TRUE(h->jobs().Cancel(first->front(), kAlice).ok());
  EXPECT_TRUE(h->jobs().Submit(r, kAlice).ok());
}

}  // namespace
}  // namespace hachi::server
