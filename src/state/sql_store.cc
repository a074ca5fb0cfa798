#include "state/sql_store.h"

#include <chrono>
#include <map>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>

#include "state/db.h"
#include "state/row_codec.h"
#include "state/sql_rows.h"

namespace hachi::state {

std::string StepRowKey(const StepKey& k) {
  return std::to_string(k.job) + "." + std::to_string(k.step) + "@" +
         std::to_string(k.job_start);
}

int64_t RowSum(std::string_view key, std::string_view record) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::string_view text) {
    for (const char c : text) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  };
  mix(key);
  mix(std::string_view("\0", 1));
  mix(record);
  return static_cast<int64_t>(h);
}

namespace sql {

static Status SumError(Db* db, std::string_view table, std::string_view key,
                       bool missing) {
  return Internal(
      db->path() + ": " + std::string(table) + " row " + std::string(key) +
      (missing ? ": has no checksum" : ": its checksum does not match its record") +
      " (edited outside hachi, or damaged); restore the file from a backup, or "
      "start once with --accept-edited-rows to keep the row as it is");
}

// Checks column `sum` (at `sum_index`) of the current row against `key` and `record`.
Status CheckSum(Db* db, const Stmt& stmt, int sum_index, std::string_view table,
                std::string_view key, std::string_view record) {
  if (stmt.ColumnIsNull(sum_index)) return SumError(db, table, key, true);
  if (stmt.ColumnInt(sum_index) != RowSum(key, record)) {
    return SumError(db, table, key, false);
  }
  return Status::Ok();
}

Status RowError(Db* db, std::string_view table, std::string_view key, const Status& s) {
  std::string message = db->path() + ": " + std::string(table) + " row " +
                        std::string(key) + ": " + s.message();
  return s.code() == StatusCode::kInvalidArgument ? InvalidArgument(std::move(message))
                                                  : Internal(std::move(message));
}

}  // namespace sql

using sql::CheckSum;
using sql::Reading;
using sql::RowError;
using sql::WriteTxn;

