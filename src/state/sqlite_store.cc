#include "state/sqlite_store.h"

#include <chrono>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>

#include "state/db.h"
#include "state/row_codec.h"

namespace hachi::state {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY,
  state TEXT NOT NULL,
  record TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS nodes (
  name TEXT PRIMARY KEY,
  record TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value ANY
) STRICT;
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  record TEXT NOT NULL
) STRICT;
INSERT INTO meta (key, value) VALUES ('min_reader_schema', 3)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value;
PRAGMA user_version = 3;
)sql";

// The oldest layout version that can use a database of this layout (meta
// 'min_reader_schema'; absent before version 3).
Result<int64_t> ReadMinReaderSchema(Db* db) {
  Result<Stmt> stmt =
      db->Prepare("SELECT value FROM meta WHERE key = 'min_reader_schema'");
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->ColumnInt(0) : 0;
}

// "<db>: jobs row 17: <what the row codec said>". A row this binary must not read keeps
// its code (kInvalidArgument); anything else wrong with a row is kInternal.
Status RowError(Db* db, std::string_view table, std::string_view key, const Status& s) {
  std::string message = db->path() + ": " + std::string(table) + " row " +
                        std::string(key) + ": " + s.message();
  return s.code() == StatusCode::kInvalidArgument ? InvalidArgument(std::move(message))
                                                  : Internal(std::move(message));
}

// A refused edit (CheckEdit) is the caller's fault and concerns its batch only; any
// other error comes from SQLite and may have ended the whole transaction.
bool IsRefusal(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound;
}

Result<int64_t> ReadLastJobId(Db* db) {
  Result<Stmt> stmt = db->Prepare("SELECT value FROM meta WHERE key = 'last_job_id'");
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->ColumnInt(0) : 0;
}

