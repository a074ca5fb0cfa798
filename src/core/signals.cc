#include "core/signals.h"

#include <signal.h>

#include <array>
#include <cctype>
#include <utility>

namespace hachi {
namespace {

constexpr std::array<std::pair<std::string_view, int>, 27> kSignals = {{
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
}};

}  // namespace

std::optional<int> ParseSignal(std::string_view text) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(text[0]))) {
    int n = 0;
    for (char c : text) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      n = n * 10 + (c - '0');
    }
    if (n < 1 || n > 64) return std::nullopt;
    return n;
  }
  std::string up;
  for (char c : text)
    up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  std::string_view name = up;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const auto& [n, sig] : kSignals) {
    if (n == name) return sig;
  }
  return std::nullopt;
}

std::string SignalName(int sig) {
  for (const auto& [n, s] : kSignals) {
    if (s == sig) return std::string(n);
  }
  return std::to_string(sig);
}

}  // namespace hachi