namespace {

// Gives every row whose checksum is missing or wrong the one its record has; `resealed`
// gets "table row key" for each (rows of an older layout, before checksums, are not
// named: `name_missing` false). In the caller's transaction.

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
// `payload_ref`: the payloads row the stored row names (row_codec.h), kept by a rewrite.
Status ReadJob(Db* db, JobId id, StateImage* image, std::string* unknown = nullptr,
               JobId* payload_ref = nullptr) {
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
  if (payload_ref) *payload_ref = job->payload_ref;
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
Status WriteJob(Db* db, const JobRecord& job, std::string_view unknown,
                JobId payload_ref) {
  Result<Stmt> stmt =
      db->Prepare("UPDATE jobs SET state = ?2, record = ?3, sum = ?4 WHERE id = ?1");
  if (!stmt.ok()) return stmt.status();
  const std::string record = EncodeJobRow(job, unknown, payload_ref);
  stmt->Bind(1, job.id)
      .Bind(2, JobStateName(job.state))
      .Bind(3, record)
      .Bind(4, RowSum(std::to_string(job.id), record));
  return stmt->Run();
}

// An array's script, environment and argv, once (row `array_id` of payloads): written
// with the array's first task, in the transaction that writes the tasks.
Status WritePayload(Db* db, JobId array_id, const JobPayload& payload) {
  Result<Stmt> exists = db->Prepare("SELECT 1 FROM payloads WHERE id = ?1");
  if (!exists.ok()) return exists.status();
  exists->Bind(1, array_id);
  Result<bool> found = exists->Step();
  if (!found.ok()) return found.status();
  if (*found) return Status::Ok();
  Result<Stmt> insert =
      db->Prepare("INSERT INTO payloads (id, record, sum) VALUES (?1, ?2, ?3)");
  if (!insert.ok()) return insert.status();
  const std::string record = EncodePayloadRow(payload);
  insert->Bind(1, array_id)
      .Bind(2, record)
      .Bind(3, RowSum(std::to_string(array_id), record));
  return insert->Run();
}

// Reads payloads row `id` once per Load, shared by the tasks that name it.
Result<std::shared_ptr<const JobPayload>> LoadPayload(Db* db, JobId id,
                                                      PayloadCache* cache) {
  if (auto it = cache->rows.find(id); it != cache->rows.end()) return it->second;
  Result<Stmt> stmt = db->Prepare("SELECT record, sum FROM payloads WHERE id = ?1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  const std::string key = std::to_string(id);
  if (!*row) return Internal(db->path() + ": payloads row " + key + " is missing");
  const std::string record = stmt->ColumnText(0);
  HACHI_RETURN_IF_ERROR(CheckSum(db, *stmt, 1, "payloads", key, record));
  Result<Row<JobPayload>> payload = DecodePayloadRow(record);
  if (!payload.ok()) return RowError(db, "payloads", key, payload.status());
  auto shared = std::make_shared<const JobPayload>(std::move(payload->record));
  cache->rows[id] = shared;
  return std::shared_ptr<const JobPayload>(std::move(shared));
}

// The payload of a job whose row names payloads row `ref`; `in_row`: what the row holds
// itself (Row::payload_ref): nothing, or, written before jobs version 8, its argv.
Result<std::shared_ptr<const JobPayload>> JoinPayload(
    Db* db, JobId ref, const std::shared_ptr<const JobPayload>& in_row,
    PayloadCache* cache) {
  Result<std::shared_ptr<const JobPayload>> stored = LoadPayload(db, ref, cache);
  if (!stored.ok() || in_row == nullptr || in_row->argv.empty()) return stored;
  std::shared_ptr<const JobPayload>& joined = cache->joined[ref];
  if (joined == nullptr || joined->argv != in_row->argv) {
    joined = std::make_shared<const JobPayload>(
        JobPayload{(*stored)->script, (*stored)->env, in_row->argv});
  }
  return joined;
}

Status WriteNode(Db* db, const NodeRecord& node, std::string_view unknown = "") {
  Result<Stmt> stmt = db->Prepare(
      "INSERT INTO nodes (name, record, sum) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (name) DO UPDATE SET record = excluded.record, sum = excluded.sum");
  if (!stmt.ok()) return stmt.status();
  const std::string record = EncodeNodeRow(node, unknown);
  stmt->Bind(1, node.name).Bind(2, record).Bind(3, RowSum(node.name, record));
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
  Result<Stmt> stmt =
      db->Prepare("INSERT INTO tokens (id, record, sum) VALUES (?1, ?2, ?3)");
  if (!stmt.ok()) return stmt.status();
  const std::string record = EncodeTokenRow(e.record);
  stmt->Bind(1, e.record.id).Bind(2, record).Bind(3, RowSum(e.record.id, record));
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

// Reads step `key` into image->steps (absent: left out, CheckEdit reports it), and the
// row's fields this binary does not know into *unknown.
Status ReadStep(Db* db, const StepKey& key, StateImage* image, std::string* unknown) {
  Result<Stmt> stmt = db->Prepare(
      "SELECT record FROM steps WHERE job = ?1 AND job_start = ?2 AND step = ?3");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, key.job).Bind(2, key.job_start).Bind(3, int64_t{key.step});
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Ok();
  Result<Row<StepRecord>> step = DecodeStepRow(stmt->ColumnText(0));
  if (!step.ok()) return RowError(db, "steps", StepRowKey(key), step.status());
  image->steps[key] = std::move(step->record);
  *unknown = std::move(step->unknown);
  return Status::Ok();
}

// The last step of the run (job, job_start), if any, into image->steps: all a
// StepStarted is checked against (NextStepNumber), however many steps the run has.
Status ReadLastStep(Db* db, JobId job, Time job_start, StateImage* image) {
  Result<Stmt> stmt =
      db->Prepare("SELECT max(step) FROM steps WHERE job = ?1 AND job_start = ?2");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job).Bind(2, job_start);
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row || stmt->ColumnIsNull(0)) return Status::Ok();
  const StepKey key{job, job_start, static_cast<int>(stmt->ColumnInt(0))};
  std::string unknown;
  return ReadStep(db, key, image, &unknown);
}

// Inserts (a new step) or replaces the record of step `s`.
Status WriteStep(Db* db, const StepRecord& s, bool insert,
                 std::string_view unknown = "") {
  Result<Stmt> stmt =
      db->Prepare(insert ? "INSERT INTO steps (job, job_start, step, record, sum) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)"
                         : "UPDATE steps SET record = ?4, sum = ?5 "
                           "WHERE job = ?1 AND job_start = ?2 AND step = ?3");
  if (!stmt.ok()) return stmt.status();
  const std::string record = EncodeStepRow(s, unknown);
  stmt->Bind(1, s.job)
      .Bind(2, s.job_start)
      .Bind(3, int64_t{s.step})
      .Bind(4, record)
      .Bind(5, RowSum(StepRowKey({s.job, s.job_start, s.step}), record));
  return stmt->Run();
}

JobId EditJobId(const JobStarted& e) { return e.id; }
JobId EditJobId(const JobEnded& e) { return e.id; }
JobId EditJobId(const JobRequeued& e) { return e.id; }
JobId EditJobId(const JobHeld& e) { return e.id; }
JobId EditJobId(const JobUpdated& e) { return e.id; }

// Each edit is checked by the same ApplyEdit the server uses, on the stored record it
// touches, then written as one small statement.
Status WriteEdit(Db* db, const Edit& edit) {
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
          // An array's tasks name one payloads row (its first task's id) instead of
          // each holding the script, environment and argv.
          const JobSpec& spec = e.record.spec;
          const JobId payload_ref =
              spec.array_job_id != 0 && spec.payload != nullptr ? spec.array_job_id : 0;
          std::string record;
          if (payload_ref != 0) {
            HACHI_RETURN_IF_ERROR(WritePayload(db, payload_ref, *spec.payload));
            JobRecord row = e.record;  // copies the payload's pointer, not its text
            row.spec.payload = nullptr;
            record = EncodeJobRow(row, "", payload_ref);
          } else {
            record = EncodeJobRow(e.record);
          }
          Result<Stmt> insert = db->Prepare(
              "INSERT INTO jobs (id, state, record, payload, sum) "
              "VALUES (?1, ?2, ?3, ?4, ?5)");
          if (!insert.ok()) return insert.status();
          insert->Bind(1, e.record.id)
              .Bind(2, JobStateName(e.record.state))
              .Bind(3, record);
          if (payload_ref != 0) {
            insert->Bind(4, payload_ref);
          } else {
            insert->BindNull(4);
          }
          insert->Bind(5, RowSum(std::to_string(e.record.id), record));
          HACHI_RETURN_IF_ERROR(insert->Run());
          Result<Stmt> meta = db->Prepare(
              "INSERT INTO meta (key, value) VALUES ('last_job_id', ?1) "
              "ON CONFLICT (key) DO UPDATE SET value = CASE WHEN excluded.value > "
              "meta.value THEN excluded.value ELSE meta.value END");
          if (!meta.ok()) return meta.status();
          meta->Bind(1, e.record.id);
          return meta->Run();
        } else if constexpr (std::is_same_v<E, TokenIssued> ||
                             std::is_same_v<E, TokenRevoked>) {
          return WriteTokenEdit(db, e);
        } else if constexpr (std::is_same_v<E, StepStarted>) {
          const StepRecord& r = e.record;
          HACHI_RETURN_IF_ERROR(ReadJob(db, r.job, &image));
          HACHI_RETURN_IF_ERROR(ReadLastStep(db, r.job, r.job_start, &image));
          HACHI_RETURN_IF_ERROR(CheckEdit(image, edit));
          return WriteStep(db, r, /*insert=*/true);
        } else if constexpr (std::is_same_v<E, StepEnded>) {
          std::string unknown;  // carried over (row_codec.h)
          HACHI_RETURN_IF_ERROR(ReadStep(db, e.key, &image, &unknown));
          HACHI_RETURN_IF_ERROR(ApplyEdit(&image, edit));
          return WriteStep(db, image.steps.at(e.key), /*insert=*/false, unknown);
        } else if constexpr (std::is_same_v<E, NodeUpserted>) {
          HACHI_RETURN_IF_ERROR(CheckEdit(image, edit));
          return WriteNode(db, e.record);
        } else if constexpr (std::is_same_v<E, NodeStateChanged> ||
                             std::is_same_v<E, NodeHealthChanged> ||
                             std::is_same_v<E, NodeBurnInChanged>) {
          std::string unknown;  // carried over (row_codec.h)
          HACHI_RETURN_IF_ERROR(ReadNode(db, e.name, &image, &unknown));
          HACHI_RETURN_IF_ERROR(ApplyEdit(&image, edit));
          return WriteNode(db, image.nodes.at(e.name), unknown);
        } else {
          const JobId id = EditJobId(e);
          std::string unknown;    // carried over (row_codec.h)
          JobId payload_ref = 0;  // an array task's payload stays where it is
          HACHI_RETURN_IF_ERROR(ReadJob(db, id, &image, &unknown, &payload_ref));
          HACHI_RETURN_IF_ERROR(ApplyEdit(&image, edit));
          return WriteJob(db, image.jobs.at(id), unknown, payload_ref);
        }
      },
      edit);
}