// Reads job `id` into image->jobs (absent: left out, CheckEdit reports it), and the
// row's fields this binary does not know into *unknown (for the rewrite).
Status ReadJob(Db* db, JobId id, StateImage* image, std::string* unknown = nullptr) {
  Result<Stmt> stmt = db->Prepare("SELECT record FROM jobs WHERE id = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Ok();
  Result<Row<JobRecord>> job = DecodeJobRow(stmt->ColumnText(0));
  if (!job.ok()) return RowError(db, "jobs", std::to_string(id), job.status());
  image->jobs[id] = std::move(job->record);
  if (unknown) *unknown = std::move(job->unknown);
  return Status::Ok();
}

Status ReadNode(Db* db, const std::string& name, StateImage* image,
                std::string* unknown) {
  Result<Stmt> stmt = db->Prepare("SELECT record FROM nodes WHERE name = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, name);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Ok();
  Result<Row<NodeRecord>> node = DecodeNodeRow(stmt->ColumnText(0));
  if (!node.ok()) return RowError(db, "nodes", name, node.status());
  image->nodes[name] = std::move(node->record);
  *unknown = std::move(node->unknown);
  return Status::Ok();
}

// `unknown`: the fields of the row being replaced that this binary does not know.
Status WriteJob(Db* db, const JobRecord& job, std::string_view unknown) {
  Result<Stmt> stmt =
      db->Prepare("UPDATE jobs SET state = ?2, record = ?3 WHERE id = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job.id)
      .Bind(2, JobStateName(job.state))
      .Bind(3, EncodeJobRow(job, unknown));
  return stmt->Run();
}

Status WriteNode(Db* db, const NodeRecord& node, std::string_view unknown = "") {
  Result<Stmt> stmt = db->Prepare(
      "INSERT INTO nodes (name, record) VALUES (?1, ?2) "
      "ON CONFLICT (name) DO UPDATE SET record = excluded.record");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, node.name).Bind(2, EncodeNodeRow(node, unknown));
  return stmt->Run();
}

// Tokens are few and checked against all of them (a hash is never issued twice).
Result<StateImage> ReadTokens(Db* db) {
  StateImage image;
  Result<Stmt> stmt = db->Prepare("SELECT id, record FROM tokens");
  if (!stmt.ok()) return stmt.status();
  for (;;) {
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::string id = stmt->ColumnText(0);
    Result<Row<TokenRecord>> t = DecodeTokenRow(stmt->ColumnText(1));
    if (!t.ok()) return RowError(db, "tokens", id, t.status());
    image.tokens[std::move(id)] = std::move(t->record);
  }
  return image;
}

Status WriteTokenEdit(Db* db, const TokenIssued& e) {
  Result<StateImage> image = ReadTokens(db);
  if (!image.ok()) return image.status();
  HACHI_RETURN_IF_ERROR(CheckEdit(*image, e));
  Result<Stmt> stmt = db->Prepare("INSERT INTO tokens (id, record) VALUES (?1, ?2)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, e.record.id).Bind(2, EncodeTokenRow(e.record));
  return stmt->Run();
}

Status WriteTokenEdit(Db* db, const TokenRevoked& e) {
  Result<StateImage> image = ReadTokens(db);
  if (!image.ok()) return image.status();
  HACHI_RETURN_IF_ERROR(CheckEdit(*image, e));
  Result<Stmt> stmt = db->Prepare("DELETE FROM tokens WHERE id = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, e.token_id);
  return stmt->Run();
}

JobId EditJobId(const JobStarted& e) { return e.id; }
JobId EditJobId(const JobEnded& e) { return e.id; }
JobId EditJobId(const JobRequeued& e) { return e.id; }
JobId EditJobId(const JobHeld& e) { return e.id; }

}  // namespace

struct SqliteStore::Waiter {
  const std::vector<Edit>* edits;
  Status status;
  bool done = false;  // guarded by mu_
};

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                       const SqliteOptions& options) {
  Result<std::unique_ptr<Db>> opened = Db::Open(path, options.busy_timeout_ms);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Db> db = std::move(*opened);
  HACHI_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = FULL"));
  // A newer layout opens when its min_reader_schema says this one can use it.
  auto check_version = [&](int64_t version) -> Status {
    if (version <= kSchemaVersion) return Status::Ok();
    // No meta table, or no key: a layout from before the key, or not Hachi's.
    Result<int64_t> min_reader = ReadMinReaderSchema(db.get());
    if (!min_reader.ok() || *min_reader == 0 || *min_reader > kSchemaVersion) {
      return InvalidArgument(
          path + ": state database schema version " + std::to_string(version) +
          " is newer than this hachi knows (" + std::to_string(kSchemaVersion) +
          "); run a newer hachi, or point it at another file");
    }
    return Status::Ok();
  };
  Result<int64_t> version = db->QueryInt("PRAGMA user_version");
  if (!version.ok()) return version.status();
  HACHI_RETURN_IF_ERROR(check_version(*version));
  if (*version < kSchemaVersion) {
    Txn txn(db.get());
    HACHI_RETURN_IF_ERROR(txn.Begin());
    // Another process may have created the schema while we waited for the lock.
    version = db->QueryInt("PRAGMA user_version");
    if (!version.ok()) return version.status();
    HACHI_RETURN_IF_ERROR(check_version(*version));
    if (*version < kSchemaVersion) HACHI_RETURN_IF_ERROR(db->Exec(kSchema));
    HACHI_RETURN_IF_ERROR(txn.Commit());
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(db), options));
}

SqliteStore::SqliteStore(std::unique_ptr<Db> db, const SqliteOptions& options)
    : options_(options), db_(std::move(db)) {}

SqliteStore::~SqliteStore() = default;

Result<StateImage> SqliteStore::Load() {
  std::lock_guard<std::mutex> lock(db_mu_);
  Db* db = db_.get();
  Txn txn(db);  // one consistent view of the three tables
  HACHI_RETURN_IF_ERROR(txn.Begin());
  StateImage image;
  Result<int64_t> last = ReadLastJobId(db);
  if (!last.ok()) return last.status();
  image.last_job_id = *last;

  Result<Stmt> jobs = db->Prepare("SELECT id, record FROM jobs ORDER BY id");
  if (!jobs.ok()) return jobs.status();
  for (;;) {
    Result<bool> row = jobs->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    const JobId id = jobs->ColumnInt(0);
    Result<Row<JobRecord>> job = DecodeJobRow(jobs->ColumnText(1));
    if (!job.ok()) return RowError(db, "jobs", std::to_string(id), job.status());
    if (job->record.id != id) {
      return Internal(db->path() + ": jobs row " + std::to_string(id) + " holds job " +
                      std::to_string(job->record.id));
    }
    if (id > image.last_job_id) image.last_job_id = id;
    image.jobs.emplace(id, std::move(job->record));
  }

  Result<Stmt> nodes = db->Prepare("SELECT name, record FROM nodes ORDER BY name");
  if (!nodes.ok()) return nodes.status();
  for (;;) {
    Result<bool> row = nodes->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::string name = nodes->ColumnText(0);
    Result<Row<NodeRecord>> node = DecodeNodeRow(nodes->ColumnText(1));
    if (!node.ok()) return RowError(db, "nodes", name, node.status());
    image.nodes.emplace(std::move(name), std::move(node->record));
  }

  Result<Stmt> tokens = db->Prepare("SELECT id, record FROM tokens ORDER BY id");
  if (!tokens.ok()) return tokens.status();
  for (;;) {
    Result<bool> row = tokens->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::string id = tokens->ColumnText(0);
    Result<Row<TokenRecord>> token = DecodeTokenRow(tokens->ColumnText(1));
    if (!token.ok()) return RowError(db, "tokens", id, token.status());
    image.tokens.emplace(std::move(id), std::move(token->record));
  }
  HACHI_RETURN_IF_ERROR(txn.Commit());
  return image;
}

Status SqliteStore::Commit(const std::vector<Edit>& edits) {
  commits_.fetch_add(1, std::memory_order_relaxed);
  if (edits.empty()) return Status::Ok();
  CommitTimer timer(this);  // the wait for a group leader counts: the caller waits it
  Waiter self{&edits, Status::Ok()};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&self);
  cv_.wait(lock, [&] { return self.done || !writing_; });
  if (self.done) return self.status;  // a leader wrote our batch

  // Leader: take everything queued so far (our batch included).
  writing_ = true;
  if (options_.group_window_us > 0) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(options_.group_window_us));
    lock.lock();
  }
  std::vector<Waiter*> group;
  group.swap(queue_);
  lock.unlock();

  WriteGroup(group);

  lock.lock();
  for (Waiter* w : group) w->done = true;
  writing_ = false;
  lock.unlock();
  // Wakes the group's callers and whoever queued meanwhile (one becomes the leader).
  cv_.notify_all();
  return self.status;
}

