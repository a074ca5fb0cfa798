// Job steps as state: StepStarted / StepEnded through both stores, a refused
// step refusing its batch, and the steps surviving a reopen. The SQLite layout's steps
// table over versions is store_format_test.cc's; its checksum, store_guard_test.cc's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "state/pg_testing.h"
#include "state/row_codec.h"
#include "state/sqlite_store.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::FullStep;
using testing::MakeJob;
using testing::MakeStep;

NodeAllocation OneGpu(std::string node) {
  return {std::move(node), GpuSet::FirstN(1), 4, 1024, 0, 0};
}

std::string DumpSteps(const StateImage& image) {
  std::string out;
  for (const auto& [key, step] : image.steps) out += EncodeStepRow(step) + "\n";
  return out;
}

class StepStoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "postgres" && testing::SkipPostgres()) {
      GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
    }
    std::string tmpl = std::filesystem::temp_directory_path() / "hachi-steps-XXXXXX";
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  bool sqlite() const { return std::string(GetParam()) == "sqlite"; }
  bool postgres() const { return std::string(GetParam()) == "postgres"; }
  std::unique_ptr<Store> Open() {
    if (postgres()) {
      if (pg_.empty()) {
        std::string why;
        pg_ = testing::FreshPostgresSchema(&why);
        EXPECT_FALSE(pg_.empty()) << why;
      }
      Result<std::unique_ptr<Store>> s = OpenPostgresStore(pg_);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      return s.ok() ? std::move(*s) : nullptr;
    }
    if (!sqlite()) return memory_ ? std::move(memory_) : NewMemoryStore();
    Result<std::unique_ptr<Store>> s = OpenSqliteStore(dir_ + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // The memory store "reopens" as itself.
  void Close(std::unique_ptr<Store> s) {
    if (!sqlite() && !postgres()) memory_ = std::move(s);
  }
  std::string pg_;  // the test's database
  // Commits `edits` and applies them to `expected` as the server would.
  void CommitAndApply(Store& store, const std::vector<Edit>& edits) {
    Status s = store.Commit(edits);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const Edit& e : edits) ASSERT_TRUE(ApplyEdit(&expected_, e).ok());
  }

  std::string dir_;
  std::unique_ptr<Store> memory_;
  StateImage expected_;
};

TEST_P(StepStoreTest, StartEndAndReopen) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  CommitAndApply(*store, {MakeJob(1).Submitted(), MakeJob(2).Submitted()});
  // A job's start and its first step in one batch: the step is checked against the
  // job as the batch left it.
  CommitAndApply(*store, {JobStarted{1, 2000, {OneGpu("n1"), OneGpu("n2")}},
                          MakeStep(1, 0).Nodes({"n1", "n2"}).Tasks(2).Started()});
  CommitAndApply(*store, {MakeStep(1, 1).Started(), MakeStep(1, 2).Started()});
  StepRecord full = FullStep(2, 0);  // every field, ended below
  full.job_start = 2000;
  full.start_time = 2001;
  full.nodes = {"n3"};
  full.state = JobState::kRunning;
  full.end_time = 0;
  CommitAndApply(*store, {JobStarted{2, 2000, {OneGpu("n3")}}, StepStarted{full}});
  CommitAndApply(*store,
                 {StepEnded{{1, 2000, 0}, JobState::kCompleted, 2100, 0, 0, ""},
                  StepEnded{{2, 2000, 0}, JobState::kFailed, 2200, 137, 9, "killed"}});
  // Requeued and started again: the new run's steps start from 0.
  CommitAndApply(*store, {StepEnded{{1, 2000, 1}, JobState::kNodeFail, 2300, 0, 0, "x"},
                          StepEnded{{1, 2000, 2}, JobState::kNodeFail, 2300, 0, 0, "x"},
                          JobRequeued{1, "node n2 down"}});
  CommitAndApply(*store,
                 {JobStarted{1, 3000, {OneGpu("n1")}}, MakeStep(1, 0, 3000).Started()});
  Result<StateImage> now = store->Load();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(DumpSteps(*now), DumpSteps(expected_));
  Close(std::move(store));

  store = Open();
  ASSERT_NE(store, nullptr);
  Result<StateImage> image = store->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(DumpSteps(*image), DumpSteps(expected_));
  ASSERT_EQ(image->steps.size(), 5u);
  const StepRecord& failed = image->steps.at({2, 2000, 0});
  EXPECT_EQ(failed.name, full.name);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.exit_code, 137);
  EXPECT_EQ(failed.signal, 9);
  EXPECT_EQ(failed.reason, "killed");
  EXPECT_EQ(image->steps.at({1, 3000, 0}).state, JobState::kRunning);
  EXPECT_EQ(NextStepNumber(*image, 1, 2000), 3);
  EXPECT_EQ(NextStepNumber(*image, 1, 3000), 1);
  EXPECT_EQ(RunningSteps(*image, 1, 3000), (std::vector<StepKey>{{1, 3000, 0}}));
  // And goes on from what it loaded.
  EXPECT_TRUE(store->Commit({MakeStep(1, 1, 3000).Started()}).ok());
  EXPECT_EQ(store->Commit({MakeStep(1, 1, 3000).Started()}).code(),
            StatusCode::kInvalidArgument);
}

// A refused step refuses its batch, and the batch's other edits with it.
TEST_P(StepStoreTest, RefusedStepStoresNothing) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  CommitAndApply(*store, {MakeJob(1).Submitted(), JobStarted{1, 2000, {OneGpu("n1")}},
                          MakeStep(1, 0).Started()});
  const std::string before = DumpSteps(expected_);
  const std::vector<std::vector<Edit>> refused = {
      {MakeStep(1, 1).Started(), MakeStep(1, 3).Started()},  // a gap
      {MakeStep(1, 1).Started(), MakeStep(1, 1).Started()},  // the same one twice
      {MakeStep(1, 1).Started(), MakeStep(1, 2).Nodes({"n9"}).Started()},
      {StepEnded{{1, 2000, 0}, JobState::kCompleted, 2100, 0, 0, ""},
       StepEnded{{1, 2000, 0}, JobState::kFailed, 2100, 0, 0, ""}},  // ended twice
      {StepEnded{{1, 2000, 0}, JobState::kCompleted, 2100, 0, 0, ""},
       JobEnded{1, JobState::kCompleted, 2200, 0, 0, ""}, MakeStep(1, 1).Started()},
  };
  for (size_t i = 0; i < refused.size(); ++i) {
    Status s = store->Commit(refused[i]);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << i << ": " << s.ToString();
    Result<StateImage> image = store->Load();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(DumpSteps(*image), before) << i;
    EXPECT_EQ(image->jobs.at(1).state, JobState::kRunning) << i;
  }
  EXPECT_EQ(
      store->Commit({StepEnded{{1, 2000, 7}, JobState::kCompleted, 1, 0, 0, ""}}).code(),
      StatusCode::kNotFound);
  EXPECT_TRUE(store->Commit({MakeStep(1, 1).Started()}).ok());
}

INSTANTIATE_TEST_SUITE_P(Stores, StepStoreTest,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace hachi::state
