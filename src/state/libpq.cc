#include "state/libpq.h"

#include "core/dynamic_library.h"

namespace hachi::state {
namespace {

const char* Bind(const DynamicLibrary& lib, LibpqApi& api) {
#define HACHI_PQ(field, name) \
  if (!lib.Find(name, api.field)) return name;
  HACHI_PQ(connectdb_params, "PQconnectdbParams")
  HACHI_PQ(finish, "PQfinish")
  HACHI_PQ(status, "PQstatus")
  HACHI_PQ(error_message, "PQerrorMessage")
  HACHI_PQ(set_notice_processor, "PQsetNoticeProcessor")
  HACHI_PQ(exec, "PQexec")
  HACHI_PQ(exec_params, "PQexecParams")
  HACHI_PQ(result_status, "PQresultStatus")
  HACHI_PQ(result_error_field, "PQresultErrorField")
  HACHI_PQ(result_error_message, "PQresultErrorMessage")
  HACHI_PQ(clear, "PQclear")
  HACHI_PQ(ntuples, "PQntuples")
  HACHI_PQ(getvalue, "PQgetvalue")
  HACHI_PQ(getlength, "PQgetlength")
  HACHI_PQ(getisnull, "PQgetisnull")
  HACHI_PQ(transaction_status, "PQtransactionStatus")
  HACHI_PQ(host, "PQhost")
  HACHI_PQ(port, "PQport")
  HACHI_PQ(db, "PQdb")
  HACHI_PQ(backend_pid, "PQbackendPID")
  HACHI_PQ(send_query, "PQsendQuery")
  HACHI_PQ(get_result, "PQgetResult")
  HACHI_PQ(socket, "PQsocket")
  HACHI_PQ(parameter_status, "PQparameterStatus")
#undef HACHI_PQ
  return nullptr;
}

std::string CannotOpen(const std::string& path, const std::string& why) {
  return "cannot load PostgreSQL's client library " + path + " (" + why +
         "): install Debian's libpq5";
}

}  // namespace

Result<const LibpqApi*> LoadLibpq() {
  static auto* loaded = new LoadedLibraries<LibpqApi>(
      Bind, {CannotOpen, "this is not PostgreSQL's libpq, or too old a one"});
  return loaded->Get(ResolveLibraryPath("", "HACHI_LIBPQ", "libpq.so.5"));
}

}  // namespace hachi::state
