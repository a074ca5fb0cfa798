#include "api/output_paths.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace hachi::api {

std::string JobName(const LaunchSpec& spec) {
  if (!spec.spec.name.empty()) return spec.spec.name;
  if (spec.spec.script().empty() && !spec.spec.argv().empty()) {
    const std::string& cmd = spec.spec.argv()[0];
    const size_t slash = cmd.find_last_of('/');
    std::string base = slash == std::string::npos ? cmd : cmd.substr(slash + 1);
    if (!base.empty()) return base;
  }
  return "hachi";
}

std::string ExpandOutputPath(const std::string& pattern, const LaunchSpec& spec) {
  const std::string& p = pattern.empty() ? std::string("hachi-%j.out") : pattern;
  const bool array = spec.spec.array_task_id >= 0;  // an array task
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%' || i + 1 == p.size()) {
      out += p[i];
      continue;
    }
    size_t j = i + 1;
    int width = 0;
    while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) {
      width = std::min(width * 10 + (p[j] - '0'), 64);  // a sane cap on padding
      ++j;
    }
    if (j == p.size()) {  // "%12" at the end: not a pattern
      out += p.substr(i);
      break;
    }
    auto number = [width](long long v) {
      std::string s = std::to_string(v);
      if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
      return s;
    };
    switch (p[j]) {
      case '%':
        out += '%';
        break;
      case 'j':
      case 'J':
        out += number(spec.job);
        break;
      case 'x':
        out += JobName(spec);
        break;
      case 'A':
        out += number(array ? spec.spec.array_job_id : spec.job);
        break;
      case 'a':
        out += number(array ? spec.spec.array_task_id : 0);
        break;
      case 'u':
        out += spec.user;
        break;
      case 'N':
        out += spec.node;
        break;
      case 'n':
        out += number(spec.node_rank);
        break;
      default:
        out += p.substr(i, j - i + 1);
        break;  // unknown: as written
    }
    i = j;
  }
  if (!out.empty() && out[0] != '/' && !spec.spec.workdir.empty()) {
    std::string dir = spec.spec.workdir;
    if (dir.back() != '/') dir += '/';
    out = dir + out;
  }
  return out;
}

OutputFiles JobOutputFiles(const LaunchSpec& spec) {
  OutputFiles f;
  f.out = ExpandOutputPath(spec.spec.stdout_path, spec);
  f.err = spec.spec.stderr_path.empty() ? f.out
                                        : ExpandOutputPath(spec.spec.stderr_path, spec);
  return f;
}

mode_t JobUmask(const state::EnvList& env) {
  for (const auto& [name, value] : env) {
    if (name != kUmaskVariable) continue;
    if (value.empty() || value.size() > 4) break;
    mode_t mask = 0;
    for (char c : value) {
      if (c < '0' || c > '7') return kDefaultJobUmask;
      mask = static_cast<mode_t>(mask * 8 + static_cast<mode_t>(c - '0'));
    }
    return mask & 0777;
  }
  return kDefaultJobUmask;
}

bool HasUmask(const state::EnvList& env) {
  return std::any_of(env.begin(), env.end(),
                     [](const auto& kv) { return kv.first == kUmaskVariable; });
}

std::string UmaskText(mode_t mask) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mask & 0777));
  return buf;
}

}  // namespace hachi::api
