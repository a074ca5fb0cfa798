#include "state/migrate.h"

#include <string>
#include <vector>

#include "state/db.h"

namespace hachi::state {
namespace {

// The tables as both engines lay them out (sql_store.h): name, columns (text or
// integer), the key's columns for the order the verification reads them in.
struct Column {
  const char* name;
  bool text;
};
struct Table {
  const char* name;
  std::vector<Column> columns;
  const char* order;
};

constexpr Column kRecord{"record", true};
constexpr Column kSum{"sum", false};
const Table kTables[] = {
    {"payloads", {{"id", false}, kRecord, kSum}, "id"},
    {"jobs", {{"id", false}, {"state", true}, kRecord, {"payload", false}, kSum}, "id"},
    {"nodes", {{"name", true}, kRecord, kSum}, "name"},
    {"tokens", {{"id", true}, kRecord, kSum}, "id"},
    {"steps",
     {{"job", false}, {"job_start", false}, {"step", false}, kRecord, kSum},
     "job, job_start, step"},
    {"usage", {{"job", false}, {"job_start", false}, kRecord, kSum}, "job, job_start"},
    {"power",
     {{"node", true}, {"since", false}, {"until", false}, {"open", false}, kRecord, kSum},
     "node, since"},
};

std::string Columns(const Table& t) {
  std::string out;
  for (const Column& c : t.columns)
    out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

// Every row of `t`, each column as text (nullopt-free: NULL is "\x01NULL").
Result<std::vector<std::vector<std::string>>> ReadAll(Db* db, const Table& t) {
  Result<Stmt> q =
      db->Prepare("SELECT " + Columns(t) + " FROM " + t.name + " ORDER BY " + t.order);
  if (!q.ok()) return q.status();
  std::vector<std::vector<std::string>> rows;
  for (;;) {
    Result<bool> row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return rows;
    std::vector<std::string> r;
    for (size_t i = 0; i < t.columns.size(); ++i) {
      const int c = static_cast<int>(i);
      r.push_back(q->ColumnIsNull(c) ? std::string("\x01NULL") : q->ColumnText(c));
    }
    rows.push_back(std::move(r));
  }
}

Status CopyTable(Db* to, const Table& t,
                 const std::vector<std::vector<std::string>>& rows) {
  std::string marks;
  for (size_t i = 1; i <= t.columns.size(); ++i) {
    marks += (i > 1 ? ", ?" : "?") + std::to_string(i);
  }
  const std::string sql = "INSERT INTO " + std::string(t.name) + " (" + Columns(t) +
                          ") VALUES (" + marks + ")";
  for (const std::vector<std::string>& r : rows) {
    Result<Stmt> insert = to->Prepare(sql);
    if (!insert.ok()) return insert.status();
    for (size_t i = 0; i < r.size(); ++i) {
      const int c = static_cast<int>(i + 1);
      if (r[i] == "\x01NULL") {
        insert->BindNull(c);
      } else if (t.columns[i].text) {
        insert->Bind(c, std::string_view(r[i]));
      } else {
        insert->Bind(c, static_cast<int64_t>(std::stoll(r[i])));
      }
    }
    HACHI_RETURN_IF_ERROR(insert->Run());
  }
  return Status::Ok();
}

}  // namespace

Result<MigrateReport> CopyState(Db* from, Db* to) {
  for (const Table& t : kTables) {
    Result<int64_t> n = to->QueryInt(std::string("SELECT count(*) FROM ") + t.name);
    if (!n.ok()) return n.status();
    if (*n > 0) {
      return InvalidArgument(to->path() + ": its " + t.name + " table holds " +
                             std::to_string(*n) +
                             " rows; migrate into an empty state only (a new database, "
                             "or a new SQLite file)");
    }
  }
  MigrateReport report;
  std::vector<std::vector<std::vector<std::string>>> copied;
  {
    Txn read(from, Txn::Kind::kRead);
    HACHI_RETURN_IF_ERROR(read.Begin());
    for (const Table& t : kTables) {
      Result<std::vector<std::vector<std::string>>> rows = ReadAll(from, t);
      if (!rows.ok()) return rows.status();
      copied.push_back(std::move(*rows));
    }
    HACHI_RETURN_IF_ERROR(read.Commit());
  }
  Result<int64_t> last = from->QueryInt(
      "SELECT COALESCE((SELECT value FROM meta WHERE key = 'last_job_id'), 0)");
  if (!last.ok()) return last.status();
  {
    Txn write(to);
    HACHI_RETURN_IF_ERROR(write.Begin());
    for (size_t i = 0; i < std::size(kTables); ++i) {
      HACHI_RETURN_IF_ERROR(CopyTable(to, kTables[i], copied[i]));
    }
    Result<Stmt> meta = to->Prepare(
        "INSERT INTO meta (key, value) VALUES ('last_job_id', ?1) ON CONFLICT (key) DO "
        "UPDATE SET value = excluded.value");
    if (!meta.ok()) return meta.status();
    meta->Bind(1, *last);
    HACHI_RETURN_IF_ERROR(meta->Run());
    HACHI_RETURN_IF_ERROR(write.Commit());
  }
  // Read back from the destination: the same rows, in the same order, byte for byte.
  for (size_t i = 0; i < std::size(kTables); ++i) {
    const Table& t = kTables[i];
    Result<std::vector<std::vector<std::string>>> back = ReadAll(to, t);
    if (!back.ok()) return back.status();
    if (*back != copied[i]) {
      size_t k = 0;
      while (k < back->size() && k < copied[i].size() && (*back)[k] == copied[i][k]) ++k;
      const std::string key = k < copied[i].size() ? copied[i][k][0] : "(count)";
      return Internal(to->path() + ": " + t.name + " row " + key +
                      " differs from the source after the copy");
    }
    report.rows[t.name] = static_cast<int64_t>(copied[i].size());
  }
  return report;
}

}  // namespace hachi::state
