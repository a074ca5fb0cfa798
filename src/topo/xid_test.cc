// ParseNvrmXidMessage and ParseNvrmXidLine: the driver's real lines, old and new, in each
// source's formats; and forged ones (text a user had the kernel quote, records userspace
// wrote) that must not read as an Xid.
#include "topo/xid.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi::topo {
namespace {

constexpr KernelLogSource kKmsg = KernelLogSource::kKmsg;
constexpr KernelLogSource kSaved = KernelLogSource::kSavedText;

TEST(ParseNvrmXidMessageTest, DriverMessages) {
  struct Case {
    std::string name, message;
    std::string bus_id;
    int xid;
    std::string text;
    int pid;
    std::string process;
  };
  const Case cases[] = {
      {"unknown_pid",
       "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
       "off the bus.",
       "00000000:3B:00.0", 79, "GPU has fallen off the bus.", 0, ""},
      {"pid_before_name_fields",
       "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
       "00000000:3B:00.0", 79, "GPU has fallen off the bus.", 1234, ""},
      {"older_bus_form",
       "NVRM: Xid (0000:18:00): 48, An uncorrectable double bit error (DBE) has been "
       "detected on GPU in the framebuffer at partition 6, subpartition 0.",
       "00000000:18:00.0", 48,
       "An uncorrectable double bit error (DBE) has been detected on GPU in the "
       "framebuffer at partition 6, subpartition 0.",
       0, ""},
      {"with_process",
       "NVRM: Xid (PCI:0000:01:00): 13, pid=2421, name=python3, Graphics SM Warp "
       "Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
       "00000000:01:00.0", 13,
       "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address", 2421,
       "python3"},
      {"no_process_fields", "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
       "00000000:2B:00.0", 79, "GPU has fallen off the bus.", 0, ""},
      {"recovery_action",
       "NVRM: Xid (PCI:0000:b1:00): 154, GPU recovery action changed from 0x0 (None) to "
       "0x1 (GPU Reset Required)",
       "00000000:B1:00.0", 154,
       "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", 0, ""},
      {"bare_number", "NVRM: Xid (PCI:0000:10:1c): 63", "00000000:10:1C.0", 63, "", 0,
       ""},
      {"full_bus_id", "NVRM: Xid (PCI:00000000:9a:00.0): 31, pid=77, name=a.out, Ch 08",
       "00000000:9A:00.0", 31, "Ch 08", 77, "a.out"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<KernelXid> got = ParseNvrmXidMessage(c.message);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->pci_bus_id, c.bus_id);
    EXPECT_EQ(got->xid, c.xid);
    EXPECT_EQ(got->text, c.text);
    EXPECT_EQ(got->pid, c.pid);
    EXPECT_EQ(got->process, c.process);
  }
}

TEST(ParseNvrmXidMessageTest, OtherMessages) {
  struct Case {
    std::string name, message;
  };
  const Case cases[] = {
      {"gpu_at_line", "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed"},
      {"fallen_off_line", "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus."},
      {"nvswitch_sxid", "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal"},
      {"not_a_bus_id", "NVRM: Xid (43, pid: 5678): ROBUST_CHANNEL_ERROR"},
      {"no_number", "NVRM: Xid (PCI:0000:3b:00): GPU has fallen off the bus."},
      {"number_then_junk", "NVRM: Xid (PCI:0000:3b:00): 79x, GPU has fallen off"},
      {"leading_space", " NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."},
      {"quoted_in_another_message",
       "overlayfs: failed to resolve '/tmp/x/NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU "
       "has fallen off the bus': -2"},
      {"empty", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(ParseNvrmXidMessage(c.message).has_value());
  }
}

// The driver's lines as each source has them.
TEST(ParseNvrmXidLineTest, RealDriverLines) {
  struct Case {
    std::string name;
    KernelLogSource source;
    std::string line;
    int xid;
  };
  const Case cases[] = {
      {"kmsg_new_form", kKmsg,
       "4,1201,93312233,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
       "name=<unknown>, GPU has fallen off the bus.",
       79},
      {"kmsg_old_form", kKmsg,
       "3,880,5122011,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the "
       "bus.",
       79},
      {"kmsg_older_bus_form", kKmsg, "4,1,2,-;NVRM: Xid (0000:18:00): 48, DBE", 48},
      {"saved_kmsg", kSaved,
       "4,1230,95120001,-;NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, "
       "Graphics SM Warp Exception",
       13},
      {"dmesg", kSaved,
       "[ 1234.567] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU "
       "has fallen off the bus.",
       79},
      {"dmesg_x", kSaved,
       "kern  :warn  : [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has "
       "fallen off the bus.",
       79},
      {"syslog", kSaved,
       "Mar  3 10:01:02 gpu07 kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=2421, "
       "name=python3, Graphics SM Warp Exception",
       13},
      {"kern_log_with_stamp", kSaved,
       "Mar  3 10:01:02 gpu07 kernel: [ 1234.567] NVRM: Xid (PCI:0000:b1:00): 154, GPU "
       "recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
       154},
      {"journalctl_iso", kSaved,
       "2026-03-03T10:01:02+0000 gpu07 kernel: NVRM: Xid (PCI:0000:10:1c): 63, pid=77, "
       "name=a.out, Ch 08",
       63},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<KernelXid> got = ParseNvrmXidLine(c.line, c.source);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->xid, c.xid);
  }
}

// What an unprivileged user can have end up in the kernel log, and what root's
// userspace can write to /dev/kmsg: none of it is the driver's line.
TEST(ParseNvrmXidLineTest, ForgedLines) {
  const std::string kForged =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus";
  struct Case {
    std::string name;
    KernelLogSource source;
    std::string line;
  };
  const Case cases[] = {
      // mount -t overlay -o 'lowerdir=/tmp/x/NVRM\: Xid ...' in a user namespace.
      {"overlayfs_embedded", kKmsg,
       "3,340,2795990901,-;overlayfs: failed to resolve '/tmp/x/" + kForged + "': -2"},
      // The same with a newline in the path: /dev/kmsg escapes it.
      {"escaped_newline", kKmsg,
       "3,341,2798941488,-;overlayfs: failed to resolve '/tmp/x/a\\x0a" + kForged +
           "': -2"},
      {"escaped_newline_first", kKmsg, "3,341,2798941488,-;\\x0a" + kForged},
      // echo '<0>NVRM: Xid ...' > /dev/kmsg: filed under LOG_USER.
      {"userspace_record", kKmsg, "8,342,2984424619,-;" + kForged},
      {"userspace_record_warning", kKmsg, "12,342,2984424619,-;" + kForged},
      {"userspace_record_saved", kSaved, "12,342,2984424619,-;" + kForged},
      {"prefix_after_a_space", kKmsg, "4,343,2984424620,-; " + kForged},
      {"kmsg_continuation", kKmsg, " " + kForged},
      {"kmsg_continuation_no_space_key", kKmsg, " NVRM=" + kForged},
      // What dmesg, dmesg -t and journalctl print for the newline one.
      {"dmesg_first_line", kSaved,
       "[ 2798.941488] overlayfs: failed to resolve '/tmp/x/a"},
      {"dmesg_continuation", kSaved, "               " + kForged + "': -2"},
      {"dmesg_t_continuation", kSaved, kForged + "': -2"},
      {"dmesg_x_continuation", kSaved, "                              " + kForged},
      {"dmesg_embedded", kSaved,
       "[ 2795.990901] overlayfs: failed to resolve '/tmp/x/" + kForged + "': -2"},
      {"dmesg_x_userspace", kSaved, "user  :warn  : [ 2984.424619] " + kForged},
      {"dmesg_r_userspace", kSaved, "<12>[ 2984.424619] " + kForged},
      {"syslog_embedded", kSaved,
       "Mar  3 10:01:02 gpu07 kernel: overlayfs: failed to resolve '/tmp/x/" + kForged +
           "': -2"},
      {"syslog_program", kSaved, "Mar  3 10:01:02 gpu07 logger: " + kForged},
      {"dmesg_line_from_kmsg", kKmsg, "[ 1234.567] " + kForged},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(ParseNvrmXidLine(c.line, c.source).has_value());
  }
}

}  // namespace
}  // namespace hachi::topo
