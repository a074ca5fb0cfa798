// A GPU fault faked from an unprivileged account, done for real: a user (nobody, when the
// test runs as root) enters a user and mount namespace of its own and mounts overlayfs
// with a lowerdir named like the driver's "NVRM: Xid (PCI:0000:18:00): 79, ..." line.
// The kernel cannot resolve it and logs it to /dev/kmsg inside its own error
// ("overlayfs: failed to resolve '/.../NVRM: Xid (PCI:...': -2"). `hachi doctor` -- the
// burn-in gate's check -- must not report an Xid for GPU 0 (00000000:18:00.0 on the
// fake NVML's hgx-h100) from that line, reading /dev/kmsg or given it as a saved log.
//
// Skipped, saying why, where the machine cannot do the attack: /dev/kmsg unreadable
// (not root, dmesg_restrict), no user namespaces for the user, no overlayfs, a kernel
// that did not log the path.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using testing::CmdResult;
using testing::Shell;

// Common to every run's forged line, so that lines an earlier run left in the kernel's
// ring buffer are recognised too.
constexpr char kToken[] = "hachi-xid-forgery";

// How the child's attempt ended: its exit status.
enum Forged : int {
  kLogged = 0,      // the mount failed on the lowerdir, as planned
  kNoUser = 10,     // could not become the unprivileged user
  kNoUserns = 11,   // unshare(CLONE_NEWUSER | CLONE_NEWNS) refused
  kNoMapping = 12,  // could not map itself into the namespace
  kNoOverlay = 13,  // no overlayfs, or not mountable in a user namespace
  kMounted = 14,    // it mounted (it cannot: the lowerdir does not exist)
  kOtherError = 15,
};

bool WriteAll(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  ::close(fd);
  return ok;
}

// Runs in the forked child (the strings are made before the fork): system calls only.
[[noreturn]] void ForgeInChild(bool drop_root, const std::string& uid_map,
                               const std::string& gid_map, const std::string& target,
                               const std::string& options) {
  if (drop_root) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(kNoUser);
    }
    // A change of user makes the process undumpable, and /proc/self/*_map root's.
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  }
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(kNoUserns);
  if (!WriteAll("/proc/self/uid_map", uid_map) ||
      !WriteAll("/proc/self/setgroups", "deny") ||
      !WriteAll("/proc/self/gid_map", gid_map)) {
    ::_exit(kNoMapping);
  }
  if (::mount("overlay", target.c_str(), "overlay", 0, options.c_str()) == 0) {
    ::_exit(kMounted);
  }
  ::_exit(errno == ENOENT                     ? kLogged
          : errno == ENODEV || errno == EPERM ? kNoOverlay
                                              : kOtherError);
}

// /dev/kmsg's records since boot; nullopt (and *error) when it cannot be read.
std::optional<std::string> ReadKmsg(std::string* error) {
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  std::string out;
  char buf[8192];
  for (int records = 0; records < 1'000'000; ++records) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;
    break;
  }
  ::close(fd);
  return out;
}

// The xid items of `hachi doctor --json ARGS` on the fake NVML's hgx-h100, on this
// machine's own /dev/kmsg.
nlohmann::json DoctorXidItems(const std::string& args) {
  const CmdResult r = Shell(
      "HACHI_FAKE_NVML_TOPOLOGY=" + SourceDir() + "/src/topo/presets/hgx-h100.json " +
      "HACHI_NVML_LIBRARY=" + FakeNvmlLibrary() + " " + BinaryDir() +
      "/hachi doctor --json --gpu 0 " + args + " 2>/dev/null");
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("checks")) << r.out;
  nlohmann::json items = nlohmann::json::array();
  if (!j.is_object() || !j.contains("checks")) return items;
  for (const nlohmann::json& c : j["checks"]) {
    if (c.value("check", "") == "xid") items.push_back(c);
  }
  return items;
}

TEST(XidForgeryE2e, OverlayfsInAUserNamespaceFakesNoXid) {
  std::string error;
  if (!ReadKmsg(&error)) GTEST_SKIP() << "cannot read /dev/kmsg: " << error;
  const bool root = ::geteuid() == 0;
  const uid_t uid = root ? 65534 : ::geteuid();
  const gid_t gid = root ? 65534 : ::getegid();
  // overlayfs splits its options at ',' and its lowerdir at ':' unless escaped.
  const std::string marker = std::string(kToken) + "-" + std::to_string(::getpid());
  const std::string options =
      "lowerdir=/nonexistent/" + marker +
      "/NVRM\\: Xid (PCI\\:0000\\:18\\:00)\\: 79\\, pid=1\\, GPU has fallen off the "
      "bus " +
      kToken;
  const std::string uid_map = "0 " + std::to_string(uid) + " 1";
  const std::string gid_map = "0 " + std::to_string(gid) + " 1";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  // The mount point: one any user can reach, wherever TMPDIR is. The mount cannot
  // succeed (the lowerdir does not exist), and would be in the child's namespace only.
  if (pid == 0) ForgeInChild(root, uid_map, gid_map, "/", options);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  switch (WEXITSTATUS(status)) {
    case kLogged:
      break;
    case kNoUser:
      GTEST_SKIP() << "cannot become nobody (65534)";
    case kNoUserns:
      GTEST_SKIP() << "no user namespace for uid " << uid
                   << " (/proc/sys/user/max_user_namespaces, "
                      "kernel.unprivileged_userns_clone, an LSM)";
    case kNoMapping:
      GTEST_SKIP() << "cannot map uid " << uid << " into its user namespace";
    case kNoOverlay:
      GTEST_SKIP() << "overlayfs cannot be mounted in a user namespace here";
    default:
      FAIL() << "the forging child ended with " << WEXITSTATUS(status);
  }
  const std::optional<std::string> kmsg = ReadKmsg(&error);
  ASSERT_TRUE(kmsg.has_value()) << error;
  const size_t at = kmsg->find(marker);
  if (at == std::string::npos) {
    GTEST_SKIP() << "the kernel did not log the overlayfs lowerdir";
  }
  const size_t start = kmsg->rfind('\n', at) + 1;  // npos + 1: the first record
  const std::string line = kmsg->substr(start, kmsg->find('\n', at) - start);
  // The attack's premise: a line in the kernel log that holds the driver's text.
  ASSERT_NE(
      line.find("NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus"),
      std::string::npos)
      << line;
  std::cout << "the kernel logged: " << line << "\n";

  for (const std::string& args : {std::string(), std::string("--kernel-log /dev/kmsg")}) {
    SCOPED_TRACE("hachi doctor " + args);
    const nlohmann::json items = DoctorXidItems(args);
    ASSERT_FALSE(items.empty());
    for (const nlohmann::json& item : items) {
      const std::string evidence = item.value("evidence", "");
      EXPECT_EQ(evidence.find(kToken), std::string::npos) << item.dump();
    }
  }
}

}  // namespace
}  // namespace hachi::cli
