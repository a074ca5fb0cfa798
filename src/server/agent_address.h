// The address a node is known by: what the other nodes of a gang connect to
// (MASTER_ADDR is the rank-0 node's). An agent may give one (`hachi agent --address`);
// by default the server takes the source address of the agent's registration as it sees
// it, which is the address that reaches the server and so, on a flat cluster network,
// the other nodes too (every agent registering as 127.0.0.1 made every gang's
// MASTER_ADDR 127.0.0.1).
//
// A free function on plain strings; thread-safe.
#pragma once

#include <string>

#include "core/status.h"

namespace hachi::server {

// The address `node` is to be known by, from the one its agent gave (`given`, "" for
// none) and the peer address of its connection (`peer`: as the connection layer writes
// it, e.g. "10.79.0.3" or "::ffff:10.79.0.3"; "" or anything that is not an IP address
// for a Unix-socket peer or an in-process caller).
//  - nothing given: the peer's address (an IPv4-mapped IPv6 one as plain IPv4); with no
//    peer address, 127.0.0.1 (the same host: `hachi dev`, the Unix socket);
//  - given: an IPv4 or IPv6 address, or a host name (RFC 1123 syntax; not resolved
//    here — the nodes resolve it, with their resolver, when they connect, and a lookup
//    here would hold a registration on DNS);
//  - refused (kInvalidArgument, naming the node, what it gave and where it connects
//    from): anything else; an unspecified address (0.0.0.0, ::); a loopback address or
//    "localhost" from a peer that is not loopback, which no other node could reach.
Result<std::string> AgentAddress(const std::string& node, const std::string& given,
                                 const std::string& peer);

}  // namespace hachi::server