void SqliteStore::WriteGroup(const std::vector<Waiter*>& group) {
  std::lock_guard<std::mutex> lock(db_mu_);
  if (group.size() == 1) {
    group[0]->status = WriteAlone(*group[0]->edits);
    return;
  }
  Db* db = db_.get();
  bool group_ok = true;
  {
    Txn txn(db);
    transactions_.fetch_add(1, std::memory_order_relaxed);
    group_ok = txn.Begin().ok();
    for (size_t i = 0; group_ok && i < group.size(); ++i) {
      Waiter* w = group[i];
      group_ok = db->Exec("SAVEPOINT batch").ok();
      if (!group_ok) break;
      w->status = WriteBatch(*w->edits);
      if (w->status.ok()) {
        group_ok = db->Exec("RELEASE batch").ok();
      } else if (IsRefusal(w->status) && db->InTransaction()) {
        // Undo this batch only; the others in the group go on.
        group_ok = db->Exec("ROLLBACK TO batch").ok() && db->Exec("RELEASE batch").ok();
      } else {
        group_ok = false;
      }
    }
    if (group_ok) group_ok = txn.Commit().ok();
  }  // an unfinished group transaction is rolled back here
  if (group_ok) return;
  // The group's transaction failed as a whole: nothing of it is stored. Each batch
  // gets a transaction of its own, so a batch that cannot be written fails alone.
  for (Waiter* w : group) w->status = WriteAlone(*w->edits);
}