Status WriteBatch(Db* db, const std::vector<Edit>& edits) {
  for (const Edit& edit : edits) HACHI_RETURN_IF_ERROR(WriteEdit(db, edit));
  return Status::Ok();
}

}  // namespace

struct SqlStore::Waiter {
  const std::vector<Edit>* edits;
  Status status;
  bool done = false;  // guarded by mu_
};

SqlStore::SqlStore(std::unique_ptr<Db> db, std::string file, int group_window_us,
                   std::function<Result<StateImage>()> first_load,
                   std::function<void(const std::string&)> warn)
    : file_(std::move(file)),
      group_window_us_(group_window_us),
      warn_(std::move(warn)),
      db_(std::move(db)),
      first_load_(std::move(first_load)) {}

SqlStore::~SqlStore() = default;

Result<std::shared_ptr<const JobPayload>> SqlStore::LoadPayload(JobId id) {
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  return Reading<std::shared_ptr<const JobPayload>>(
      db, [db, id]() -> Result<std::shared_ptr<const JobPayload>> {
        StateImage one;
        JobId ref = 0;
        HACHI_RETURN_IF_ERROR(ReadJob(db, id, &one, nullptr, &ref));
        auto it = one.jobs.find(id);
        if (it == one.jobs.end()) return NotFound("no job " + std::to_string(id));
        if (ref == 0) return it->second.spec.payload;
        PayloadCache cache;
        return JoinPayload(db, ref, it->second.spec.payload, &cache);
      });
}

