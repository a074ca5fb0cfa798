// Whether a browser's request was meant for this server: the defence against DNS
// rebinding. A page of evil.example can point its own name at 127.0.0.1 (or at an
// address inside the firewall) and then read this server as its "same origin", and the
// server would see a loopback peer, which [auth] anonymous_read = "localhost" lets read.
// The browser still sends `Host: evil.example`. So an anonymous request from a browser
// (one that sends Origin or Sec-Fetch-*, as current browsers do on every request) must
// name the server: an IP literal, localhost or *.localhost (which browsers resolve
// themselves), or one of the server's names (this machine's hostname, the listen
// address's host, [auth] browser_hosts). A token or the Unix socket carries its own
// proof, and CLIs, agents and Prometheus send no browser headers: they are not asked.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace httplib {
struct Request;
}  // namespace httplib

namespace hachi::server {

// True when `req` carries what only browsers send: Origin, or a Sec-Fetch-* header.
bool FromBrowser(const httplib::Request& req);

// True when `host_header` ("name", "name:port", "[v6]:port", "1.2.3.4:port") names this
// server: an IP literal, localhost, a name under .localhost, or one of `names`
// (compared without case and without a trailing dot). An empty header names nothing.
bool HostNamesServer(std::string_view host_header, const std::vector<std::string>& names);

}  // namespace hachi::server