Status SqliteStore::WriteAlone(const std::vector<Edit>& edits) {
  Txn txn(db_.get());
  transactions_.fetch_add(1, std::memory_order_relaxed);
  HACHI_RETURN_IF_ERROR(txn.Begin());
  HACHI_RETURN_IF_ERROR(WriteBatch(edits));
  return txn.Commit();
}

Status SqliteStore::WriteBatch(const std::vector<Edit>& edits) {
  for (const Edit& edit : edits) HACHI_RETURN_IF_ERROR(WriteEdit(edit));
  return Status::Ok();
}

// Each edit is checked by the same ApplyEdit the server uses, on the stored record it
// touches, then written as one small statement.
Status SqliteStore::WriteEdit(const Edit& edit) {
  Db* db = db_.get();
  return std::visit(
      [&](const auto& e) -> Status {
        using E = std::decay_t<decltype(e)>;
        StateImage image;
        if constexpr (std::is_same_v<E, JobSubmitted>) {
          Result<int64_t> last = ReadLastJobId(db);
          if (!last.ok()) return last.status();
          image.last_job_id = *last;
          HACHI_RETURN_IF_ERROR(ReadJob(db, e.record.id, &image));
          HACHI_RETURN_IF_ERROR(CheckEdit(image, edit));
          Result<Stmt> insert =
              db->Prepare("INSERT INTO jobs (id, state, record) VALUES (?1, ?2, ?3)");
          if (!insert.ok()) return insert.status();
          insert->Bind(1, e.record.id)
              .Bind(2, JobStateName(e.record.state))
              .Bind(3, EncodeJobRow(e.record));
          HACHI_RETURN_IF_ERROR(insert->Run());
          Result<Stmt> meta = db->Prepare(
              "INSERT INTO meta (key, value) VALUES ('last_job_id', ?1) "
              "ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)");
          if (!meta.ok()) return meta.status();
          meta->Bind(1, e.record.id);
          return meta->Run();
        } else if constexpr (std::is_same_v<E, TokenIssued> ||
                             std::is_same_v<E, TokenRevoked>) {
          return WriteTokenEdit(db, e);
        } else if constexpr (std::is_same_v<E, NodeUpserted>) {
          HACHI_RETURN_IF_ERROR(CheckEdit(image, edit));
          return WriteNode(db, e.record);
        } else if constexpr (std::is_same_v<E, NodeStateChanged> ||
                             std::is_same_v<E, NodeHealthChanged>) {
          std::string unknown;  // carried over (row_codec.h)
          HACHI_RETURN_IF_ERROR(ReadNode(db, e.name, &image, &unknown));
          HACHI_RETURN_IF_ERROR(ApplyEdit(&image, edit));
          return WriteNode(db, image.nodes.at(e.name), unknown);
        } else {
          const JobId id = EditJobId(e);
          std::string unknown;  // carried over (row_codec.h)
          HACHI_RETURN_IF_ERROR(ReadJob(db, id, &image, &unknown));
          HACHI_RETURN_IF_ERROR(ApplyEdit(&image, edit));
          return WriteJob(db, image.jobs.at(id), unknown);
        }
      },
      edit);
}

StoreStats SqliteStore::stats() const {
  return StoreStats{commits_.load(std::memory_order_relaxed),
                    transactions_.load(std::memory_order_relaxed)};
}

Status SqliteStore::SetMaxPageCountForTesting(int64_t pages) {
  std::lock_guard<std::mutex> lock(db_mu_);
  // 4294967294: SQLite's largest page count, i.e. no cap.
  const int64_t cap = pages > 0 ? pages : 4294967294;
  Result<int64_t> set = db_->QueryInt("PRAGMA max_page_count = " + std::to_string(cap));
  return set.ok() ? Status::Ok() : set.status();
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options) {
  Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace hachi::state
