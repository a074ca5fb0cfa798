// Db (state/db.h) on a PostgreSQL server through libpq (state/libpq.h): one connection,
// reconnected when lost, and the two things PostgreSQL's store needs beyond SQLite's:
//   - the fence: with an epoch, every write transaction ends, just before COMMIT, with
//       UPDATE hachi_leader SET writes = writes + 1
//        WHERE id = 1 AND epoch = $epoch AND expires_at > clock_timestamp()
//        RETURNING pg_current_xact_id()
//     and is refused (kUnavailable, on_deposed called once) when no row matches: this
//     controller no longer leads, whatever it believes (docs/ha.md). The row lock the
//     UPDATE takes makes a takeover wait for the transaction, so each commits wholly
//     before it or not at all.
//   - a COMMIT whose outcome the connection lost is resolved from the database: once
//     reconnected, pg_xact_status() of the transaction's id says committed or not.
// Reconnecting uses the same connection string, so libpq's multi-host strings with
// target_session_attrs=read-write follow a primary switchover; a server in recovery
// (read-only) counts as unreachable. Bounded by `reconnect_ms`.
//
// Thread-compatible, as every Db.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "state/db.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace hachi::state {

struct LibpqApi;

struct PgDbOptions {
  std::string conninfo;  // libpq's: "postgresql://..." or "host=... dbname=..."
  int64_t epoch = 0;     // 0: no fence
  std::function<void(const Status&)> on_deposed;
  int reconnect_ms = 15000;
  // Bounds each statement (statement_timeout); 0: none.
  int statement_timeout_ms = 0;
  // The server ends this connection's transaction when the client sits in it this long
  // (idle_in_transaction_session_timeout): a frozen leader's row locks do not outlive
  // its lease. 0: never.
  int idle_in_transaction_ms = 0;
};

class PgDb final : public Db {
 public:
  static Result<std::unique_ptr<PgDb>> Open(PgDbOptions options);
  ~PgDb() override;

  Status Exec(std::string_view sql) override;
  Result<Stmt> Prepare(std::string_view sql) override;
  bool InTransaction() const override;
  Status BeginWrite() override;
  Status BeginRead() override;
  Status CommitTxn() override;
  void RollbackTxn() override;
  bool MayRetry() override;
  bool OutcomeUnknown() const override { return unknown_; }
  bool MayRetryRead() override;

  // Bounds each statement of this connection and of those that replace it; 0: none.
  Status SetStatementTimeout(int ms);
  // A working connection (reconnecting within the bound): for callers outside a
  // transaction (the lease row's).
  Status EnsureConnected();
  // The Status for a failed result (null: the connection's error), naming `what`.
  Status Error(PGresult* res, std::string_view what);
  // Runs `sql` with text parameters; the result (caller clears it) or the error.
  Result<PGresult*> Run(const std::string& sql, const std::vector<std::string>& values,
                        const std::vector<bool>& nulls);
  const LibpqApi& api() const { return *api_; }

  // Tests: the server process serving this connection (pg_terminate_backend's target),
  // and a hook run right after COMMIT is sent and before its answer is read.
  int BackendPidForTesting() const;
  int SocketForTesting() const;
  // Commits whose outcome was learned from pg_xact_status.
  int resolved_for_testing() const { return resolved_; }
  // New connections made after the first (any thread may read it).
  int reconnects_for_testing() const { return reconnects_.load(); }
  void SetAfterCommitSentForTesting(std::function<void()> hook) {
    after_commit_sent_ = std::move(hook);
  }

 private:
  PgDb(const LibpqApi* api, PgDbOptions options, PGconn* conn, std::string name);
  Status Connect();
  Status Configure();           // the session's settings, after each connect
  bool ReadOnlyServer() const;  // the connection's server cannot write
  Status CannotWrite();
  // Whether the connection is gone (then the next use reconnects).
  bool Lost() const;
  Status Fence();
  Status ResolveCommit(const Status& commit_error);

  const LibpqApi* const api_;
  const PgDbOptions options_;
  PGconn* conn_;
  std::string xid_;      // the open write transaction's id
  bool broken_ = false;  // a network error: reconnect before the next use
  int statement_timeout_ms_;
  std::string last_state_;     // the SQLSTATE of the last error ("" for none)
  bool retry_ = false;         // the last write may run again (it did not happen)
  bool unknown_ = false;       // the last write's COMMIT has an unknown outcome
  bool committing_ = false;    // the open write transaction's COMMIT was sent
  bool writing_ = false;       // the open transaction is a write (fenced at its end)
  bool deposed_said_ = false;  // on_deposed was called
  int resolved_ = 0;
  std::atomic<int> reconnects_{0};
  std::function<void()> after_commit_sent_;
};

}  // namespace hachi::state
