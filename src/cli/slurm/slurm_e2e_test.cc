// Slurm's names end to end: `hachi slurm install-links` into a temp bin/,
// then sbatch, squeue, scancel, sinfo, sacct, scontrol and srun run through those links
// against a real `hachi dev` child, as a Slurm user's scripts and tools call them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/slurm/slurm_dev_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using testing::CmdResult;
using testing::ReadFile;
using testing::Shell;

using SlurmE2e = testing::SlurmDevTest;

TEST_F(SlurmE2e, AToolsDayThroughTheLinks) {
  // install-links again is a no-op; a foreign file of one of the names is refused.
  EXPECT_EQ(Shell(BinaryDir() + "/hachi slurm install-links " + dir_ + "/bin").exit_code,
            0);
  Shell("mkdir " + dir_ + "/other && touch " + dir_ + "/other/squeue");
  CmdResult refused =
      Shell(BinaryDir() + "/hachi slurm install-links " + dir_ + "/other 2>&1");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find(dir_ + "/other/squeue exists"), std::string::npos)
      << refused.out;
  EXPECT_NE(::access((dir_ + "/other/sbatch").c_str(), F_OK), 0) << "nothing half-done";

  // sinfo -o %P: one line per partition, the default marked (what Snakemake reads).
  EXPECT_EQ(Run("sinfo -h -o %P").out, "default*\n");

  CmdResult sub = Run("sbatch -G1 -J ok --wrap true");
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  EXPECT_EQ(sub.out.rfind("Submitted batch job ", 0), 0u) << sub.out;
  const std::string ok = sub.out.substr(20, sub.out.find('\n') - 20);
  CmdResult bad = Run("sbatch --parsable -G1 -J bad --wrap 'exit 3'");
  ASSERT_EQ(bad.exit_code, 0) << bad.out;
  const std::string bad_id = bad.out.substr(0, bad.out.find('\n'));
  CmdResult sleeper = Run("sbatch --parsable -G1 -J nap --array=0-2%1 --wrap 'sleep 60'");
  ASSERT_EQ(sleeper.exit_code, 0) << sleeper.out;
  const std::string arr = sleeper.out.substr(0, sleeper.out.find('\n'));

  // --test-only: where and when, on stderr in sbatch's words; nothing submitted.
  CmdResult test = Run("sbatch --test-only -G1 -J probe --wrap true");
  EXPECT_EQ(test.exit_code, 0) << test.out;
  EXPECT_EQ(test.out.rfind("sbatch: Job ", 0), 0u) << test.out;
  EXPECT_NE(test.out.find(" to start at "), std::string::npos) << test.out;
  EXPECT_NE(test.out.find(" in partition default"), std::string::npos) << test.out;
  EXPECT_EQ(Run("squeue -h -t all -n probe").out, "") << "nothing submitted";
  CmdResult never = Run("sbatch --test-only -G9 --wrap true");
  EXPECT_EQ(never.exit_code, 1);
  EXPECT_EQ(never.out.rfind("sbatch: error: Job submission failed: ", 0), 0u)
      << never.out;
  CmdResult parsed = Run("sbatch --test-only --json -G2 -J seen --wrap true");
  EXPECT_NE(parsed.out.find("\"gpus\":2"), std::string::npos) << parsed.out;

  // sbatch -W: the job's exit code. Its flags are sbatch's before the script (an
  // option's value that names a file does not end them), the script's after it.
  CmdResult waited = Run("sbatch -W -Q -G1 --wrap 'exit 5'");
  EXPECT_EQ(waited.exit_code, 5) << waited.out;
  EXPECT_EQ(waited.out, "") << "-Q prints nothing";
  Shell("printf '#!/bin/sh\\nexit $#\\n' > " + dir_ + "/args.sh && touch " + dir_ +
        "/log.txt");
  CmdResult script = Run("sbatch -G1 -o log.txt -W -Q args.sh -W --wait x");
  EXPECT_EQ(script.exit_code, 3) << script.out;

  ASSERT_TRUE(WaitState(ok, "COMPLETED"));
  ASSERT_TRUE(WaitState(bad_id, "FAILED"));
  // Snakemake's status query.
  EXPECT_EQ(Run("sacct -P -n --format=JobIdRaw,State -j " + ok).out,
            ok + "|COMPLETED\n" + ok + ".batch|COMPLETED\n");
  EXPECT_EQ(Run("sacct -X -P -n -o JobName,ExitCode -j " + bad_id).out, "bad|3:0\n");

  // The array: pending tasks share a squeue line; -r splits them.
  ASSERT_TRUE(WaitState(arr + "_0", "RUNNING"));
  EXPECT_NE(Run("squeue -h -o %i -n nap").out.find(arr + "_[1-2%1]"), std::string::npos);
  EXPECT_EQ(Run("squeue -h -r -t PD -o %i -n nap").out, arr + "_1\n" + arr + "_2\n");
  // scancel A_T then the rest by name and state; then the whole array.
  EXPECT_EQ(Run("scancel " + arr + "_2").exit_code, 0);
  ASSERT_TRUE(WaitState(arr + "_2", "CANCELLED"));
  EXPECT_EQ(Run("scancel " + arr).exit_code, 0);
  ASSERT_TRUE(WaitState(arr + "_0", "CANCELLED"));
  ASSERT_TRUE(WaitState(arr + "_1", "CANCELLED"));
  EXPECT_EQ(Run("squeue -h -n nap").out, "");

  // Slurm's words and exit codes for mistakes.
  CmdResult junk = Run("scancel 12x");
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_EQ(junk.out, "scancel: error: Invalid job id 12x\n");
  // A job scancel does not know, or one that ended: no error for a cancel, as Slurm's
  // (22.05: silent, exit 0; said with -v); a signal to it fails without a word.
  for (const std::string& id : {std::string("99999"), ok}) {
    CmdResult quiet = Run("scancel " + id);
    EXPECT_EQ(quiet.exit_code, 0) << id;
    EXPECT_EQ(quiet.out, "") << id;
    CmdResult signal = Run("scancel --signal=USR1 " + id);
    EXPECT_EQ(signal.exit_code, 1) << id;
    EXPECT_EQ(signal.out, "") << id;
  }
  CmdResult missing = Run("scancel -v 99999");
  EXPECT_EQ(missing.exit_code, 0);
  EXPECT_EQ(missing.out,
            "scancel: error: Kill job error on job id 99999: Invalid job id specified\n");
  CmdResult ended_v = Run("scancel -v " + ok);
  EXPECT_EQ(ended_v.exit_code, 0);
  EXPECT_EQ(ended_v.out, "scancel: error: Kill job error on job id " + ok +
                             ": Job/step already completing or completed\n");
  // squeue -j of a job that ended: nothing but the header (Slurm's default states), so
  // `while [ -n "$(squeue -h -j ID)" ]` ends; -t all shows it; an unknown id is an error.
  CmdResult gone = Run("squeue -h -j " + ok);
  EXPECT_EQ(gone.exit_code, 0);
  EXPECT_EQ(gone.out, "");
  EXPECT_EQ(Run("squeue -j " + ok).out,
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES "
            "NODELIST(REASON)\n");
  EXPECT_EQ(Run("squeue -h -t all -o '%i %t' -j " + ok).out, ok + " CD\n");
  CmdResult unknown = Run("squeue -j 99999");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.out, "slurm_load_jobs error: Invalid job id specified\n");
  EXPECT_EQ(Run("squeue --frob").exit_code, 1);
  // Nine GPUs on one of dev's 8-GPU nodes: refused by the server.
  CmdResult refused_submit = Run("sbatch -G9 --wrap true");
  EXPECT_EQ(refused_submit.exit_code, 1);
  EXPECT_EQ(refused_submit.out.rfind("sbatch: error: Batch job submission failed: ", 0),
            0u)
      << refused_submit.out;

  // A bad option or value, on the command line or an #SBATCH line: 255, as Slurm 22.05's
  // sbatch exits (a script it cannot read, or a refused submission: 1).
  EXPECT_EQ(Run("sbatch --frobnicate --wrap true").exit_code, 255);
  EXPECT_EQ(Run("sbatch -t 9x --wrap true").exit_code, 255);
  Shell("printf '#!/bin/sh\\n#SBATCH -t 9x\\ntrue\\n' > " + dir_ + "/badtime.sh");
  EXPECT_EQ(Run("sbatch " + dir_ + "/badtime.sh").exit_code, 255);
  EXPECT_EQ(Run("sbatch " + dir_ + "/no-such-script.sh").exit_code, 1);

  // No script named: sbatch reads it from standard input, as Slurm's does.
  CmdResult no_script = Run("sbatch -G1 </dev/null");
  EXPECT_EQ(no_script.exit_code, 1);
  EXPECT_EQ(no_script.out, "sbatch: error: Batch script is empty!\n");
  CmdResult not_a_script = Run("echo 'echo hi' | sbatch -G1");
  EXPECT_EQ(not_a_script.exit_code, 1);
  EXPECT_EQ(not_a_script.out,  // Slurm 22.05's three lines
            "sbatch: error: This does not look like a batch script.  The first\n"
            "sbatch: error: line must start with #! followed by the path to an "
            "interpreter.\nsbatch: error: For instance: #!/bin/sh\n");
  CmdResult piped = Run(
      "printf '#!/bin/sh\\n#SBATCH -J piped\\n#SBATCH -G 1\\necho from-stdin $1\\n' | "
      "sbatch --parsable");
  ASSERT_EQ(piped.exit_code, 0) << piped.out;
  const std::string piped_id = piped.out.substr(0, piped.out.find('\n'));
  ASSERT_TRUE(WaitState(piped_id, "COMPLETED")) << Run("squeue").out;
  EXPECT_EQ(Run("sacct -X -P -n -o JobName -j " + piped_id).out, "piped\n");
  EXPECT_EQ(ReadFile(dir_ + "/hachi-" + piped_id + ".out"), "from-stdin\n");
  CmdResult unnamed = Run("printf '#!/bin/sh\\ntrue\\n' | sbatch --parsable --hold");
  ASSERT_EQ(unnamed.exit_code, 0) << unnamed.out;
  const std::string held = unnamed.out.substr(0, unnamed.out.find('\n'));
  EXPECT_EQ(Run("squeue -h -o %j -j " + held).out, "sbatch\n");  // Slurm's name

  // scontrol update of the held job: the new request is the one it runs under.
  EXPECT_EQ(Run("scontrol update JobId=" + held +
                " TimeLimit=7 JobName=updated Comment=checked Gres=gpu:2")
                .out,
            "");
  EXPECT_EQ(Run("squeue -h -o '%j %l %b %k' -j " + held).out,
            "updated 7:00 gres:gpu:2 checked\n");
  EXPECT_EQ(Run("scontrol update JobId=" + held + " TimeLimit=+3").exit_code, 0);
  EXPECT_EQ(Run("squeue -h -o %l -j " + held).out, "10:00\n");
  CmdResult too_big = Run("scontrol update JobId=" + held + " Gres=gpu:9");
  EXPECT_EQ(too_big.exit_code, 1);
  EXPECT_EQ(too_big.out.rfind("job " + held + ": ", 0), 0u) << too_big.out;
  // Slurm's words, bare, as its scontrol prints them.
  CmdResult unsupported = Run("scontrol update JobId=" + held + " Frob=1");
  EXPECT_EQ(unsupported.exit_code, 1);
  EXPECT_EQ(unsupported.out.rfind("Update of this parameter is not supported: Frob=1", 0),
            0u);
  EXPECT_NE(unsupported.out.find("\nRequest aborted\n"), std::string::npos);
  CmdResult nobody = Run("scontrol update JobId=99999 TimeLimit=5");
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_EQ(nobody.out, "Invalid job id specified for job 99999\n");
  CmdResult no_id = Run("scontrol update TimeLimit=5");
  EXPECT_EQ(no_id.exit_code, 1);
  EXPECT_EQ(no_id.out.rfind("No valid entity in update command\n", 0), 0u) << no_id.out;
  EXPECT_EQ(Run("squeue -h -o '%j %l %b' -j " + held).out, "updated 10:00 gres:gpu:2\n")
      << "a refused update changes nothing";
  ASSERT_EQ(Run("scontrol release " + held).exit_code, 0);
  ASSERT_TRUE(WaitState(held, "COMPLETED")) << Run("squeue").out;
  EXPECT_EQ(Run("sacct -X -P -n -o JobName,Timelimit,AllocTRES -j " + held)
                .out.find("updated|00:10:00|"),
            0u)
      << Run("sacct -X -P -n -o JobName,Timelimit,AllocTRES -j " + held).out;
  EXPECT_NE(Run("sacct -X -P -n -o AllocTRES -j " + held).out.find("gres/gpu=2"),
            std::string::npos);
  // A running job's limit, lengthened (root on the socket is an admin): the agent lets
  // it run past the 3 s it started with, to its end.
  CmdResult longer = Run("sbatch --parsable -t 0:03 -G1 --wrap 'sleep 6; echo lived'");
  ASSERT_EQ(longer.exit_code, 0) << longer.out;
  const std::string longer_id = longer.out.substr(0, longer.out.find('\n'));
  ASSERT_TRUE(WaitState(longer_id, "RUNNING"));
  EXPECT_EQ(Run("scontrol update JobId=" + longer_id + " TimeLimit=0:30").out, "");
  EXPECT_EQ(Run("squeue -h -o %l -j " + longer_id).out, "0:30\n");
  ASSERT_TRUE(WaitState(longer_id, "COMPLETED")) << Run("sacct -j " + longer_id).out;
  EXPECT_EQ(ReadFile(dir_ + "/hachi-" + longer_id + ".out"), "lived\n");
  CmdResult ended = Run("scontrol update JobId=" + held + " TimeLimit=5");
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_NE(ended.out.find("has already finished"), std::string::npos) << ended.out;

  // scontrol.
  EXPECT_NE(Run("scontrol show jobid -dd " + ok).out.find("JobId=" + ok + " JobName=ok"),
            std::string::npos);
  EXPECT_EQ(Run("scontrol show hostnames 'gpu[01-02]'").out, "gpu01\ngpu02\n");
  EXPECT_EQ(Run("SLURM_JOB_NODELIST='n[7-8]' scontrol show hostnames").out, "n7\nn8\n");
  EXPECT_NE(Run("scontrol show partition").out.find("PartitionName=default"),
            std::string::npos);
  EXPECT_EQ(Run("scontrol show job 99999").exit_code, 1);

  // srun inside an allocation makes a job step (steps_e2e_test.cc); one that names
  // no job Hachi knows is refused by the server.
  CmdResult nojob = Run("SLURM_JOB_ID=999999 srun true");
  EXPECT_EQ(nojob.exit_code, 1);
  EXPECT_EQ(nojob.out.rfind("srun: error: Unable to create step for job 999999: ", 0), 0u)
      << nojob.out;
}

