// A kernel log line taken apart into the header its format put first and the message the
// kernel printed, and only for lines the kernel itself logged. Pure functions,
// thread-safe. Below the Xid reader (topo/xid.h), which trusts a driver line only where
// the driver's text starts the message.
//
// Why the care: a kernel message can quote text an unprivileged user chose (overlayfs
// logs the lowerdir it cannot resolve, and anyone may mount overlayfs in a user
// namespace), and userspace may write records into /dev/kmsg (the kernel files those
// under a non-zero facility, whatever priority they ask for). So a line counts only when
// (1) its format's header parses from the line's first byte, (2) where the format carries
// a facility, that facility is the kernel's (0), and (3) callers then match their text at
// the very start of `message`. Non-printable bytes in a /dev/kmsg record are escaped
// ("\x0a"), and the continuation lines of every format start with a space, so an
// embedded newline cannot yield a line of its own that passes (1).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hachi::topo {

// Where a line was read from, which decides the formats it may have.
enum class KernelLogSource {
  // /dev/kmsg (or a file standing in for it): "PRI,SEQ,USEC,FLAGS[,...];MESSAGE", with
  // continuation lines " KEY=VALUE" (never a match).
  kKmsg,
  // A log an administrator saved (`hachi doctor --kernel-log FILE`): /dev/kmsg records;
  // `dmesg -x` ("kern  :err   : [  12.345678] MESSAGE"); `dmesg` ("[  12.345678]
  // MESSAGE", "[Mon Mar  3 10:01:02 2026] MESSAGE", "<3>[  12.345678] MESSAGE" of
  // `dmesg -r`); syslog and `journalctl -k` ("Mar  3 10:01:02 host kernel: MESSAGE",
  // "2026-03-03T10:01:02.123456+00:00 host kernel: MESSAGE"). A bare message without
  // any header (`dmesg -t`) does not count: that is also what an escaped newline in
  // another message turns into.
  kSavedText,
};

struct KernelLogLine {
  std::string_view message;  // from the kernel's first byte; a view into the line
  std::optional<uint64_t>
      kmsg_usec;  // a /dev/kmsg record's stamp: microseconds since boot
};

// nullopt when `line` is not a line the kernel logged, in one of `source`'s formats:
// no header, a record userspace wrote (facility not the kernel's), a continuation line.
std::optional<KernelLogLine> SplitKernelLogLine(std::string_view line,
                                                KernelLogSource source);

}  // namespace hachi::topo
