#include "state/pg_db.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <utility>

#include "state/libpq.h"

namespace hachi::state {
namespace {

// SQL is written with SQLite's ?1, ?2 (state/db.h); PostgreSQL wants $1, $2. No SQL text
// of the store has a '?' inside a string literal.
std::string Dollars(std::string_view sql) {
  std::string out(sql);
  bool quoted = false;
  for (char& c : out) {
    if (c == '\'') quoted = !quoted;
    if (c == '?') {
      assert(!quoted);
      c = '$';
    }
  }
  return out;
}

// SQLSTATE classes and codes after which the same work may succeed later: the
// connection (08), the server shutting down or starting (57P0x), a read-only server in
// recovery (25006), serialization and deadlock (40001, 40P01), resources (53), a lock
// or statement timeout (55P03, 57014).
bool Transient(std::string_view state) {
  return state.rfind("08", 0) == 0 || state.rfind("57P0", 0) == 0 || state == "25006" ||
         state == "40001" || state == "40P01" || state.rfind("53", 0) == 0 ||
         state == "55P03" || state == "57014";
}

void Quiet(void*, const char*) {}  // NOTICEs ("already exists, skipping") are not ours

// One statement's result, read row by row.
class PgStmt final : public Stmt::Impl {
 public:
  PgStmt(PgDb* db, std::string sql) : db_(db), sql_(std::move(sql)) {}
  ~PgStmt() override {
    if (res_ != nullptr) db_->api().clear(res_);
  }
  void Bind(int index, int64_t value) override {
    Set(index, std::to_string(value), false);
  }
  void Bind(int index, std::string_view text) override {
    Set(index, std::string(text), false);
  }
  void BindNull(int index) override { Set(index, "", true); }
  Result<bool> Step() override {
    if (res_ == nullptr) {
      Result<PGresult*> res = db_->Run(sql_, values_, nulls_);
      if (!res.ok()) return res.status();
      res_ = *res;
      rows_ = db_->api().ntuples(res_);
    }
    return ++row_ < rows_;
  }
  int64_t ColumnInt(int index) const override {
    return std::strtoll(db_->api().getvalue(res_, row_, index), nullptr, 10);
  }
  std::string ColumnText(int index) const override {
    return std::string(db_->api().getvalue(res_, row_, index),
                       static_cast<size_t>(db_->api().getlength(res_, row_, index)));
  }
  bool ColumnIsNull(int index) const override {
    return db_->api().getisnull(res_, row_, index) != 0;
  }