namespace {

// Every table, in one read transaction (one consistent view).
Result<StateImage> LoadImage(Db* db) {
  Txn txn(db, Txn::Kind::kRead);
  HACHI_RETURN_IF_ERROR(txn.Begin());
  StateImage image;
  PayloadCache payloads;
  Result<int64_t> rows = ReadImageRows(db, -1, &image, &payloads);
  if (!rows.ok()) return rows.status();
  HACHI_RETURN_IF_ERROR(txn.Commit());
  return image;
}

}  // namespace

Result<int64_t> ReadImageRows(Db* db, int64_t since_tx, StateImage* image,
                              PayloadCache* payloads) {
  int64_t rows = 0;
  Result<int64_t> last = ReadLastJobId(db);
  if (!last.ok()) return last.status();
  image->last_job_id = std::max(image->last_job_id, *last);
  // Everything in key order, or only the rows written by transactions from since_tx on.
  const bool all = since_tx < 0;
  auto select = [&](const std::string& columns, const std::string& table,
                    const std::string& order) -> Result<Stmt> {
    Result<Stmt> stmt =
        db->Prepare("SELECT " + columns + " FROM " + table +
                    (all ? " ORDER BY " + order : std::string(" WHERE tx >= ?1")));
    if (stmt.ok() && !all) stmt->Bind(1, since_tx);
    return stmt;
  };

  Result<Stmt> jobs = select("id, record, sum", "jobs", "id");
  if (!jobs.ok()) return jobs.status();
  for (;;) {
    Result<bool> row = jobs->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ++rows;
    const JobId id = jobs->ColumnInt(0);
    const std::string key = std::to_string(id);
    const std::string record = jobs->ColumnText(1);
    HACHI_RETURN_IF_ERROR(CheckSum(db, *jobs, 2, "jobs", key, record));
    Result<Row<JobRecord>> job = DecodeJobRow(record);
    if (!job.ok()) return RowError(db, "jobs", key, job.status());
    if (job->payload_ref != 0) {
      Result<std::shared_ptr<const JobPayload>> payload =
          JoinPayload(db, job->payload_ref, job->record.spec.payload, payloads);
      if (!payload.ok()) return payload.status();
      job->record.spec.payload = std::move(*payload);
    }
    if (job->record.id != id) {
      return Internal(db->path() + ": jobs row " + std::to_string(id) + " holds job " +
                      std::to_string(job->record.id));
    }
    if (id > image->last_job_id) image->last_job_id = id;
    image->jobs.insert_or_assign(id, std::move(job->record));
  }

  Result<Stmt> nodes = select("name, record, sum", "nodes", "name");
  if (!nodes.ok()) return nodes.status();
  for (;;) {
    Result<bool> row = nodes->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ++rows;
    std::string name = nodes->ColumnText(0);
    const std::string record = nodes->ColumnText(1);
    HACHI_RETURN_IF_ERROR(CheckSum(db, *nodes, 2, "nodes", name, record));
    Result<Row<NodeRecord>> node = DecodeNodeRow(record);
    if (!node.ok()) return RowError(db, "nodes", name, node.status());
    image->nodes.insert_or_assign(std::move(name), std::move(node->record));
  }

  Result<Stmt> tokens = select("id, record, sum", "tokens", "id");
  if (!tokens.ok()) return tokens.status();
  for (;;) {
    Result<bool> row = tokens->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ++rows;
    std::string id = tokens->ColumnText(0);
    const std::string record = tokens->ColumnText(1);
    HACHI_RETURN_IF_ERROR(CheckSum(db, *tokens, 2, "tokens", id, record));
    Result<Row<TokenRecord>> token = DecodeTokenRow(record);
    if (!token.ok()) return RowError(db, "tokens", id, token.status());
    image->tokens.insert_or_assign(std::move(id), std::move(token->record));
  }

  Result<Stmt> steps =
      select("job, job_start, step, record, sum", "steps", "job, job_start, step");
  if (!steps.ok()) return steps.status();
  for (;;) {
    Result<bool> row = steps->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    ++rows;
    const StepKey key{steps->ColumnInt(0), steps->ColumnInt(1),
                      static_cast<int>(steps->ColumnInt(2))};
    const std::string name = StepRowKey(key);
    const std::string record = steps->ColumnText(3);
    HACHI_RETURN_IF_ERROR(CheckSum(db, *steps, 4, "steps", name, record));
    Result<Row<StepRecord>> step = DecodeStepRow(record);
    if (!step.ok()) return RowError(db, "steps", name, step.status());
    const StepRecord& st = step->record;
    if (StepKey{st.job, st.job_start, st.step} != key) {
      return Internal(db->path() + ": steps row " + name + " holds step " +
                      StepRowKey({st.job, st.job_start, st.step}));
    }
    image->steps.insert_or_assign(key, std::move(step->record));
  }
  return rows;
}

