#include "api/submit_checks.h"

#include <string>
#include <string_view>

#include "api/container_image.h"
#include "api/request_limits.h"

namespace hachi::api {
namespace {

bool HasDotDot(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

Status CheckPath(std::string_view field, const std::string& path, bool must_be_absolute) {
  const std::string f(field);
  if (path.size() > kMaxPathBytes) {
    return InvalidArgument(f + ": " + std::to_string(path.size()) +
                           " characters; at most " + std::to_string(kMaxPathBytes));
  }
  if (path.find('\0') != std::string::npos || path.find('\n') != std::string::npos) {
    return InvalidArgument(f + ": a path may not hold a NUL or a newline");
  }
  if (must_be_absolute && (path.empty() || path[0] != '/')) {
    return InvalidArgument(f + ": '" + path + "' is not an absolute path");
  }
  if (HasDotDot(path)) {
    return InvalidArgument(f + ": '" + path +
                           "' has a '..' component; give the path without it");
  }
  return Status::Ok();
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    if (c == '=' || c == '\0' || c == '\n') return false;
  }
  return true;
}

// The pipeline's rows: a name (what the step is about) and the check.
struct SubmitCheck {
  const char* name;
  Status (*check)(const SubmitRequest&);
};
constexpr SubmitCheck kSubmitChecks[] = {
    // Sizes first: the later checks walk the request's lists and strings.
    {"sizes and ranges", [](const SubmitRequest& r) { return CheckSubmitLimits(r); }},
    {"job spec", [](const SubmitRequest& r) { return CheckJobSpec(r.spec); }},
};

}  // namespace

Status CheckJobSpec(const state::JobSpec& spec) {
  // An empty workdir runs in "/" (agent/launcher.cc), which needs no checking.
  if (!spec.workdir.empty()) {
    HACHI_RETURN_IF_ERROR(CheckPath("workdir", spec.workdir, /*must_be_absolute=*/true));
  }
  // Relative output paths are under workdir ("/" when it is empty), so absolute once
  // joined; ".." is refused in either kind so that the joined path stays below workdir.
  HACHI_RETURN_IF_ERROR(CheckPath("stdout", spec.stdout_path, false));
  HACHI_RETURN_IF_ERROR(CheckPath("stderr", spec.stderr_path, false));
  // %x puts the name into the output path: it must stay one file name.
  if (spec.name.size() > 256 || spec.name.find('/') != std::string::npos ||
      spec.name == "." || spec.name == ".." ||
      spec.name.find('\0') != std::string::npos) {
    return InvalidArgument(
        "name: '" + spec.name.substr(0, 64) +
        "' cannot be a file name (no '/', not '.' or '..', at most 256 "
        "characters)");
  }
  if (spec.env().size() > 10000) {
    return InvalidArgument("env: " + std::to_string(spec.env().size()) +
                           " variables; at most 10000");
  }
  size_t env_bytes = 0;
  for (const auto& [name, value] : spec.env()) {
    if (!IsEnvName(name)) {
      return InvalidArgument("env: '" + name.substr(0, 64) +
                             "' is not a variable name (no '=', NUL or newline, 1-256 "
                             "characters)");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("env: " + name + " holds a NUL byte");
    }
    env_bytes += name.size() + value.size() + 2;
  }
  // Linux refuses an exec whose arguments and environment pass a few MB (ARG_MAX):
  // better said now than as a failed launch.
  size_t argv_bytes = 0;
  for (const std::string& a : spec.argv()) argv_bytes += a.size() + 1;
  if (env_bytes + argv_bytes > (2u << 20)) {
    return InvalidArgument("env and argv: " + std::to_string(env_bytes + argv_bytes) +
                           " bytes; at most 2 MiB together");
  }
  if (spec.comment.size() > 4096)
    return InvalidArgument("comment: at most 4096 characters");
  // An image, never an option of the runtime: "--user=0" was docker's flag.
  HACHI_RETURN_IF_ERROR(api::CheckContainerImage(spec.container_image));
  return Status::Ok();
}

Status CheckSubmitRequest(const SubmitRequest& request) {
  for (const SubmitCheck& c : kSubmitChecks) HACHI_RETURN_IF_ERROR(c.check(request));
  return Status::Ok();
}

}  // namespace hachi::api