// A GPU job without -c holds its GPUs' share of the node's CPUs (224 CPUs, 8 GPUs: 28
// per GPU, Slurm's DefCpuPerGPU), and every view says so while it runs: it was NumCPUs=0,
// TRES cpu=0, CPUAlloc=0 and sinfo's %C 0 allocated. sinfo -o "%n %G %C" (no partition
// field) counts each node once.
TEST_F(SlurmE2e, AGpuJobWithoutCpusHoldsItsGpusShareAndEveryViewSaysSo) {
  CmdResult sub = Run("sbatch --parsable -G 2 -o " + dir_ +
                      "/cpus.out --wrap 'echo cpus=$SLURM_CPUS_ON_NODE; sleep 60'");
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  ASSERT_TRUE(WaitState(id, "RUNNING")) << Run("squeue").out;
  const std::string job = Run("scontrol show job " + id).out;
  EXPECT_NE(job.find(" NumCPUs=56 "), std::string::npos) << job;
  EXPECT_NE(job.find("TRES=cpu=56,"), std::string::npos) << job;
  EXPECT_EQ(Run("sinfo -h -o '%n %G %C'").out, "node[1-2] gpu:h100:8 56/392/0/448\n");
  const std::string node = Run("scontrol show node node1").out;
  EXPECT_NE(node.find("CPUAlloc=56 "), std::string::npos) << node;
  EXPECT_EQ(Run("squeue -h -o %C -j " + id).out, "56\n");
  EXPECT_TRUE(WaitFor([&] { return ReadFile(dir_ + "/cpus.out") == "cpus=56\n"; }))
      << ReadFile(dir_ + "/cpus.out");
  EXPECT_EQ(Run("scancel " + id).exit_code, 0);
  ASSERT_TRUE(WaitState(id, "CANCELLED"));
  EXPECT_EQ(Run("sinfo -h -o '%n %G %C'").out, "node[1-2] gpu:h100:8 0/448/0/448\n");
  // --mem=0: all of the node's memory (2 TiB here), not the per-GPU default.
  CmdResult all = Run("sbatch --parsable -H -G 1 --mem=0 --wrap true");
  ASSERT_EQ(all.exit_code, 0) << all.out;
  EXPECT_EQ(all.out.find("warning"), std::string::npos) << all.out;
  const std::string held =
      Run("scontrol show job " + all.out.substr(0, all.out.find('\n'))).out;
  EXPECT_NE(held.find(",mem=2097152M,"), std::string::npos) << held;
}