Result<StateImage> SqlStore::Load() {
  MutexLock lock(&db_mu_);
  if (first_load_) {
    // A standby's followed image, brought up to date: the rows written since it last
    // looked, not every row. If it cannot be had, every row, as always.
    const std::function<Result<StateImage>()> first = std::move(first_load_);
    first_load_ = nullptr;
    Result<StateImage> image = first();
    if (image.ok()) return image;
    if (warn_) warn_("reading every row instead: " + image.status().message());
  }
  Db* db = db_.get();
  return Reading<StateImage>(db, [db] { return LoadImage(db); });
}

Status SqlStore::Commit(const std::vector<Edit>& edits) {
  commits_.fetch_add(1, std::memory_order_relaxed);
  if (edits.empty()) return Status::Ok();
  CommitTimer timer(this);  // the wait for a group leader counts: the caller waits it
  Waiter self{&edits, Status::Ok()};
  MutexLock lock(&mu_);
  queue_.push_back(&self);
  while (!self.done && writing_) cv_.Wait();
  if (self.done) return self.status;  // a leader wrote our batch

  // Leader: take everything queued so far (our batch included).
  writing_ = true;
  if (group_window_us_ > 0) {
    lock.Unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(group_window_us_));
    lock.Lock();
  }
  std::vector<Waiter*> group;
  group.swap(queue_);
  lock.Unlock();

  WriteGroup(group);

  lock.Lock();
  for (Waiter* w : group) w->done = true;
  writing_ = false;
  lock.Unlock();
  // Wakes the group's callers and whoever queued meanwhile (one becomes the leader).
  cv_.SignalAll();
  return self.status;
}

