#include "config/slurm_conf.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "config/cluster_config.h"
#include "core/strings.h"
#include "core/testing/paths.h"

namespace hachi::config {
namespace {

bool HasNote(const SlurmConfImport& r, const std::string& part) {
  for (const std::string& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// The slurm.conf of Debian's Slurm on this machine (../shared/tools/slurm-baseline):
// both partitions come over, the default first, and every daemon setting is a note.
TEST(ImportSlurmConf, TheBaselineClustersConf) {
  std::string error;
  const std::optional<std::string> text =
      ReadFile(SourceDir() + "/src/config/testdata/slurm-baseline.conf", &error);
  ASSERT_TRUE(text.has_value()) << error;
  Result<SlurmConfImport> r = ImportSlurmConf(*text, "slurm.conf");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const size_t shared = r->toml.find("name = \"gpu-shared\"");
  const size_t whole = r->toml.find("name = \"gpu8\"");
  ASSERT_NE(shared, std::string::npos) << r->toml;
  ASSERT_NE(whole, std::string::npos) << r->toml;
  EXPECT_LT(shared, whole) << "the Default=YES partition comes first";
  EXPECT_NE(r->toml.find("mode = \"whole-node\"", whole), std::string::npos);
  EXPECT_NE(r->toml.find("max_time = \"3650d\""), std::string::npos);
  EXPECT_NE(r->toml.find("default_cpus_per_gpu = 8\n", shared), std::string::npos)
      << r->toml;
  EXPECT_FALSE(HasNote(*r, "PartitionName=gpu-shared: defcpupergpu=8"));
  EXPECT_TRUE(HasNote(*r, "SchedulerType=sched/backfill"));
  EXPECT_TRUE(HasNote(*r, "slurm.conf:36: NodeName=gpu[01-04]: port=[17001-17004]") ==
              false)
      << "ports are what agents register with, not a note";
  Result<ClusterConfig> parsed = ParseClusterConfig(r->toml, "imported.toml");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << r->toml;
}

// Features and GPU type names, DEFAULT lines, continuations, quotes, comments, times in
// every Slurm form, and what has no equivalent.
TEST(ImportSlurmConf, FeaturesTypesDefaultsAndNotes) {
  const std::string conf =
      "ClusterName=research   # a comment\n"
      "NodeName=DEFAULT CPUs=128 RealMemory=1000000 Feature=ib\n"
      "NodeName=hgx[01-16] Gres=gpu:h100:8(S:0-1) Feature=ib,\"nvswitch\" \\\n"
      "   Weight=10\n"
      "NodeName=l40s[1-4] Gres=gpu:l40s:8 Features=pcie\n"
      "NodeName=cpu[1-8] CPUs=64\n"
      "PartitionName=DEFAULT MaxTime=2-00:00:00 State=UP\n"
      "PartitionName=gpu8 Nodes=hgx[01-16] OverSubscribe=EXCLUSIVE PriorityTier=2 "
      "PreemptMode=REQUEUE GraceTime=120 AllowAccounts=ml,vision\n"
      "PartitionName=inference Nodes=l40s[1-4] DefaultTime=30 MaxTime=12:00:00 "
      "DefMemPerGPU=65536 AllowGroups=infer Default=YES\n"
      "PartitionName=cpu Nodes=cpu[1-8] MaxTime=INFINITE PreemptMode=SUSPEND\n";
  Result<SlurmConfImport> r = ImportSlurmConf(conf, "site.conf");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string& t = r->toml;
  EXPECT_LT(t.find("name = \"inference\""), t.find("name = \"gpu8\""));
  EXPECT_NE(t.find("[node.\"hgx[01-16]\"]\nfeatures = [\"ib\", \"nvswitch\"]\n"
                   "gres_type = \"h100\"\n"),
            std::string::npos)
      << t;
  EXPECT_NE(
      t.find("[node.\"l40s[1-4]\"]\nfeatures = [\"ib\", \"pcie\"]\ngres_type = \"l40s\""),
      std::string::npos)
      << "the DEFAULT line's feature is kept: " << t;
  EXPECT_NE(t.find("[node.\"cpu[1-8]\"]\nfeatures = [\"ib\"]"), std::string::npos) << t;
  EXPECT_NE(t.find("max_time = \"2d\""), std::string::npos)
      << "from PartitionName=DEFAULT";
  EXPECT_NE(t.find("default_time = \"30m\""), std::string::npos);
  EXPECT_NE(t.find("max_time = \"12h\""), std::string::npos);
  EXPECT_NE(t.find("tier = 2"), std::string::npos);
  EXPECT_NE(t.find("preempt_mode = \"requeue\""), std::string::npos);
  EXPECT_NE(t.find("grace = \"120s\""), std::string::npos);
  EXPECT_NE(t.find("allowed_accounts = [\"ml\", \"vision\"]"), std::string::npos);
  EXPECT_NE(t.find("default_mem_per_gpu = 65536"), std::string::npos);
  EXPECT_TRUE(HasNote(*r, "site.conf:3: NodeName=hgx[01-16]: weight=10: no Hachi"));
  EXPECT_TRUE(HasNote(*r, "PartitionName=inference: allowgroups=infer"));
  EXPECT_TRUE(HasNote(*r, "PartitionName=cpu: PreemptMode=SUSPEND"));
  EXPECT_TRUE(HasNote(*r, "site.conf:1: ClusterName=research"));
  Result<ClusterConfig> parsed = ParseClusterConfig(t, "imported.toml");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << t;
}

TEST(ImportSlurmConf, RefusesWhatIsNotSlurmConf) {
  Result<SlurmConfImport> r = ImportSlurmConf("[[partition]]\nname = \"x\"\n", "c.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "c.toml:1: '[[partition]]' is not Key=Value (is this slurm.conf?)");
  r = ImportSlurmConf("PartitionName= Nodes=a\n", "s.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "s.conf:1: PartitionName= without a name");
}

}  // namespace
}  // namespace hachi::config