 private:
  void Set(int index, std::string value, bool null) {
    const size_t i = static_cast<size_t>(index - 1);
    if (values_.size() <= i) {
      values_.resize(i + 1);
      nulls_.resize(i + 1, true);
    }
    values_[i] = std::move(value);
    nulls_[i] = null;
  }
  PgDb* const db_;
  const std::string sql_;
  std::vector<std::string> values_;
  std::vector<bool> nulls_;
  PGresult* res_ = nullptr;
  int rows_ = 0;
  int row_ = -1;
};

// A connection by `conninfo` (expanded by libpq: a URI or key=value words, several
// hosts), named "hachi" in pg_stat_activity unless the string names itself.
PGconn* ConnectDb(const LibpqApi& api, const std::string& conninfo) {
  const char* const keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* const values[] = {conninfo.c_str(), "hachi", nullptr};
  return api.connectdb_params(keys, values, /*expand_dbname=*/1);
}

// After an error with this SQLSTATE the connection is of no more use: lost (08), the
// server going down (57P0x), or a server in recovery, which cannot write (25006): the
// next use connects again, and libpq's target_session_attrs=read-write finds the
// primary.
bool Abandon(std::string_view state) {
  return state.rfind("08", 0) == 0 || state.rfind("57P0", 0) == 0 || state == "25006";
}

// "host:port/db" from the live connection: for messages, without the password a URI
// may carry.
std::string ConnName(const LibpqApi& api, PGconn* conn) {
  const char* host = api.host(conn);
  const char* port = api.port(conn);
  const char* db = api.db(conn);
  return std::string("postgresql ") + (host ? host : "?") + ":" + (port ? port : "?") +
         "/" + (db ? db : "?");
}

}  // namespace

Result<std::unique_ptr<PgDb>> PgDb::Open(PgDbOptions options) {
  Result<const LibpqApi*> api = LoadLibpq();
  if (!api.ok()) return api.status();
  PGconn* conn = ConnectDb(**api, options.conninfo);
  if ((*api)->status(conn) != CONNECTION_OK) {
    std::string why = (*api)->error_message(conn);
    (*api)->finish(conn);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Unavailable("cannot connect to the PostgreSQL store: " + why);
  }
  std::string name = ConnName(**api, conn);
  std::unique_ptr<PgDb> db(new PgDb(*api, std::move(options), conn, std::move(name)));
  db->api_->set_notice_processor(conn, Quiet, nullptr);
  HACHI_RETURN_IF_ERROR(db->Configure());
  return db;
}

PgDb::PgDb(const LibpqApi* api, PgDbOptions options, PGconn* conn, std::string name)
    : Db(std::move(name)),
      api_(api),
      options_(std::move(options)),
      conn_(conn),
      statement_timeout_ms_(options_.statement_timeout_ms) {}

PgDb::~PgDb() { api_->finish(conn_); }

bool PgDb::Lost() const { return broken_ || api_->status(conn_) != CONNECTION_OK; }

Status PgDb::Connect() {
  reconnects_.fetch_add(1);
  api_->finish(conn_);
  broken_ = false;
  conn_ = ConnectDb(*api_, options_.conninfo);
  if (api_->status(conn_) != CONNECTION_OK) {
    std::string why = api_->error_message(conn_);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Unavailable(path() + ": cannot reconnect: " + why);
  }
  api_->set_notice_processor(conn_, Quiet, nullptr);
  return Configure();
}

Status PgDb::Configure() {
  if (statement_timeout_ms_ > 0) {
    HACHI_RETURN_IF_ERROR(SetStatementTimeout(statement_timeout_ms_));
  }
  if (options_.idle_in_transaction_ms > 0) {
    HACHI_RETURN_IF_ERROR(Exec("SET idle_in_transaction_session_timeout = " +
                               std::to_string(options_.idle_in_transaction_ms)));
  }
  return Status::Ok();
}

Status PgDb::SetStatementTimeout(int ms) {
  statement_timeout_ms_ = ms;
  return Exec("SET statement_timeout = " + std::to_string(ms));
}

Status PgDb::EnsureConnected() {
  if (!Lost()) return Status::Ok();
  // A restart or a switchover takes seconds: back off from 50 ms to 1 s, within the
  // bound. Waiting only (core/clock.h): real time.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reconnect_ms);
  auto pause = std::chrono::milliseconds(50);
  for (;;) {
    Status s = Connect();
    if (s.ok()) return s;
    if (std::chrono::steady_clock::now() + pause >= deadline) return s;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Status PgDb::Error(PGresult* res, std::string_view what) {
  const char* state = res ? api_->result_error_field(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = res ? api_->result_error_message(res) : api_->error_message(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::string text = path() + ": " + std::string(what.substr(0, 200)) + ": " + msg;
  if (state != nullptr) text += " (SQLSTATE " + std::string(state) + ")";
  // No SQLSTATE: libpq's own error, the network's (a read that failed, a reset); the
  // connection cannot be trusted with the next statement.
  if (state == nullptr || Abandon(state)) broken_ = true;
  last_state_ = state != nullptr ? state : "";
  if (Lost() || state == nullptr || Transient(state)) return Unavailable(std::move(text));
  return Internal(std::move(text));
}

Result<PGresult*> PgDb::Run(const std::string& sql,
                            const std::vector<std::string>& values,
                            const std::vector<bool>& nulls) {
  std::vector<const char*> params(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    params[i] = nulls[i] ? nullptr : values[i].c_str();
  }
  PGresult* res = api_->exec_params(conn_, sql.c_str(), static_cast<int>(params.size()),
                                    nullptr, params.data(), nullptr, nullptr, 0);
  const ExecStatusType st = res ? api_->result_status(res) : PGRES_FATAL_ERROR;
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return res;
  Status s = Error(res, sql);
  if (res) api_->clear(res);
  return s;
}

Status PgDb::Exec(std::string_view sql) {
  const std::string text(sql);
  PGresult* res = api_->exec(conn_, text.c_str());
  const ExecStatusType st = res ? api_->result_status(res) : PGRES_FATAL_ERROR;
  Status s =
      st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK ? Status::Ok() : Error(res, text);
  if (res) api_->clear(res);
  return s;
}

Result<Stmt> PgDb::Prepare(std::string_view sql) {
  return Stmt(std::make_unique<PgStmt>(this, Dollars(sql)));
}

bool PgDb::InTransaction() const {
  const PGTransactionStatusType t = api_->transaction_status(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

Status PgDb::Fence() {
  Result<Stmt> fence = Prepare(
      options_.epoch == 0
          ? "SELECT pg_current_xact_id()::text"
          : "UPDATE hachi_leader SET writes = writes + 1 WHERE id = 1 AND epoch = ?1 AND "
            "expires_at > clock_timestamp() RETURNING pg_current_xact_id()::text");
  if (!fence.ok()) return fence.status();
  if (options_.epoch != 0) fence->Bind(1, options_.epoch);
  Result<bool> row = fence->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    xid_ = fence->ColumnText(0);
    return Status::Ok();
  }
  // Deposed: say by whom, and stop.
  std::string holder = "?";
  int64_t now_epoch = 0;
  Result<Stmt> who = Prepare(
      "SELECT epoch, holder, expires_at > clock_timestamp() FROM hachi_leader WHERE id = "
      "1");
  if (who.ok()) {
    Result<bool> r = who->Step();
    if (r.ok() && *r) {
      now_epoch = who->ColumnInt(0);
      holder = "leader " + (who->ColumnText(1).empty() ? "none" : who->ColumnText(1)) +
               (who->ColumnText(2) == "t" ? "" : ", its lease lapsed");
    }
  }
  Status s =
      Unavailable("this controller is no longer the leader: epoch " +
                  std::to_string(options_.epoch) + " ended (the lease row holds epoch " +
                  std::to_string(now_epoch) + ", " + holder + "); the write was refused");
  (void)Exec("ROLLBACK");
  if (!deposed_said_ && options_.on_deposed) {
    deposed_said_ = true;
    options_.on_deposed(s);
  }
  return s;
}

Status PgDb::BeginWrite() {
  retry_ = false;
  unknown_ = false;
  committing_ = false;
  writing_ = true;
  xid_.clear();
  // A server that cannot write (in recovery, or read-only by default: what libpq's
  // target_session_attrs=read-write refuses too) is waited for as an unreachable one,
  // within the same bound: a promotion takes seconds, and meanwhile libpq may find only
  // the standby. The server reports both settings on every connection (and their
  // changes): no round trip, and known before the transaction's first write.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reconnect_ms);
  auto pause = std::chrono::milliseconds(50);
  for (;;) {
    Status s = EnsureConnected();
    if (!s.ok()) return s;
    last_state_.clear();
    s = ReadOnlyServer() ? CannotWrite() : Exec("BEGIN");
    if (s.ok()) return s;
    if (last_state_ != "25006" || std::chrono::steady_clock::now() + pause >= deadline) {
      if (Lost()) retry_ = EnsureConnected().ok();
      return s;
    }
    std::this_thread::sleep_for(pause);  // waiting only: real time (core/clock.h)
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

bool PgDb::ReadOnlyServer() const {
  for (const char* name : {"in_hot_standby", "default_transaction_read_only"}) {
    const char* value = api_->parameter_status(conn_, name);
    if (value != nullptr && std::string_view(value) == "on") return true;
  }
  return false;
}

// As the server's own refusal of a write would be (SQLSTATE 25006), before any: the
// connection is dropped, so the next try connects again (libpq may find the primary).
Status PgDb::CannotWrite() {
  broken_ = true;
  last_state_ = "25006";
  return Unavailable(path() +
                     ": the server cannot write (in recovery, or "
                     "default_transaction_read_only) (SQLSTATE 25006)");
}

Status PgDb::BeginRead() {
  writing_ = false;
  xid_.clear();
  HACHI_RETURN_IF_ERROR(EnsureConnected());
  return Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

Status PgDb::CommitTxn() {
  // The fence is the transaction's last statement: the lease row is locked only from
  // here to the COMMIT, so a leader frozen in the middle of a transaction does not hold
  // up a takeover (its other row locks end with idle_in_transaction_session_timeout).
  if (Status fenced = writing_ ? Fence() : Status::Ok(); !fenced.ok()) {
    if (Lost()) retry_ = EnsureConnected().ok();
    return fenced;
  }
  committing_ = true;
  Status s;
  if (api_->send_query(conn_, "COMMIT") == 0) {
    s = Error(nullptr, "COMMIT");
  } else {
    if (after_commit_sent_) after_commit_sent_();
    PGresult* last = nullptr;
    while (PGresult* r = api_->get_result(conn_)) {
      if (last) api_->clear(last);
      last = r;
    }
    const ExecStatusType st = last ? api_->result_status(last) : PGRES_FATAL_ERROR;
    s = st == PGRES_COMMAND_OK ? Status::Ok() : Error(last, "COMMIT");
    if (last) api_->clear(last);
  }
  if (s.ok() || xid_.empty() || !Lost()) {
    // A write that failed with its connection still up (a statement's error): the
    // transaction is over, not committed.
    return s;
  }
  return ResolveCommit(s);
}

// The connection went during COMMIT: the transaction may or may not have committed. The
// database knows: ask it, once reconnected, by the transaction's id.
Status PgDb::ResolveCommit(const Status& commit_error) {
  const std::string xid = xid_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reconnect_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!EnsureConnected().ok()) break;
    Result<Stmt> q = Prepare("SELECT pg_xact_status(?1::xid8)");
    if (!q.ok()) break;
    q->Bind(1, xid);
    Result<bool> row = q->Step();
    if (!row.ok()) {
      if (Lost()) continue;
      break;
    }
    const std::string verdict = *row && !q->ColumnIsNull(0) ? q->ColumnText(0) : "";
    if (verdict == "in progress") {
      // The old backend has not yet seen its client go: its COMMIT is still running.
      // Not a verdict yet, so not counted as one (a loaded host sees this often).
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    ++resolved_;
    if (verdict == "committed") return Status::Ok();
    // Aborted, or unknown: nothing of it happened; the same work may run again.
    retry_ = true;
    return Unavailable(commit_error.message() + "; transaction " + xid +
                       " did not commit (" + (verdict.empty() ? "unknown" : verdict) +
                       ")");
  }
  unknown_ = true;
  return Unavailable(commit_error.message() + "; whether transaction " + xid +
                     " committed could not be learned within " +
                     std::to_string(options_.reconnect_ms) + " ms");
}

void PgDb::RollbackTxn() {
  if (!Lost()) (void)Exec("ROLLBACK");
}

bool PgDb::MayRetry() {
  // Lost during COMMIT, ResolveCommit decided: retry_ when it did not commit, never
  // when the outcome is unknown. Lost before COMMIT was sent: nothing happened.
  if (retry_) return true;
  if (!unknown_ && !committing_ && Lost()) retry_ = EnsureConnected().ok();
  return retry_;
}

bool PgDb::MayRetryRead() { return Lost() && EnsureConnected().ok(); }

int PgDb::BackendPidForTesting() const { return api_->backend_pid(conn_); }
int PgDb::SocketForTesting() const { return api_->socket(conn_); }

}  // namespace hachi::state
