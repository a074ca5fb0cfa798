// The web dashboard (docs/dashboard.md): its static files, embedded in the binary at
// build time (web/* -> web_assets.cc, src/server/embed_web.cmake), and the read-only
// data it needs beyond the REST API: the history of the queue and utilisation
// (server/history.h) and the tail of a job's log (server/job_log.h).
//
//   GET /                       web/index.html
//   GET /web/FILE               web/FILE; an ETag from the content, 304 on If-None-Match
//   GET /api/v1/history         ?since=T: the samples after T
//   GET /api/v1/jobs/ID/log     ?tail=LINES (default 200, at most 10,000) of the last
//                               ?bytes=N (default 64 KiB, at most 1 MiB); for the job's
//                               owner and admins only
//
// The handlers are WebHandlers' (server/http_handlers.h; defined in web.cc).
//
// Thread-safety: the handlers run on the server's threads and only read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/web_assets.h"

namespace hachi::server {

class HistorySampler;

struct DashboardOptions {
  // Nodes whose job logs are on this machine's disk: hachi dev's in-process agents.
  std::vector<std::string> local_nodes;
  const HistorySampler* history = nullptr;  // not owned; null: an empty history
};

// The embedded file `name` ("app.js"), or null. Exact names only: "../x", "a/b" and
// "" are never found, so no request reaches outside the embedded set.
const WebAsset* FindWebAsset(std::string_view name);

}  // namespace hachi::server
