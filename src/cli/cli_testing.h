// Runs the real `hachi` binary for the CLI end-to-end tests. Test-only.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/testing/paths.h"

namespace hachi::cli::testing {

struct CmdResult {
  int exit_code = -1;
  std::string out;
};

// A shell command line, its stdout and exit code.
inline CmdResult Shell(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `hachi ARGS`; stdout only unless `with_stderr` (a JSON reply must parse even when
// progress lines go to stderr).
inline CmdResult Hachi(const std::string& args, bool with_stderr = true) {
  return Shell(BinaryDir() + "/hachi " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// A whole file ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace hachi::cli::testing
