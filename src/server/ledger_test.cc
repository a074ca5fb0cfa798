// The Ledger on its own, over the in-memory store: what a commit checks, writes and
// applies, in which order it calls its observers, what a failed write leaves, and what
// it keeps beside the records (active jobs, ids, finished jobs' memory, job topics).
#include "server/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "state/sqlite_store.h"
#include "state/testing.h"

namespace hachi::server {
namespace {

using state::testing::MakeJob;

// Records every hook in order, and adds or seals what a test asks it to.
class Recorder : public Ledger::Observer {
 public:
  explicit Recorder(Ledger* ledger, std::vector<std::string>* log, std::string name)
      : ledger_(ledger), log_(log), name_(std::move(name)) {}
  void Extend(std::vector<state::Edit>* edits) override {
    ledger_->mu().AssertHeld();
    log_->push_back(name_ + " extend " + std::to_string(edits->size()));
    if (extra_) edits->push_back(*std::exchange(extra_, std::nullopt));
  }
  void Seal(Ledger::Batch* batch) override {
    ledger_->mu().AssertHeld();
    log_->push_back(name_ + " seal " + std::to_string(batch->edits.size()));
    if (seal_usage_) {
      state::JobUsage u;
      u.job = 1;
      batch->usage.push_back(u);
    }
  }
  void Aborted(Ledger::Batch* batch) override {
    log_->push_back(name_ + " aborted " + std::to_string(batch->usage.size()));
  }
  void Applied(const std::vector<state::Edit>& edits) override {
    ledger_->mu().AssertHeld();
    // Applied already: the image has what the edits say.
    log_->push_back(name_ + " applied " + std::to_string(edits.size()) +
                    " jobs=" + std::to_string(ledger_->image().jobs.size()));
  }
  std::optional<state::Edit> extra_;
  bool seal_usage_ = false;

