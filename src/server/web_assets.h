// The dashboard's files (web/*) compiled into the binary by src/server/embed_web.cmake.
// Read-only data, thread-safe; server/web.h looks them up and serves them.
#pragma once

#include <span>
#include <string_view>

namespace hachi::server {

struct WebAsset {
  std::string_view name;          // "app.js": the file's name in web/
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view etag;          // quoted, from the content's SHA-256: "\"1f2e...\""
  std::string_view body;
};

namespace internal {
// Sorted by name (the generated web_assets.cc).
std::span<const WebAsset> EmbeddedWebAssets();
}  // namespace internal

}  // namespace hachi::server
