// API tokens as state (server/auth.h): TokenIssued / TokenRevoked through both stores,
// surviving a reopen, and a version-1 database gaining the tokens table.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "core/sha256.h"
#include "state/db.h"
#include "state/pg_testing.h"
#include "state/sqlite_store.h"
#include "state/store.h"
#include "state/token_json.h"

namespace hachi::state {
namespace {

TokenRecord MakeToken(const std::string& id, const std::string& user,
                      bool admin = false) {
  TokenRecord t;
  t.id = id;
  t.sha256 = Sha256Hex("hachi_secret_of_" + id);
  t.user = user;
  t.uid = user == "root" ? 0 : 1000;
  t.gid = t.uid;
  t.admin = admin;
  t.created = 1700000000;
  t.created_by = "root";
  return t;
}

class TokenStoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "postgres" && testing::SkipPostgres()) {
      GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
    }
    std::string tmpl = std::filesystem::temp_directory_path() / "hachi-tokens-XXXXXX";
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

  std::string dir_;
  std::unique_ptr<Store> memory_;
};

TEST_P(TokenStoreTest, IssueRevokeAndReopen) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Commit({TokenIssued{MakeToken("a1", "alice")},
                            TokenIssued{MakeToken("r1", "root", true)}})
                  .ok());
  // A second token with a hash already issued is refused, and its whole batch with it.
  TokenRecord dup = MakeToken("b1", "bob");
  dup.sha256 = MakeToken("a1", "alice").sha256;
  EXPECT_EQ(
      store->Commit({TokenIssued{MakeToken("c1", "carol")}, TokenIssued{dup}}).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Commit({TokenIssued{MakeToken("a1", "mallory")}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Commit({TokenRevoked{"nope"}}).code(), StatusCode::kNotFound);
  Close(std::move(store));

  store = Open();
  Result<StateImage> image = store->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->tokens.size(), 2u);
  EXPECT_EQ(TokenRecordToJson(image->tokens.at("a1")),
            TokenRecordToJson(MakeToken("a1", "alice")));
  EXPECT_TRUE(image->tokens.at("r1").admin);

  ASSERT_TRUE(store->Commit({TokenRevoked{"a1"}}).ok());
  Close(std::move(store));
  store = Open();
  image = store->Load();
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->tokens.count("a1"), 0u);
  EXPECT_EQ(image->tokens.count("r1"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Stores, TokenStoreTest,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

TEST(TokenStoreUpgrade, VersionOneDatabaseGainsTokens) {
  std::string tmpl = std::filesystem::temp_directory_path() / "hachi-tokens-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl.data());
  const std::string path = dir + "/state.db";
  { ASSERT_TRUE(OpenSqliteStore(path).ok()); }
  {  // what a database written by the version before tokens looks like
    Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("DROP TABLE tokens; PRAGMA user_version = 1").ok());
  }
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Commit({TokenIssued{MakeToken("a1", "alice")}}).ok());
  std::filesystem::remove_all(dir);
}

TEST(TokenJson, StrictDecoding) {
  const TokenRecord t = MakeToken("a1", "alice", true);
  Result<TokenRecord> back = TokenRecordFromJson(TokenRecordToJson(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(TokenRecordToJson(*back), TokenRecordToJson(t));
  struct Row {
    const char* name;
    const char* text;
    const char* error;
  };
  const Row rows[] = {
      {"not_object", "[1]", "not a JSON object"},
      {"unknown_field", R"({"id":"a","token":"x"})", "token.token: unknown field"},
      {"uid_negative", R"({"uid":-1})", "token.uid"},
      {"admin_string", R"({"admin":"yes"})", "token.admin"},
  };
  for (const Row& r : rows) {
    Result<TokenRecord> bad = TokenRecordFromJson(r.text);
    ASSERT_FALSE(bad.ok()) << r.name;
    EXPECT_NE(bad.status().message().find(r.error), std::string::npos)
        << r.name << ": " << bad.status().message();
  }
}

}  // namespace
}  // namespace hachi::state