size_t SqlStore::QueuedForTesting() {
  MutexLock lock(&mu_);
  return queue_.size();
}

void SqlStore::WriteGroup(const std::vector<Waiter*>& group) {
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  auto alone = [this, db](const std::vector<Edit>& edits) {
    return WriteTxn(db, &transactions_, [db, &edits] { return WriteBatch(db, edits); });
  };
  if (group.size() == 1) {
    group[0]->status = alone(*group[0]->edits);
    return;
  }
  Status failed;  // what stopped the group's transaction
  {
    Txn txn(db);
    transactions_.fetch_add(1, std::memory_order_relaxed);
    failed = txn.Begin();
    for (size_t i = 0; failed.ok() && i < group.size(); ++i) {
      Waiter* w = group[i];
      failed = db->Exec("SAVEPOINT batch");
      if (!failed.ok()) break;
      w->status = WriteBatch(db, *w->edits);
      if (w->status.ok()) {
        failed = db->Exec("RELEASE batch");
      } else if (IsRefusal(w->status) && db->InTransaction()) {
        // Undo this batch only; the others in the group go on.
        failed = db->Exec("ROLLBACK TO batch");
        if (failed.ok()) failed = db->Exec("RELEASE batch");
      } else {
        failed = w->status;
      }
    }
    if (failed.ok()) failed = txn.Commit();
  }  // an unfinished group transaction is rolled back here
  if (failed.ok()) return;
  if (db->OutcomeUnknown()) {
    // The group may be stored: running its batches again could store them twice.
    for (Waiter* w : group) {
      if (w->status.ok()) w->status = failed;
    }
    return;
  }
  // The group's transaction failed as a whole: nothing of it is stored. Each batch
  // gets a transaction of its own, so a batch that cannot be written fails alone.
  for (Waiter* w : group) w->status = alone(*w->edits);
}

StoreStats SqlStore::stats() const {
  return StoreStats{commits_.load(std::memory_order_relaxed),
                    transactions_.load(std::memory_order_relaxed)};
}

Status SqlStore::SetMaxPageCountForTesting(int64_t pages) {
  MutexLock lock(&db_mu_);
  // 4294967294: SQLite's largest page count, i.e. no cap.
  const int64_t cap = pages > 0 ? pages : 4294967294;
  Result<int64_t> set = db_->QueryInt("PRAGMA max_page_count = " + std::to_string(cap));
  return set.ok() ? Status::Ok() : set.status();
}

}  // namespace hachi::state
