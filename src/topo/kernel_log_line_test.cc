// SplitKernelLogLine: each format's header, and the lines that are not the kernel's own
// (a record userspace wrote, a continuation line, a bare message).
#include "topo/kernel_log_line.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi::topo {
namespace {

constexpr KernelLogSource kKmsg = KernelLogSource::kKmsg;
constexpr KernelLogSource kSaved = KernelLogSource::kSavedText;

TEST(SplitKernelLogLineTest, KernelLines) {
  struct Case {
    std::string name;
    KernelLogSource source;
    std::string line;
    std::string message;
    std::optional<uint64_t> kmsg_usec;
  };
  const Case cases[] = {
      {"kmsg_err", kKmsg, "3,340,2795990901,-;usb 1-1: reset", "usb 1-1: reset",
       2795990901},
      {"kmsg_emerg", kKmsg, "0,1,0,-;Kernel panic", "Kernel panic", 0},
      {"kmsg_caller_field", kKmsg, "4,12,345,-,caller=T42;a; b", "a; b", 345},
      {"kmsg_fragment_start", kKmsg, "6,7,8,c;first part", "first part", 8},
      {"kmsg_empty_message", kKmsg, "6,7,8,-;", "", 8},
      {"kmsg_in_a_saved_file", kSaved, "4,9,10,-;eth0: up", "eth0: up", 10},
      {"dmesg", kSaved, "[ 2795.990901] eth0: up", "eth0: up", std::nullopt},
      {"dmesg_T", kSaved, "[Mon Mar  3 10:01:02 2026] eth0: up", "eth0: up",
       std::nullopt},
      {"dmesg_r", kSaved, "<4>[    1.500000] eth0: up", "eth0: up", std::nullopt},
      {"syslog2_no_stamp", kSaved, "<3>eth0: up", "eth0: up", std::nullopt},
      {"dmesg_x", kSaved, "kern  :warn  : [    1.500000] eth0: up", "eth0: up",
       std::nullopt},
      {"dmesg_x_t", kSaved, "kern  :err   : eth0: up", "eth0: up", std::nullopt},
      {"syslog", kSaved, "Mar  3 10:01:02 gpu07 kernel: eth0: up", "eth0: up",
       std::nullopt},
      {"syslog_with_stamp", kSaved, "Mar  3 10:01:02 gpu07 kernel: [ 1234.567] eth0: up",
       "eth0: up", std::nullopt},
      {"journalctl", kSaved, "Mar 03 10:01:02 gpu07 kernel: eth0: up", "eth0: up",
       std::nullopt},
      {"journalctl_precise", kSaved, "Mar 03 10:01:02.123456 gpu07 kernel: eth0: up",
       "eth0: up", std::nullopt},
      {"journalctl_iso", kSaved,
       "2026-03-03T10:01:02.123456+00:00 gpu07 kernel: eth0: up", "eth0: up",
       std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<KernelLogLine> got = SplitKernelLogLine(c.line, c.source);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->message, c.message);
    EXPECT_EQ(got->kmsg_usec, c.kmsg_usec);
  }
}

TEST(SplitKernelLogLineTest, NotTheKernelsOwnLines) {
  struct Case {
    std::string name;
    KernelLogSource source;
    std::string line;
  };
  const Case cases[] = {
      // echo '<0>...' > /dev/kmsg: the kernel files it under LOG_USER.
      {"kmsg_user_facility", kKmsg, "8,342,2984424619,-;NVRM: Xid"},
      {"kmsg_user_warning", kKmsg, "12,342,2984424619,-;NVRM: Xid"},
      {"kmsg_daemon", kKmsg, "30,1,2,-;systemd[1]: Started"},
      {"kmsg_user_in_a_saved_file", kSaved, "12,342,2984424619,-;NVRM: Xid"},
      {"kmsg_continuation_line", kKmsg, " SUBSYSTEM=pci"},
      {"kmsg_device_line", kKmsg, " DEVICE=+pci:0000:3b:00.0"},
      {"kmsg_continued_fragment", kKmsg, "4,5,6,+;NVRM: Xid"},
      {"kmsg_negative_priority", kKmsg, "-1,5,6,-;NVRM: Xid"},
      {"kmsg_too_few_fields", kKmsg, "4,5;NVRM: Xid"},
      {"kmsg_not_numbers", kKmsg, "4,a,6,-;NVRM: Xid"},
      {"kmsg_source_dmesg_line", kKmsg, "[ 1.000000] NVRM: Xid"},
      {"kmsg_source_bare", kKmsg, "NVRM: Xid"},
      {"empty", kSaved, ""},
      // dmesg -t, and the further lines of a message with a newline in it.
      {"bare", kSaved, "NVRM: Xid"},
      {"dmesg_indented", kSaved, "               NVRM: Xid"},
      {"dmesg_x_user", kSaved, "user  :warn  : [ 2984.424619] NVRM: Xid"},
      {"dmesg_x_unknown_level", kSaved, "kern  :loud  : NVRM: Xid"},
      {"dmesg_r_user", kSaved, "<12>[ 2984.424619] NVRM: Xid"},
      {"dmesg_stamp_without_digits", kSaved, "[abc] NVRM: Xid"},
      {"dmesg_stamp_without_space", kSaved, "[ 1.0]NVRM: Xid"},
      {"syslog_program", kSaved, "Mar  3 10:01:02 gpu07 logger: NVRM: Xid"},
      {"syslog_program_pid", kSaved, "Mar  3 10:01:02 gpu07 NVRM[12]: Xid"},
      {"journalctl_indented", kSaved, "                             NVRM: Xid"},
      {"syslog_bad_day", kSaved, "Mar 333 10:01:02 gpu07 kernel: NVRM: Xid"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<KernelLogLine> got = SplitKernelLogLine(c.line, c.source);
    EXPECT_FALSE(got.has_value()) << got->message;
  }
}

}  // namespace
}  // namespace hachi::topo
