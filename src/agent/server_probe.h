// Whether the server's address refuses connections: the one sign an agent cut off from
// its server can trust that no server is running there (docs/fencing.md "A server
// outage"). A refused connect (TCP RST, or a Unix socket with no listener or no file)
// means the path to the server's host works and nothing listens: that server can count
// no node silent and start no run elsewhere, and a restarted one counts every node's
// silence from its own start. A timeout, an unreachable network or an accepted
// connection that then hangs proves nothing of the kind.
//
// Free function, no state; blocks for at most `timeout_ms` (plus name resolution).
#pragma once

#include <string_view>

namespace hachi::agent {

enum class ProbeResult {
  kRefused,   // nothing listens there (the server is not running)
  kAccepted,  // something listens (the server runs, maybe stalled)
  kNoAnswer,  // timed out, unreachable, or the address could not be used
};

// `server` as api::HttpClient takes it: "http://HOST:PORT", "https://HOST:PORT",
// "HOST:PORT" or "unix:/path".
ProbeResult ProbeServer(std::string_view server, int timeout_ms);

}  // namespace hachi::agent
