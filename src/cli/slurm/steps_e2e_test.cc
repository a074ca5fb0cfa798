// Job steps end to end: srun inside sbatch scripts and with --jobid, through
// the Slurm links, against a real `hachi dev` child with two simulated 8-GPU nodes. The
// tasks run under the nodes' agents; their output comes back through the server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/slurm/slurm_dev_testing.h"

namespace hachi::cli {
namespace {

using testing::CmdResult;
using testing::ReadFile;
using testing::Shell;

class StepsE2e : public testing::SlurmDevTest {
 protected:
  std::string Submit(const std::string& args) {
    CmdResult r = Run("sbatch --parsable " + args);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out.substr(0, r.out.find('\n'));
  }
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST_F(StepsE2e, ABatchScriptsStepsAcrossTwoNodes) {
  const std::string script = dir_ + "/job.sh";
  ASSERT_EQ(Shell("cat > " + script +
                  " <<'EOF'\n"
                  "#!/bin/sh\n"
                  "#SBATCH -N 2 --gpus-per-node=2 -o " +
                  dir_ +
                  "/out.txt\n"
                  "srun -n 4 -l sh -c 'echo rank=$SLURM_PROCID of=$SLURM_NTASKS "
                  "node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES local=$SLURM_LOCALID "
                  "step=$SLURM_STEP_ID'\n"
                  "srun -n 4 --gpus-per-task=1 sh -c 'echo gpt $SLURM_PROCID "
                  "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'\n"
                  "echo batch-on $SLURMD_NODENAME\n"
                  "EOF")
                .exit_code,
            0);
  const std::string id = Submit(script);
  ASSERT_TRUE(WaitState(id, "COMPLETED"))
      << Run("sacct -j " + id).out << ReadFile(dir_ + "/out.txt")
      << ReadFile(dir_ + "/dev.log");
  const std::string out = ReadFile(dir_ + "/out.txt");
  // Each rank once, labelled; ranks 0-1 on the first node, 2-3 on the second; every
  // task sees its node's two GPUs.
  std::map<int, std::string> node_of, gpus_of;
  std::map<std::string, std::set<std::string>> gpt_gpus;  // node -> GPUs of its tasks
  int batch_lines = 0;
  for (const std::string& line : Lines(out)) {
    if (line.rfind("batch-on ", 0) == 0) {
      ++batch_lines;
      EXPECT_EQ(line, "batch-on node1") << "the script runs on the first node only";
      continue;
    }
    if (line.rfind("gpt ", 0) == 0) {
      std::istringstream in(line.substr(4));
      int rank = 0;
      std::string node, gpus;
      in >> rank >> node >> gpus;
      EXPECT_EQ(gpus.find(','), std::string::npos) << "one GPU per task: " << line;
      EXPECT_TRUE(gpt_gpus[node].insert(gpus).second)
          << "shared with a neighbour: " << out;
      continue;
    }
    const size_t colon = line.find(": rank=");
    ASSERT_NE(colon, std::string::npos) << line << "\n" << out;
    const int label = std::stoi(line.substr(0, colon));
    EXPECT_NE(line.find("rank=" + std::to_string(label) + " of=4 "), std::string::npos)
        << line;
    EXPECT_TRUE(node_of.emplace(label, line.substr(line.find("node=") + 5, 5)).second)
        << "rank twice: " << out;
    gpus_of[label] = line.substr(line.find("gpus=") + 5,
                                 line.find(" local=") - line.find("gpus=") - 5);
    EXPECT_NE(line.find("step=0"), std::string::npos) << line;
  }
  EXPECT_EQ(batch_lines, 1) << out;
  ASSERT_EQ(node_of.size(), 4u) << out;
  EXPECT_EQ(node_of[0], "node1");
  EXPECT_EQ(node_of[1], "node1");
  EXPECT_EQ(node_of[2], "node2");
  EXPECT_EQ(node_of[3], "node2");
  for (const auto& [rank, gpus] : gpus_of) {
    EXPECT_EQ(std::count(gpus.begin(), gpus.end(), ','), 1) << rank << ": " << gpus;
  }
  EXPECT_EQ(gpus_of[0], gpus_of[1]);
  EXPECT_EQ(gpt_gpus["node1"].size(), 2u) << out;
  EXPECT_EQ(gpt_gpus["node2"].size(), 2u) << out;
  // sacct: the allocation, its batch step and the two srun steps.
  CmdResult acct = Run("sacct -P -n -o JobID,JobName,State,ExitCode,NNodes -j " + id);
  EXPECT_EQ(acct.out, id + "|job.sh|COMPLETED|0:0|2\n" + id +
                          ".batch|batch|COMPLETED|0:0|1\n" + id +
                          ".0|sh|COMPLETED|0:0|2\n" + id + ".1|sh|COMPLETED|0:0|2\n")
      << acct.out;
}

TEST_F(StepsE2e, StepsInARunningAllocationFromOutside) {
  const std::string id = Submit("-N 2 --gpus-per-node=1 -J alloc --wrap 'sleep 300'");
  ASSERT_TRUE(WaitState(id, "RUNNING")) << Run("squeue").out;

  // --jobid --overlap: a command inside the running job, on both its nodes.
  CmdResult both = Run("srun --jobid=" + id +
                       " --overlap -N 2 -l sh -c 'echo $SLURM_JOB_ID $SLURMD_NODENAME'");
  EXPECT_EQ(both.exit_code, 0) << both.out;
  std::vector<std::string> lines = Lines(both.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines,
            (std::vector<std::string>{"0: " + id + " node1", "1: " + id + " node2"}));

  // The exit status is the worst task's; Slurm's error line names node and task.
  CmdResult worst =
      Run("srun --jobid=" + id + " -n 2 sh -c 'exit $((SLURM_PROCID * 3))'");
  EXPECT_EQ(worst.exit_code, 3) << worst.out;
  EXPECT_NE(worst.out.find("srun: error: node2: task 1: Exited with exit code 3"),
            std::string::npos)
      << worst.out;

  // -K: the failing task stops the other at once (it would sleep for 300 s).
  const auto t0 = std::chrono::steady_clock::now();
  CmdResult k =
      Run("srun --jobid=" + id +
          " -n 2 -K sh -c 'if [ $SLURM_PROCID = 1 ]; then exit 5; fi; sleep 300'");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(k.exit_code, 143) << k.out;  // the sleeping task: SIGTERM (128 + 15)
  EXPECT_NE(k.out.find("task 1: Exited with exit code 5"), std::string::npos) << k.out;

  // A command that does not exist: Slurm's exit status 2.
  CmdResult missing = Run("srun --jobid=" + id + " no-such-command-hachi");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("No such file or directory"), std::string::npos)
      << missing.out;