// sshare and sprio read the server's fair share and queue order; scontrol update
// NodeName= drains and resumes a node, in Slurm's words.
TEST_F(SlurmE2e, FairShareAndPriorityAndNodeStatesAsSlurmsCommands) {
  CmdResult ran = Run("sbatch --parsable -A physics -G 8 --wrap 'sleep 2'");
  ASSERT_EQ(ran.exit_code, 0) << ran.out;
  const std::string ran_id = ran.out.substr(0, ran.out.find('\n'));
  ASSERT_TRUE(WaitState(ran_id, "COMPLETED")) << Run("squeue").out;
  // No shares configured: every account's factor is 1; physics used 8 GPUs for ~2 s.
  const std::string share = Run("sshare -a -P -n").out;
  EXPECT_EQ(share.rfind("root|||1.000000|", 0), 0u) << share;
  EXPECT_NE(share.find("\n physics||0|0.000000|"), std::string::npos) << share;
  EXPECT_NE(share.find("\n  physics|root|parent|0.000000|"), std::string::npos) << share;
  EXPECT_NE(share.find("|1.000000|1.000000\n"), std::string::npos) << share;
  // sreport: the same GPU time, by account and user, over a period around now.
  const std::string by_user =
      Run("sreport -nP -t seconds cluster AccountUtilizationByUser start=now-1hours "
          "end=now+1hours format=Account,Login,TresName")
          .out;
  EXPECT_EQ(by_user, "root||gres/gpu\nphysics||gres/gpu\nphysics|root|gres/gpu\n");
  const std::string top =
      Run("sreport -P user TopUsage start=now-1hours end=now+1hours").out;
  EXPECT_NE(top.find("\nCluster|Login|Proper Name|Account|TRES Name|Used\n|root|"),
            std::string::npos)
      << top;
  EXPECT_NE(top.find("|physics|gres/gpu|"), std::string::npos) << top;
  CmdResult header = Run("sshare");
  EXPECT_EQ(header.out.rfind("Account                    User  RawShares  NormShares    "
                             "RawUsage  EffectvUsage  FairShare \n",
                             0),
            0u)
      << header.out;

  CmdResult held = Run("sbatch --parsable -H -A physics -G 2 --wrap true");
  ASSERT_EQ(held.exit_code, 0) << held.out;
  const std::string held_id = held.out.substr(0, held.out.find('\n'));
  // A job waiting on the held one is pending and could start once it may: sprio lists
  // it, not the held one (Slurm's sprio leaves held jobs out).
  CmdResult waits =
      Run("sbatch --parsable -A physics -G 2 -d afterok:" + held_id + " --wrap true");
  ASSERT_EQ(waits.exit_code, 0) << waits.out;
  const std::string waits_id = waits.out.substr(0, waits.out.find('\n'));
  EXPECT_EQ(Run("sprio -j " + held_id).out,
            "Unable to find jobs matching user/id(s) specified\n");
  const std::string prio = Run("sprio -j " + waits_id).out;
  EXPECT_EQ(prio.rfind("          JOBID PARTITION   PRIORITY       SITE        AGE  "
                       "FAIRSHARE    JOBSIZE  PARTITION        QOS\n",
                       0),
            0u)
      << prio;
  // Fair share 10000 x 1, size 500 x 2/8: 10125 (and an age of 0 to a few points).
  EXPECT_NE(prio.find(" default        1012"), std::string::npos) << prio;
  EXPECT_NE(prio.find("      10000        125          0          0\n"),
            std::string::npos)
      << prio;
  EXPECT_EQ(
      Run("sprio -w -h").out,
      "        Weights                               1       1000      10000        "
      "500     100000       2000\n");
  EXPECT_EQ(Run("sprio -j 99999").out,
            "Unable to find jobs matching user/id(s) specified\n");
  // scontrol show job: Slurm's lines, its priority (0 while held, as Slurm's), the
  // group's name, the tasks as asked.
  const std::string shown = Run("scontrol show job " + held_id).out;
  EXPECT_NE(shown.find("   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
                       "   Priority=0 Nice=0 Account=physics QOS=(null)\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("   SuspendTime=None SecsPreSuspend=0 LastSchedEval=Unknown "
                       "Scheduler=Main\n"),
            std::string::npos)
      << shown;
  const std::string waits_shown = Run("scontrol show job " + waits_id).out;
  EXPECT_NE(waits_shown.find("   Priority=1012"), std::string::npos) << waits_shown;
  // Who held it: sbatch -H is the user's hold, root's scontrol hold an administrator's,
  // and root's uhold hands it back to the user.
  const std::string reason = "squeue -h -o %r -j " + held_id;
  EXPECT_EQ(Run(reason).out, "JobHeldUser\n");
  EXPECT_EQ(Run("scontrol hold " + held_id).exit_code, 0);
  EXPECT_EQ(Run(reason).out, "JobHeldAdmin\n");
  EXPECT_EQ(Run("scontrol uhold " + held_id).exit_code, 0);
  EXPECT_EQ(Run(reason).out, "JobHeldUser\n");
  EXPECT_EQ(Run("scancel " + waits_id + " " + held_id).exit_code, 0);
  CmdResult tasks =
      Run("sbatch --parsable -H --ntasks-per-node=4 -c 2 -G1 -x node1 --wrap true");
  ASSERT_EQ(tasks.exit_code, 0) << tasks.out;
  const std::string tasks_id = tasks.out.substr(0, tasks.out.find('\n'));
  const std::string tasks_shown = Run("scontrol show job " + tasks_id).out;
  EXPECT_NE(tasks_shown.find(" NumTasks=4 CPUs/Task=2 ReqB:S:C:T=0:0:*:*\n"),
            std::string::npos)
      << tasks_shown;
  EXPECT_NE(tasks_shown.find("   ReqNodeList=(null) ExcNodeList=node1\n"),
            std::string::npos)
      << tasks_shown;
  EXPECT_NE(tasks_shown.find("NtasksPerN:B:S:C=4:0:*:*"), std::string::npos);
  EXPECT_EQ(Run("scancel " + tasks_id).exit_code, 0);

  // sacctmgr: the tree the config and the jobs make; changes are the config's.
  EXPECT_EQ(Run("sacctmgr -nP show assoc user=root format=Account,User,Share").out,
            "physics|root|parent\n");
  EXPECT_EQ(Run("sacctmgr -nP show user root").out, "root|root|Administrator\n");
  // scontrol show assoc_mgr: physics's association with the job running under it.
  const std::string assoc = Run("scontrol show assoc_mgr users=root flags=assoc").out;
  EXPECT_EQ(assoc.rfind("Current Association Manager state\n\nAssociation Records\n\n"
                        "ClusterName= Account=physics UserName=root(0) Partition= ",
                        0),
            0u)
      << assoc;
  EXPECT_NE(assoc.find("    GrpJobs=N(0) GrpJobsAccrue=N(0)\n"), std::string::npos)
      << assoc;
  CmdResult bad_flag = Run("scontrol show assoc_mgr flags=jobs");
  EXPECT_EQ(bad_flag.exit_code, 1);
  EXPECT_EQ(bad_flag.out,
            "invalid flag 'jobs', valid options are 'Assoc, QOS, and/or Users'\n");
  CmdResult add = Run("sacctmgr -i add account chem");
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.out.rfind("sacctmgr: error: Hachi's accounts", 0), 0u) << add.out;

  // Drain and resume a node; a drain needs a reason; an unknown node is named.
  EXPECT_EQ(Run("scontrol update NodeName=node2 State=DRAIN Reason='disk check'").out,
            "");
  EXPECT_NE(Run("scontrol show node node2").out.find("Reason=disk check"),
            std::string::npos)
      << Run("scontrol show node node2").out;
  CmdResult no_reason = Run("scontrol update NodeName=node2 State=DRAIN");
  EXPECT_EQ(no_reason.exit_code, 1);
  EXPECT_EQ(
      no_reason.out,
      "You must specify a reason when DOWNING or DRAINING a node. Request denied\n");
  EXPECT_EQ(Run("scontrol update NodeName=node2 State=RESUME").out, "");
  EXPECT_EQ(Run("scontrol show node node2").out.find("Reason=disk check"),
            std::string::npos);
  CmdResult nobody = Run("scontrol update NodeName=node9 State=RESUME");
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_EQ(nobody.out, "slurm_update error: Invalid node name specified (node9)\n");

  // sattach: a running step's output beside its srun, to its end; the batch script's
  // srun still gets all of it.
  CmdResult stepper = Run(
      "sbatch --parsable -G1 --wrap \"srun bash -c 'for i in 1 2 3 4 5 6; do echo tick "
      "\\$i; sleep 0.5; done'\"");
  ASSERT_EQ(stepper.exit_code, 0) << stepper.out;
  const std::string stepper_id = stepper.out.substr(0, stepper.out.find('\n'));
  ASSERT_TRUE(WaitFor([&] {
    return Run("sacct -n -P -o JobID,State -j " + stepper_id)
               .out.find(stepper_id + ".0|RUNNING") != std::string::npos;
  })) << Run("sacct -j " + stepper_id).out;
  CmdResult attached = Run("sattach " + stepper_id + ".0");
  EXPECT_EQ(attached.exit_code, 0) << attached.out;
  EXPECT_EQ(attached.out.find("tick 1\n"), 0u) << attached.out;
  EXPECT_NE(attached.out.find("tick 6\n"), std::string::npos) << attached.out;
  CmdResult no_step = Run("sattach " + stepper_id + ".9");
  EXPECT_EQ(no_step.exit_code, 1);
  EXPECT_EQ(no_step.out,
            "sattach: error: StepId=" + stepper_id + ".9 not found running\n");
  ASSERT_TRUE(WaitState(stepper_id, "COMPLETED"));
  EXPECT_EQ(ReadFile(dir_ + "/hachi-" + stepper_id + ".out"),
            "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\n");

  // sstat: a running job's line; an ended one is Slurm's error, exit 0.
  CmdResult sleeper = Run("sbatch --parsable -G1 --wrap 'sleep 60'");
  ASSERT_EQ(sleeper.exit_code, 0) << sleeper.out;
  const std::string sleeper_id = sleeper.out.substr(0, sleeper.out.find('\n'));
  ASSERT_TRUE(WaitState(sleeper_id, "RUNNING"));
  EXPECT_EQ(Run("sstat -n -P -o JobID -j " + sleeper_id).out, sleeper_id + "\n");
  EXPECT_EQ(Run("sstat -j " + sleeper_id).out.rfind("JobID         MaxVMSize ", 0), 0u);
  EXPECT_EQ(Run("scancel " + sleeper_id).exit_code, 0);
  ASSERT_TRUE(WaitState(sleeper_id, "CANCELLED"));
  CmdResult ended = Run("sstat -n -j " + sleeper_id);
  EXPECT_EQ(ended.exit_code, 0);
  EXPECT_EQ(ended.out, "sstat: error: No steps running for job " + sleeper_id + "\n");
}

}  // namespace
}  // namespace hachi::cli
