// HttpClient: the one HTTP client the CLI and the agents use to reach the server
// (DESIGN.md §2 api/). Addresses: "http://127.0.0.1:8686", "127.0.0.1:8686",
// "https://host:8443" (TLS; the server's certificate checked against the system's CAs or
// the file $HACHI_CA_CERT names), or "unix:/path/to/hachi.sock" (the local socket).
// cpp-httplib stays out of this header.
//
// Several controllers (docs/ha.md): the address may be a comma-separated list. The
// client first asks every one at once who leads (GET /api/v1/health, 1.5 s each: a
// frozen leader holds nothing for its timeout), and again after each pause below. It
// starts at the leader found, else at the one that last answered as leader, and moves
// on to another, trying the request again there, when a connection cannot be made
// (nothing was sent), when a standby answers (503 with X-Hachi-Standby: to the
// X-Hachi-Leader it names when that is one of the list — a standby cannot send a
// client, its token or an agent's secret anywhere else — else the next), or when the
// reply's epoch is below the EpochFloor's (a deposed leader). A request sent and then
// failed (a read error, a timeout) is tried again elsewhere only when it is a GET or a
// HEAD: a POST may have been done. With a list, a round that finds no leader is
// followed by another after a pause (100 ms doubling to 1 s) for at most
// $HACHI_FAILOVER_WAIT_MS (default 20000; 0: no waiting), so a command during a
// failover waits and answers instead of failing.
//
// Thread-safety: one HttpClient per thread (it keeps one connection alive); creating
// one is cheap. Abort may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace hachi::api {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// Where the CLI finds the server: --server, else $HACHI_SERVER, else the Unix socket of a
// server on this machine, else the default TCP address. The sockets, in order:
// /run/hachi/hachi.sock (hachi-server.service's, docs/install.md: the packaged server
// keeps its state directory 0700 and its socket in the runtime directory users may
// reach), /var/lib/hachi/hachi.sock (`hachi server` run by hand: STATE_DIR/hachi.sock of
// the default state dir), ~/.hachi/dev/hachi.sock (`hachi dev`'s).
inline constexpr const char* kDefaultServer = "http://127.0.0.1:8686";
// The header agents send the cluster secret in (server/auth.h).
inline constexpr const char* kClusterSecretHeader = "X-Hachi-Cluster-Secret";
std::string ResolveServer(const std::string& flag);

// A server address taken apart: a Unix socket's path, or a host and port (for the
// client, and for the agent's probe of a silent server, agent/server_probe.h).
struct ServerAddress {
  std::string unix_path;  // "unix:PATH": PATH; empty for TCP
  bool https = false;
  std::string host;  // as written: "10.0.0.1", "ctl.example", "[::1]"
  int port = 0;
  std::string hostport;  // host:port as written
};
// kInvalidArgument, naming what is wrong, for an address it cannot parse.
Result<ServerAddress> ParseServerAddress(std::string_view address);
// The elements of a comma-separated list of addresses (several controllers), spaces
// around each trimmed; one address is a list of one.
std::vector<std::string> SplitServerList(std::string_view list);

class EpochFloor;  // api/epoch_floor.h

class HttpClient {
 public:
  // kInvalidArgument for an address it cannot parse (naming the element of a list).
  static Result<std::unique_ptr<HttpClient>> Create(std::string_view address,
                                                    int timeout_ms = 30000);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const std::string& address() const { return address_; }  // as given (the list)
  // Interrupts a request in progress on another thread, its wait for a leader included
  // (it fails with kUnavailable), and every later one; the only method that may be
  // called concurrently with Request/Call.
  void Abort();
  // Sent with every request (a token's Authorization, an agent's cluster secret).
  void SetHeader(const std::string& name, const std::string& value);
  // Refuse replies of a deposed leader (api/epoch_floor.h); shared by a process's
  // clients.
  void SetEpochFloor(std::shared_ptr<EpochFloor> floor);
  // How long a list waits for a leader ($HACHI_FAILOVER_WAIT_MS by default), and, for
  // tests (no real sleeping), the clock that times the wait and the pause between rounds
  // (null: the real ones).
  void SetFailoverWait(int wait_ms, const Clock* clock = nullptr,
                       std::function<void(int ms)> sleep = nullptr);

  // One request: GET, HEAD, POST or DELETE. kUnavailable when no server answers as the
  // leader (naming each address and what it said).
  Result<HttpResponse> Request(std::string_view method, const std::string& path,
                               const std::string& body = "", int timeout_ms = -1);
  // The body of a 2xx reply; otherwise the error the server's envelope carries.
  Result<std::string> Call(std::string_view method, const std::string& path,
                           const std::string& body = "", int timeout_ms = -1);

 private:
  struct Impl;
  HttpClient(std::string address, std::unique_ptr<Impl> impl);
  std::string address_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hachi::api