  // A step cancelled with its job: srun learns it and returns; sacct says so.
  Shell("cd " + dir_ + " && PATH=" + dir_ + "/bin:$PATH; (srun --jobid=" + id +
        " sleep 300; echo rc=$?) > " + dir_ + "/bg.txt 2>&1 &");
  bool started = false;
  for (int i = 0; i < 100 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    started = Run("sacct -P -n -o JobID,State -j " + id).out.find(".4|RUNNING") !=
              std::string::npos;
  }
  ASSERT_TRUE(started) << Run("sacct -j " + id).out << ReadFile(dir_ + "/bg.txt");
  ASSERT_EQ(Run("scancel " + id).exit_code, 0);
  bool returned = false;
  for (int i = 0; i < 300 && !returned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    returned = ReadFile(dir_ + "/bg.txt").find("rc=") != std::string::npos;
  }
  EXPECT_TRUE(returned) << ReadFile(dir_ + "/bg.txt");
  ASSERT_TRUE(WaitState(id, "CANCELLED"));
  CmdResult acct = Run("sacct -P -n -o JobID,State -j " + id);
  EXPECT_NE(acct.out.find(id + ".0|COMPLETED"), std::string::npos) << acct.out;
  EXPECT_NE(acct.out.find(id + ".1|FAILED"), std::string::npos) << acct.out;
  EXPECT_NE(acct.out.find(id + ".4|CANCELLED"), std::string::npos) << acct.out;
  // No step in an ended job.
  CmdResult late = Run("srun --jobid=" + id + " true");
  EXPECT_EQ(late.exit_code, 1);
  EXPECT_NE(late.out.find("srun: error: Unable to create step for job " + id),
            std::string::npos)
      << late.out;
}

}  // namespace
}  // namespace hachi::cli