 private:
  Ledger* ledger_;
  std::vector<std::string>* log_;
  std::string name_;
};

std::unique_ptr<Ledger> Open(int fail_after = -1) {
  Result<std::unique_ptr<Ledger>> l = Ledger::Open(state::NewMemoryStore(fail_after));
  EXPECT_TRUE(l.ok()) << l.status().message();
  return std::move(*l);
}

Status Commit(Ledger& l, std::vector<state::Edit> edits) {
  MutexLock writer(&l.writer_mu());
  MutexLock lock(&l.mu());
  return l.Commit(std::move(edits));
}

state::JobRecord WithEnv(state::JobRecord r, std::string value, state::JobId array = 0) {
  r.spec.SetPayload({"#!/bin/sh\ntrue\n", {{"A", std::move(value)}}, {}});
  r.spec.array_job_id = array;
  return r;
}

TEST(Ledger, CommitChecksWritesAppliesAndCallsObserversInOrder) {
  std::unique_ptr<Ledger> l = Open();
  std::vector<std::string> log;
  Recorder a(l.get(), &log, "a"), b(l.get(), &log, "b");
  l->AddObserver(&a);
  l->AddObserver(&b);
  a.extra_ = MakeJob(2).Submitted();  // joins the same commit
  ASSERT_TRUE(Commit(*l, {MakeJob(1).Submitted()}).ok());
  EXPECT_EQ(log,
            (std::vector<std::string>{"a extend 1", "b extend 2", "a seal 2", "b seal 2",
                                      "a applied 2 jobs=2", "b applied 2 jobs=2"}));
  MutexLock lock(&l->mu());
  EXPECT_EQ(l->active(), (std::set<state::JobId>{1, 2}));
}

TEST(Ledger, AnEditThatFailsItsCheckChangesNothingAndWritesNothing) {
  std::unique_ptr<Ledger> l = Open();
  std::vector<std::string> log;
  Recorder a(l.get(), &log, "a");
  l->AddObserver(&a);
  // Job 7 does not exist: its start is refused before anything is written.
  EXPECT_FALSE(Commit(*l, {MakeJob(1).Submitted(), state::testing::Started(7)}).ok());
  EXPECT_EQ(log, (std::vector<std::string>{"a extend 2"}));
  MutexLock lock(&l->mu());
  EXPECT_TRUE(l->image().jobs.empty());
}

TEST(Ledger, AFailedWriteAbortsAndAppliesNothing) {
  std::unique_ptr<Ledger> l = Open(/*fail_after=*/1);
  std::vector<std::string> log;
  Recorder a(l.get(), &log, "a");
  l->AddObserver(&a);
  ASSERT_TRUE(Commit(*l, {MakeJob(1).Submitted()}).ok());
  log.clear();
  a.seal_usage_ = true;
  const Status s = Commit(*l, {state::testing::Started(1)});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  // What Seal put in the batch comes back to it; nothing applied.
  EXPECT_EQ(log, (std::vector<std::string>{"a extend 1", "a seal 1", "a aborted 1"}));
  MutexLock lock(&l->mu());
  EXPECT_EQ(l->image().jobs.at(1).state, state::JobState::kPending);
}

TEST(Ledger, CommitNewSettlesUnderTheLockThenApplies) {
  std::unique_ptr<Ledger> l = Open(/*fail_after=*/1);
  std::vector<std::string> log;
  Recorder a(l.get(), &log, "a");
  l->AddObserver(&a);
  state::JobId first = 0;
  {
    MutexLock lock(&l->mu());
    first = l->ReserveIds(2);
    EXPECT_EQ(l->next_id(), first + 2);
  }
  std::vector<bool> settled;
  ASSERT_TRUE(l->CommitNew({MakeJob(first).Submitted(), MakeJob(first + 1).Submitted()},
                           [&](bool committed) {
                             l->mu().AssertHeld();
                             settled.push_back(committed);
                           })
                  .ok());
  // The submit path has no check to extend and no run to seal.
  EXPECT_EQ(log, (std::vector<std::string>{"a applied 2 jobs=2"}));
  // The store fails from now on: settled with false, nothing applied.
  EXPECT_FALSE(l->CommitNew({MakeJob(first + 2).Submitted()}, [&](bool committed) {
                  settled.push_back(committed);
                }).ok());
  EXPECT_EQ(settled, (std::vector<bool>{true, false}));
  MutexLock lock(&l->mu());
  EXPECT_EQ(l->image().jobs.size(), 2u);
}

TEST(Ledger, IdsAreNeverReusedAfterAReopen) {
  auto store = state::NewMemoryStore();
  state::Store* raw = store.get();
  ASSERT_TRUE(raw->Commit({MakeJob(41).Submitted()}).ok());
  Result<std::unique_ptr<Ledger>> l = Ledger::Open(std::move(store));
  ASSERT_TRUE(l.ok());
  MutexLock lock(&(*l)->mu());
  EXPECT_EQ((*l)->ReserveIds(1), 42);
}

TEST(Ledger, AFinishedJobsEnvironmentLeavesMemoryAndComesBackOnRestore) {
  std::unique_ptr<Ledger> l = Open();
  ASSERT_TRUE(Commit(*l, {state::JobSubmitted{WithEnv(MakeJob(1), "1")},
                          state::JobSubmitted{WithEnv(MakeJob(2), "2", 2)},
                          state::JobSubmitted{WithEnv(MakeJob(3), "2", 2)}})
                  .ok());
  ASSERT_TRUE(
      Commit(*l, {state::JobEnded{1, state::JobState::kCancelled, 3000, 0, 0, "x"},
                  state::JobEnded{2, state::JobState::kCancelled, 3000, 0, 0, "x"},
                  state::JobEnded{3, state::JobState::kCancelled, 3000, 0, 0, "x"}})
          .ok());
  MutexLock lock(&l->mu());
  EXPECT_TRUE(l->active().empty());
  const state::StateImage& image = l->image();
  EXPECT_TRUE(image.jobs.at(1).spec.env().empty());
  EXPECT_EQ(image.jobs.at(1).spec.script(), "#!/bin/sh\ntrue\n");  // the script stays
  // An array's finished tasks share one script-only payload.
  EXPECT_EQ(image.jobs.at(2).spec.payload, image.jobs.at(3).spec.payload);
  // Freed counts a payload only when nothing else holds it (this store keeps copies);
  // taking the count resets it.
  l->TakeFreedBytes();
  EXPECT_EQ(l->TakeFreedBytes(), 0);
  state::JobPayload full{"#!/bin/sh\ntrue\n", {{"A", "1"}}, {}};
  l->RestorePayload(1, std::make_shared<const state::JobPayload>(full));
  EXPECT_EQ(l->image().jobs.at(1).spec.env(), (state::EnvList{{"A", "1"}}));
}

TEST(Ledger, EveryJobAnEditTouchesIsNotifiedOnItsTopic) {
  std::unique_ptr<Ledger> l = Open();
  std::vector<std::string> topics;
  l->SetNotifier([&](const std::string& t) { topics.push_back(t); });
  ASSERT_TRUE(Commit(*l, {MakeJob(1).Submitted(), MakeJob(2).Submitted()}).ok());
  ASSERT_TRUE(Commit(*l, {state::JobHeld{2, true}}).ok());
  EXPECT_EQ(topics, (std::vector<std::string>{"job/1", "job/2", "job/2"}));
}

// Every write path tells the server's log (stderr) of a full disk, once an episode: the
// ledger's commits and the submits' alike, over SQLite refusing to grow its file.
TEST(Ledger, AFullDiskIsSaidOnceAnEpisode) {
  char tmpl[] = "/tmp/hachi-ledger-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  {
    Result<std::unique_ptr<state::SqlStore>> store =
        state::SqliteStore::Open(std::string(tmpl) + "/state.db", {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    state::SqlStore* sqlite = store->get();
    Result<std::unique_ptr<Ledger>> l = Ledger::Open(std::move(*store));
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE(Commit(**l, {MakeJob(1).Submitted()}).ok());
    ASSERT_TRUE(sqlite->SetMaxPageCountForTesting(1).ok());  // the disk is full
    auto big = [](state::JobId id) {
      state::JobRecord r = MakeJob(id);
      r.spec.set_script(std::string(256 * 1024, 'x'));
      return state::JobSubmitted{r};
    };
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE((*l)->CommitNew({big(2)}, [](bool) {}).ok());
    EXPECT_FALSE((*l)->CommitNew({big(3)}, [](bool) {}).ok());
    EXPECT_FALSE(Commit(**l, {big(4)}).ok());
    ASSERT_TRUE(sqlite->SetMaxPageCountForTesting(0).ok());
    EXPECT_TRUE(Commit(**l, {state::JobHeld{1, true}}).ok());
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(said.find("hachi server: the state store's writes fail for lack of space"),
              0u)
        << said;
    EXPECT_EQ(said.find("lack of space", said.find("lack of space") + 1),
              std::string::npos)
        << said;
    EXPECT_NE(said.find("\nhachi server: the state store's writes succeed again after 3 "
                        "failed\n"),
              std::string::npos)
        << said;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 2) << said;
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace hachi::server
