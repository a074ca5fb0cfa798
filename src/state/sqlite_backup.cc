#include "state/sqlite_backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hachi::state {
namespace {

// Pages per step: 4 MiB at SQLite's default page size. Between steps the source's lock
// is free, so the server's commits wait at most one step.
constexpr int kPagesPerStep = 1024;
// A database written faster than it can be copied would restart the copy for ever.
constexpr int kMaxSteps = 1 << 20;

class Conn {
 public:
  ~Conn() { sqlite3_close_v2(db_); }
  sqlite3* db_ = nullptr;
};

Status SqliteError(sqlite3* db, const std::string& what) {
  return Unavailable(what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

Result<SqliteBackupResult> BackupSqlite(const std::string& from, const std::string& to) {
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0) {
    return NotFound(from + ": " + std::strerror(errno));
  }
  Conn src;
  if (sqlite3_open_v2(from.c_str(), &src.db_, SQLITE_OPEN_READONLY, nullptr) !=
      SQLITE_OK) {
    return SqliteError(src.db_, "cannot open " + from);
  }
  sqlite3_busy_timeout(src.db_, 5000);
  const std::string tmp = to + ".part";
  ::unlink(tmp.c_str());
  // 0600 from the first byte: the state holds every job's script and environment.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  ::close(fd);
  SqliteBackupResult result;
  {
    Conn dst;
    if (sqlite3_open_v2(tmp.c_str(), &dst.db_, SQLITE_OPEN_READWRITE, nullptr) !=
        SQLITE_OK) {
      ::unlink(tmp.c_str());
      return SqliteError(dst.db_, "cannot open " + tmp);
    }
    sqlite3_backup* b = sqlite3_backup_init(dst.db_, "main", src.db_, "main");
    if (b == nullptr) {
      ::unlink(tmp.c_str());
      return SqliteError(dst.db_, "cannot back up " + from);
    }
    int rc = SQLITE_OK;
    int last_remaining = -1;
    for (int i = 0; i < kMaxSteps; ++i) {
      rc = sqlite3_backup_step(b, kPagesPerStep);
      const int remaining = sqlite3_backup_remaining(b);
      // The source changed under the copy: SQLite starts it again from the first page.
      if (last_remaining >= 0 && remaining > last_remaining) ++result.restarts;
      last_remaining = remaining;
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
      if (rc != SQLITE_OK) sqlite3_sleep(10);
    }
    result.pages = sqlite3_backup_pagecount(b);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
      ::unlink(tmp.c_str());
      return Unavailable("backup of " + from + " did not finish: " + sqlite3_errstr(rc));
    }
    // The copy must open and pass SQLite's own check before it replaces anything.
    sqlite3_stmt* check = nullptr;
    std::string verdict = "no answer";
    if (sqlite3_prepare_v2(dst.db_, "PRAGMA quick_check", -1, &check, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(check) == SQLITE_ROW) {
      verdict = reinterpret_cast<const char*>(sqlite3_column_text(check, 0));
    }
    sqlite3_finalize(check);
    if (verdict != "ok") {
      ::unlink(tmp.c_str());
      return Internal("the backup of " + from + " fails quick_check: " + verdict);
    }
    // Readable alone: no -wal beside it to lose.
    char* err = nullptr;
    sqlite3_exec(dst.db_, "PRAGMA journal_mode = DELETE", nullptr, nullptr, &err);
    sqlite3_free(err);
  }
  const int sync = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (sync >= 0) {
    ::fsync(sync);
    ::close(sync);
  }
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Unavailable("cannot rename " + tmp + " to " + to + ": " + why);
  }
  // The rename itself durable: the directory's entry.
  const size_t slash = to.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : to.substr(0, slash + 1);
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  struct stat out {};
  if (::stat(to.c_str(), &out) == 0) result.bytes = out.st_size;
  return result;
}

}  // namespace hachi::state
