// The cgroup v2 device filter: cgroup2 has no devices controller; the kernel asks a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the cgroup on every open and mknod of
// a device node. Written as raw instructions (linux/bpf.h) and loaded with the bpf()
// system call, so the agent needs neither libbpf nor a compiler for BPF.
#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "agent/cgroup.h"

namespace hachi::agent {
namespace {

constexpr unsigned kNvidiaMajor = 195;
constexpr unsigned kFirstNonGpuMinor = 254;  // 254 nvidia-modeset, 255 nvidiactl

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}
// dst = *(u32 *)(src + off)
bpf_insn LoadWord(uint8_t dst, uint8_t src, int16_t off) {
  return Insn(BPF_LDX | BPF_W | BPF_MEM, dst, src, off, 0);
}
// if (dst <op> imm) goto pc + 1 + off
bpf_insn Jump(uint8_t op, uint8_t dst, int32_t imm, int16_t off) {
  return Insn(BPF_JMP | op | BPF_K, dst, 0, off, imm);
}
bpf_insn MovImm(uint8_t dst, int32_t imm) {
  return Insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}
bpf_insn Exit() { return Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

// The program, in C:
//   type = ctx->access_type & 0xffff;
//   if (type != CHAR) return 1;
//   if (caps_major >= 0 && ctx->major == caps_major) {         // MIG
//     if (ctx->minor == cap_minors[0] || ...) return 1;
//     return 0;
//   }
//   if (ctx->major != 195 || ctx->minor >= 254) return 1;
//   if (ctx->minor == allowed[0] || ...) return 1;
//   return 0;
// Every jump is forward (to the caps block or to the "return 1" at the end).
std::vector<bpf_insn> GpuFilterProgram(const std::vector<unsigned>& allowed,
                                       int caps_major,
                                       const std::vector<unsigned>& cap_minors) {
  std::vector<bpf_insn> p;
  // Jumps are patched once the position of "allow" is known: index -> jump insn.
  std::vector<size_t> to_allow;
  p.push_back(LoadWord(BPF_REG_2, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, access_type)));
  p.push_back(Insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff));
  to_allow.push_back(p.size());
  p.push_back(Jump(BPF_JNE, BPF_REG_2, BPF_DEVCG_DEV_CHAR, 0));
  p.push_back(LoadWord(BPF_REG_3, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, major)));
  p.push_back(LoadWord(BPF_REG_4, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, minor)));
  size_t to_caps = 0;  // the jump to the caps block, patched below
  if (caps_major >= 0) {
    to_caps = p.size();
    p.push_back(Jump(BPF_JEQ, BPF_REG_3, caps_major, 0));
  }
  to_allow.push_back(p.size());
  p.push_back(Jump(BPF_JNE, BPF_REG_3, kNvidiaMajor, 0));
  to_allow.push_back(p.size());
  p.push_back(Jump(BPF_JGE, BPF_REG_4, kFirstNonGpuMinor, 0));
  for (unsigned m : allowed) {
    to_allow.push_back(p.size());
    p.push_back(Jump(BPF_JEQ, BPF_REG_4, static_cast<int32_t>(m), 0));
  }
  p.push_back(MovImm(BPF_REG_0, 0));  // deny
  p.push_back(Exit());
  if (caps_major >= 0) {
    p[to_caps].off = static_cast<int16_t>(p.size() - (to_caps + 1));
    for (unsigned m : cap_minors) {
      to_allow.push_back(p.size());
      p.push_back(Jump(BPF_JEQ, BPF_REG_4, static_cast<int32_t>(m), 0));
    }
    p.push_back(MovImm(BPF_REG_0, 0));  // deny
    p.push_back(Exit());
  }
  const size_t allow = p.size();
  p.push_back(MovImm(BPF_REG_0, 1));
  p.push_back(Exit());
  for (size_t j : to_allow) p[j].off = static_cast<int16_t>(allow - (j + 1));
  return p;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof *attr); }

}  // namespace

Status AttachGpuDeviceFilter(int cgroup_fd, const std::vector<unsigned>& allowed_minors,
                             int caps_major, const std::vector<unsigned>& cap_minors) {
  const std::vector<bpf_insn> prog =
      GpuFilterProgram(allowed_minors, caps_major, cap_minors);
  static const char kLicense[] = "GPL";
  std::string log(4096, '\0');
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(prog.data());
  load.insn_cnt = static_cast<uint32_t>(prog.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  load.log_buf = reinterpret_cast<uint64_t>(log.data());
  load.log_size = static_cast<uint32_t>(log.size());
  load.log_level = 1;
  const int prog_fd = static_cast<int>(Bpf(BPF_PROG_LOAD, &load));
  if (prog_fd < 0) {
    const int err = errno;
    log.resize(strnlen(log.c_str(), log.size()));
    return Internal(
        std::string("cannot load the GPU device filter (bpf BPF_PROG_LOAD): ") +
        strerror(err) + (log.empty() ? "" : "; verifier: " + log));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cgroup_fd);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attach.attach_type = BPF_CGROUP_DEVICE;
  // Several programs may sit on the path from the root (systemd attaches its own); the
  // kernel allows an access only when all of them do.
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const long r = Bpf(BPF_PROG_ATTACH, &attach);
  const int err = errno;
  close(prog_fd);  // the cgroup holds the program now
  if (r < 0) {
    return Internal(
        std::string("cannot attach the GPU device filter (bpf BPF_PROG_ATTACH): ") +
        strerror(err));
  }
  return Status::Ok();
}

}  // namespace hachi::agent
