// libpq (PostgreSQL's client library, Debian's libpq5) opened with dlopen the first time
// a PostgreSQL store is opened, not linked: every `hachi` command is a process of its
// own, and libpq's dependencies (OpenSSL, GSSAPI, LDAP) would cost each of them their
// relocations at start (docs/benchmarks.md, "Process start"). Only `hachi server
// --store postgresql://...` and `hachi admin migrate` load it.
//
// Thread safety: LoadLibpq may be called from any thread; what it returns is immutable
// and lives until exit (core/dynamic_library.h).
#pragma once

#include <libpq-fe.h>

#include <string>

#include "core/status.h"

namespace hachi::state {

// The functions Hachi calls, never null once loaded.
struct LibpqApi {
  std::string path;
  decltype(&::PQconnectdbParams) connectdb_params = nullptr;
  decltype(&::PQfinish) finish = nullptr;
  decltype(&::PQstatus) status = nullptr;
  decltype(&::PQerrorMessage) error_message = nullptr;
  decltype(&::PQsetNoticeProcessor) set_notice_processor = nullptr;
  decltype(&::PQexec) exec = nullptr;
  decltype(&::PQexecParams) exec_params = nullptr;
  decltype(&::PQresultStatus) result_status = nullptr;
  decltype(&::PQresultErrorField) result_error_field = nullptr;
  decltype(&::PQresultErrorMessage) result_error_message = nullptr;
  decltype(&::PQclear) clear = nullptr;
  decltype(&::PQntuples) ntuples = nullptr;
  decltype(&::PQgetvalue) getvalue = nullptr;
  decltype(&::PQgetlength) getlength = nullptr;
  decltype(&::PQgetisnull) getisnull = nullptr;
  decltype(&::PQtransactionStatus) transaction_status = nullptr;
  decltype(&::PQhost) host = nullptr;
  decltype(&::PQport) port = nullptr;
  decltype(&::PQdb) db = nullptr;
  decltype(&::PQbackendPID) backend_pid = nullptr;
  decltype(&::PQsendQuery) send_query = nullptr;
  decltype(&::PQgetResult) get_result = nullptr;
  decltype(&::PQsocket) socket = nullptr;
  decltype(&::PQparameterStatus) parameter_status = nullptr;
};

// $HACHI_LIBPQ when set, else libpq.so.5. kUnavailable, naming the package, when it
// cannot be loaded.
Result<const LibpqApi*> LoadLibpq();

}  // namespace hachi::state