namespace hachi::cli {
namespace {

// A terminal for srun --pty: the test types on the leader, srun runs on the follower
// (its controlling terminal), as a user's xterm would have it.
class Terminal {
 public:
  Terminal() {
    leader_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (leader_ < 0 || ::grantpt(leader_) != 0 || ::unlockpt(leader_) != 0) return;
    char name[128];
    if (::ptsname_r(leader_, name, sizeof name) == 0) name_ = name;
    winsize ws{};
    ws.ws_row = 24;
    ws.ws_col = 80;
    ::ioctl(leader_, TIOCSWINSZ, &ws);
  }
  ~Terminal() {
    if (leader_ >= 0) ::close(leader_);
  }
  // Runs `cmd` (sh -c) on the terminal, in a session of its own.
  pid_t Spawn(const std::string& cmd) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      const int f = ::open(name_.c_str(), O_RDWR);
      ::ioctl(f, TIOCSCTTY, 0);
      ::dup2(f, 0);
      ::dup2(f, 1);
      ::dup2(f, 2);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    return pid;
  }
  void Type(const std::string& keys) {
    [[maybe_unused]] ssize_t n = ::write(leader_, keys.data(), keys.size());
  }
  // Reads until `needle` shows up in what came since the last match (or `ms` pass).
  bool Expect(const std::string& needle, int ms = 15000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const size_t at = seen_.find(needle);
      if (at != std::string::npos) {
        seen_.erase(0, at + needle.size());
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            until - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      pollfd p{leader_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(leader_, buf, sizeof buf);
      if (n <= 0) return false;
      seen_.append(buf, static_cast<size_t>(n));
      all_.append(buf, static_cast<size_t>(n));
    }
  }
  void Resize(int rows, int cols) {
    winsize ws{};
    ws.ws_row = static_cast<unsigned short>(rows);
    ws.ws_col = static_cast<unsigned short>(cols);
    ::ioctl(leader_, TIOCSWINSZ, &ws);  // SIGWINCH to srun, the foreground
  }
  termios Modes() const {
    termios t{};
    ::tcgetattr(leader_, &t);
    return t;
  }
  const std::string& all() const { return all_; }
  bool ok() const { return leader_ >= 0 && !name_.empty(); }

 private:
  int leader_ = -1;
  std::string name_;
  std::string seen_, all_;
};

TEST_F(StepsE2e, SrunPtyIsATerminalInsideTheJob) {
  const std::string id = Submit("-N 1 --gpus-per-node=1 -J shell --wrap 'sleep 300'");
  ASSERT_TRUE(WaitState(id, "RUNNING")) << Run("squeue").out;
  Terminal term;
  ASSERT_TRUE(term.ok());
  const termios before = term.Modes();
  const pid_t srun = term.Spawn("cd " + dir_ + " && export PATH=" + dir_ +
                                "/bin:$PATH PS1='hachi$ ' && exec srun --jobid=" + id +
                                " --overlap --pty /bin/sh");
  ASSERT_TRUE(term.Expect("hachi$ ")) << term.all();
  term.Type("echo hello-$((6*7)) job=$SLURM_JOB_ID; tty\r");
  EXPECT_TRUE(term.Expect("hello-42 job=" + id)) << term.all();
  EXPECT_TRUE(term.Expect("/dev/pts/")) << term.all();
  if (::geteuid() == 0) {
    // The job's user's alone: not writable by the members of its group.
    term.Type("stat -c mode=%a $(tty)\r");
    EXPECT_TRUE(term.Expect("mode=600")) << term.all();
  }
  // The window: srun's size at the start, and again after a resize (SIGWINCH).
  term.Type("stty size\r");
  EXPECT_TRUE(term.Expect("24 80")) << term.all();
  term.Resize(40, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  term.Type("stty size\r");
  EXPECT_TRUE(term.Expect("40 100")) << term.all();
  // Ctrl-C reaches the remote foreground (the sleep), not srun: the shell goes on.
  term.Type("sleep 100; echo not-interrupted\r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  term.Type("\x03");
  term.Type("echo after-$((1+1))\r");
  EXPECT_TRUE(term.Expect("after-2")) << term.all();
  // Once, as typed (echoed); never as the echo's output.
  const std::string& all = term.all();
  EXPECT_EQ(all.find("not-interrupted"), all.rfind("not-interrupted")) << all;
  // Ctrl-Z stops the remote foreground job; the shell takes it back.
  term.Type("sleep 100\r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  term.Type("\x1a");
  EXPECT_TRUE(term.Expect("Stopped")) << term.all();
  term.Type("kill -9 %1\r");
  EXPECT_TRUE(term.Expect("hachi$ ")) << term.all();
  term.Type("exit 3\r");
  int status = 0;
  for (int i = 0; i < 150 && ::waitpid(srun, &status, WNOHANG) == 0; ++i) {
    term.Expect("\x01", 100);  // keeps reading what comes (at once once srun is gone)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // sh refuses the first exit while it still lists a stopped job.
    if (i == 20) term.Type("exit 3\r");
  }
  ASSERT_TRUE(WIFEXITED(status)) << term.all();
  EXPECT_EQ(WEXITSTATUS(status), 3) << term.all();
  // srun gave the terminal back as it found it.
  const termios after = term.Modes();
  EXPECT_EQ(after.c_lflag & (ICANON | ECHO | ISIG),
            before.c_lflag & (ICANON | ECHO | ISIG));
  EXPECT_EQ(after.c_oflag & OPOST, before.c_oflag & OPOST);
  Run("scancel " + id);
}

TEST_F(StepsE2e, SallocThenSrunInside) {
  // salloc runs its command here with the allocation's variables; srun inside it makes
  // steps on the allocation's nodes; at the command's end the allocation is given back
  // with its exit code.
  CmdResult r =
      Run("salloc -N 2 --gpus-per-node=1 sh -c 'echo job=$SLURM_JOB_ID "
          "nodes=$SLURM_JOB_NODELIST; srun -l hostname >/dev/null && srun -N2 "
          "sh -c \"echo on \\$SLURMD_NODENAME\" | sort; exit 4'");
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("salloc: Granted job allocation "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes=node[1-2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on node1\non node2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("salloc: Relinquishing job allocation "), std::string::npos)
      << r.out;
  const size_t at = r.out.find("job=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string id = r.out.substr(at + 4, r.out.find(' ', at) - at - 4);
  ASSERT_TRUE(WaitState(id, "FAILED")) << Run("sacct -j " + id).out;
  CmdResult acct = Run("sacct -P -n -o JobID,State,ExitCode -j " + id);
  EXPECT_EQ(acct.out,
            id + "|FAILED|4:0\n" + id + ".0|COMPLETED|0:0\n" + id + ".1|COMPLETED|0:0\n")
      << acct.out;
  // srun outside an allocation: its own, given back with the step's status.
  CmdResult alone =
      Run("srun -N 2 -l sh -c 'echo $SLURM_PROCID:$SLURMD_NODENAME; exit 2'");
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.out.find("0: 0:node1"), std::string::npos) << alone.out;
  EXPECT_NE(alone.out.find("1: 1:node2"), std::string::npos) << alone.out;
}

}  // namespace
}  // namespace hachi::cli

namespace hachi::cli {
namespace {

// An interactive allocation is a job like the rest: it ends at its time limit, and
// salloc says so and hangs up its command.
TEST_F(StepsE2e, SallocEndsAtTheTimeLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  CmdResult r =
      Run("salloc -N 1 --gpus-per-node=1 -t 0:03 sh -c 'echo job=$SLURM_JOB_ID; "
          "sleep 60'");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << r.out;
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("has been revoked."), std::string::npos) << r.out;
  const size_t at = r.out.find("job=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string id = r.out.substr(at + 4, r.out.find('\n', at) - at - 4);
  EXPECT_TRUE(WaitState(id, "TIMEOUT")) << Run("sacct -j " + id).out;
}

}  // namespace
}  // namespace hachi::cli
