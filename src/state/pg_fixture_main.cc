// The ctest fixture hachi_postgres (state/pg_testing.h): one PostgreSQL for every case
// of the test binaries that require it, in a directory CMake names.
//
//   hachi_pg_fixture start DIR   stops and removes what an interrupted run left in DIR,
//                                then starts a server there (socket only, port 5432)
//                                and makes DIR/template, the data directory the cases'
//                                own servers copy instead of running initdb
//   hachi_pg_fixture stop DIR    stops it and removes DIR
//
// Without PostgreSQL (or with HACHI_NO_POSTGRES=1) `start` succeeds doing nothing: each
// case then says why itself (or skips), and the SQLite cases still run.
#include <filesystem>
#include <iostream>
#include <string>

#include "state/pg_testing.h"

namespace {

using hachi::state::testing::kSharedPostgresPort;
using hachi::state::testing::ScratchPostgres;

void StopAndRemove(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return;
  auto left = ScratchPostgres::Attach(dir, kSharedPostgresPort);
  left->Kill();  // its databases are thrown away: no checkpoint
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: hachi_pg_fixture start|stop DIR\n";
    return 2;
  }
  const std::string command = argv[1];
  const std::string dir = argv[2];
  if (command == "stop") {
    StopAndRemove(dir);
    return 0;
  }
  if (command != "start") {
    std::cerr << "hachi_pg_fixture: start or stop, not " << command << "\n";
    return 2;
  }
  StopAndRemove(dir);
  if (hachi::state::testing::SkipPostgres()) {
    std::cout << "HACHI_NO_POSTGRES=1: no shared PostgreSQL\n";
    return 0;
  }
  if (const std::string missing = hachi::state::testing::PostgresMissing();
      !missing.empty()) {
    std::cout << missing << "\n";
    return 0;
  }
  ScratchPostgres::Options o;
  o.dir = dir;
  o.port = kSharedPostgresPort;
  ScratchPostgres server(o);
  if (!server.ok()) {
    std::cerr << server.error() << "\n";
    return 1;
  }
  if (!server.MakeTemplate()) {
    std::cerr << "hachi_pg_fixture: no template data directory in " << dir
              << " (each server runs initdb)\n";
  }
  server.Release();
  std::cout << "PostgreSQL for the tests: " << server.conninfo() << "\n";
  return 0;
}
