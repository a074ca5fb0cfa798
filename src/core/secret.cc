#include "core/secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace hachi {

Result<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * bytes, '0');
  for (size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<uint8_t>(raw[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 15];
  }
  return out;
}

bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  // Through a volatile so the compiler cannot turn the loop into an early exit.
  volatile unsigned char result = diff;
  return result == 0;
}

Result<std::string> ReadSecretFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return NotFound("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDenied(path + " is mode " + mode +
                            ": others could read it; make it 0600 (chmod 600 " + path +
                            ")");
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 65536) break;  // a secret is short; this is not one
  }
  ::close(fd);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return InvalidArgument(path + " is empty");
  const size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

Status WriteSecretFile(const std::string& path, std::string_view secret) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  std::string text(secret);
  text += '\n';
  const bool ok =
      ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace hachi
