// Table tests of ParseClusterConfig: what good files produce, and that every bad one
// is refused with the file, the line and the key path.
#include "config/cluster_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hachi::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kMinimal = R"(
[[partition]]
name = "p"
nodes = "all"
)";

TEST(ParseClusterConfigTest, FullFile) {
  const char* text = R"(# a comment
[[partition]]
name = "gpu8"
nodes = ["n[0001-0004]", "n0009"]
mode = "whole-node"
min_gpus = 8
max_gpus = 64
default_time = "2h"
max_time = "3d"
tier = 3
allowed_users = ["alice", "bob"]
allowed_accounts = "team-a"
preempt_lower_tiers = true
preempt_mode = "cancel"
grace = "90s"
default_mem_per_gpu = "64G"
window = { start = "08:00", end = "20:00", days = ["mon-fri", "sun"], nodes = "n[0001-0002]" }
idle_gpu_after = "30m"
idle_gpu_below = 10
idle_gpu_action = "requeue"

[[partition]]
name = "night"
nodes = "all"
default_mem_per_gpu = 2048
window = [{ start = 22:00:00, end = "24:00" }, { start = "00:00", end = "06:00" }]

[[qos]]
name = "high"
priority = 700

[limits]
user_gpus = { alice = 16 }
account_gpus = { team-a = 32, "team b" = 8 }

[fairshare]
shares = { team-a = 2, team-b = 0.5 }
half_life = "2d"

[priority]
age = 10
age_max = "1d"
fairshare = 20
tier = 30.5
qos = 40
size = 0

[node."n[0001-0002]"]
block = "b99"

[sim]
account_partitions = { "6214e9" = "night" }
)";
  Result<ClusterConfig> c = ParseClusterConfig(text, "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->partitions.size(), 2u);
  const PartitionConfig& g = c->partitions[0];
  const sched::Partition& p = g.partition;
  EXPECT_EQ(p.name, "gpu8");
  EXPECT_THAT(g.nodes.names, ElementsAre("n0001", "n0002", "n0003", "n0004", "n0009"));
  EXPECT_FALSE(g.nodes.all);
  EXPECT_EQ(g.nodes.where, "c.toml:4: partition[0].nodes");
  EXPECT_EQ(p.mode, sched::PartitionMode::kWholeNode);
  EXPECT_EQ(p.min_gpus, 8);
  EXPECT_EQ(p.max_gpus, 64);
  EXPECT_EQ(p.default_time, 2 * kHour);
  EXPECT_EQ(p.max_time, 3 * kDay);
  EXPECT_EQ(p.tier, 3);
  EXPECT_THAT(p.allowed_users, ElementsAre("alice", "bob"));
  EXPECT_THAT(p.allowed_accounts, ElementsAre("team-a"));
  EXPECT_TRUE(p.preempt_lower_tiers);
  EXPECT_EQ(p.preempt_mode, sched::PreemptMode::kCancel);
  EXPECT_EQ(p.grace, 90);
  EXPECT_EQ(p.default_mem_per_gpu_mib, 64 * 1024);
  ASSERT_EQ(p.windows.size(), 1u);
  EXPECT_EQ(p.windows[0].start_minute, 8 * 60);
  EXPECT_EQ(p.windows[0].end_minute, 20 * 60);
  EXPECT_THAT(p.windows[0].days, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_TRUE(g.has_window_nodes);
  EXPECT_THAT(g.window_nodes.names, ElementsAre("n0001", "n0002"));
  EXPECT_EQ(g.idle.after, 30 * kMinute);
  EXPECT_EQ(g.idle.below_pct, 10);
  EXPECT_EQ(g.idle.action, IdleAction::kRequeue);

  const PartitionConfig& n = c->partitions[1];
  EXPECT_TRUE(n.nodes.all);
  EXPECT_EQ(n.partition.mode, sched::PartitionMode::kShared);  // defaults
  EXPECT_EQ(n.partition.min_gpus, 1);
  EXPECT_EQ(n.partition.max_gpus, 0);
  EXPECT_EQ(n.partition.default_time, 4 * kHour);
  EXPECT_EQ(n.partition.max_time, 7 * kDay);
  EXPECT_EQ(n.partition.grace, 5 * kMinute);
  EXPECT_EQ(n.partition.default_mem_per_gpu_mib, 2048) << "an integer is MiB";
  EXPECT_EQ(n.partition.preempt_mode, sched::PreemptMode::kRequeue);
  EXPECT_EQ(n.idle.after, 0) << "no idle policy unless asked";
  ASSERT_EQ(n.partition.windows.size(), 2u);
  EXPECT_EQ(n.partition.windows[0].start_minute, 22 * 60);
  EXPECT_EQ(n.partition.windows[0].end_minute, 1440);
  EXPECT_FALSE(n.has_window_nodes);

  ASSERT_EQ(c->qos.size(), 1u);
  EXPECT_EQ(c->qos[0].name, "high");
  EXPECT_EQ(c->qos[0].priority, 700);
  EXPECT_EQ(c->limits.user_gpus.at("alice"), 16);
  EXPECT_EQ(c->limits.account_gpus.at("team b"), 8);
  EXPECT_DOUBLE_EQ(c->shares.at("team-b"), 0.5);
  EXPECT_EQ(c->fairshare_half_life, 2 * kDay);
  EXPECT_DOUBLE_EQ(c->weights.age, 10);
  EXPECT_EQ(c->weights.age_max, kDay);
  EXPECT_DOUBLE_EQ(c->weights.tier, 30.5);
  EXPECT_DOUBLE_EQ(c->weights.size, 0);
  ASSERT_EQ(c->node_overrides.size(), 1u);
  EXPECT_EQ(c->node_overrides[0].block, "b99");
  EXPECT_THAT(c->node_overrides[0].nodes.names, ElementsAre("n0001", "n0002"));
  EXPECT_EQ(c->sim.account_partitions.at("6214e9"), "night");
}

TEST(ParseClusterConfigTest, AuthAndAccounts) {
  Result<ClusterConfig> c = ParseClusterConfig(R"(
[auth]
admins = ["alice"]
anonymous_read = "none"
tls_cert = "/etc/hachi/cert.pem"
tls_key = "/etc/hachi/key.pem"
cluster_secret_file = "/etc/hachi/secret"
browser_hosts = ["hachi.corp.example", "ctl1"]

[[account]]
name = "vision"
members = ["bob", "carol"]
)",
                                               "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->auth.admins, std::vector<std::string>{"alice"});
  EXPECT_EQ(c->auth.anonymous_read, "none");
  EXPECT_EQ(c->auth.tls_cert, "/etc/hachi/cert.pem");
  EXPECT_EQ(c->auth.tls_key, "/etc/hachi/key.pem");
  EXPECT_EQ(c->auth.cluster_secret_file, "/etc/hachi/secret");
  EXPECT_EQ(c->auth.browser_hosts,
            (std::vector<std::string>{"hachi.corp.example", "ctl1"}));
  ASSERT_EQ(c->accounts.size(), 1u);
  EXPECT_EQ(c->accounts[0].name, "vision");
  EXPECT_EQ(c->accounts[0].members, (std::vector<std::string>{"bob", "carol"}));
  Result<ClusterConfig> none = ParseClusterConfig("", "c.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->auth.anonymous_read, "localhost");
  EXPECT_TRUE(none->accounts.empty());
}

// [burn_in] and per-node-group lists; simulated nodes skip [burn_in]'s checks
// unless it says simulated = true, while a node override's list always applies.
TEST(ParseClusterConfigTest, BurnIn) {
  Result<ClusterConfig> none = ParseClusterConfig("", "c.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->burn_in.checks, std::vector<std::string>{"doctor"});
  EXPECT_EQ(none->burn_in.timeout, 1800);
  EXPECT_EQ(BurnInChecksFor(*none, "n1", false), std::vector<std::string>{"doctor"});
  EXPECT_TRUE(BurnInChecksFor(*none, "n1", true).empty());

  Result<ClusterConfig> c = ParseClusterConfig(R"(
[burn_in]
checks = ["doctor --expect-gpus 8", " commtest --size 64M ", "/usr/local/sbin/site-check -q"]
timeout = "45m"

[node."gpu[01-02]"]
burn_in = []

[node."pcie01"]
burn_in = ["doctor"]
)",
                                               "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->burn_in.checks,
            (std::vector<std::string>{"doctor --expect-gpus 8", "commtest --size 64M",
                                      "/usr/local/sbin/site-check -q"}));
  EXPECT_EQ(c->burn_in.timeout, 45 * 60);
  EXPECT_FALSE(c->burn_in.simulated);
  EXPECT_EQ(BurnInChecksFor(*c, "n7", false).size(), 3u);
  EXPECT_TRUE(BurnInChecksFor(*c, "n7", true).empty());
  EXPECT_TRUE(BurnInChecksFor(*c, "gpu02", false).empty());  // off for the group
  EXPECT_EQ(BurnInChecksFor(*c, "pcie01", true), std::vector<std::string>{"doctor"});

  const std::pair<const char*, const char*> bad[] = {
      {"[burn_in]\nchecks = [\"memtest\"]\n",
       "c.toml:2: burn_in.checks: 'memtest' is not a burn-in check: \"doctor\" or "
       "\"commtest\" (with their options), or a site script's absolute path"},
      {"[burn_in]\nchecks = [\"\"]\n",
       "c.toml:2: burn_in.checks: a burn-in check is empty"},
      {"[burn_in]\ntimeout = \"0s\"\n",
       "c.toml:2: burn_in.timeout: must be longer than 0s"},
      {"[burn_in]\nsimulated = \"yes\"\n",
       "c.toml:2: burn_in.simulated: expected true or false, got a string"},
      {"[burn_in]\nscript = \"/x\"\n", "c.toml:2: burn_in.script: unknown key"},
      {"[node.\"n1\"]\nburn_in = [\"./check.sh\"]\n",
       "c.toml:2: node.n1.burn_in: './check.sh' is not a burn-in check"},
  };
  for (const auto& [text, want] : bad) {
    Result<ClusterConfig> r = ParseClusterConfig(text, "c.toml");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(ParseClusterConfigTest, Pools) {
  Result<ClusterConfig> c = ParseClusterConfig(R"(
[[pool]]
name = "owned"
nodes = "gpu[01-64]"
price_per_gpu_hour = 1.1

[[pool]]
name = "burst-a"
nodes = ["burst[01-16]", "burst20"]
kind = "burst"
resume_program = "/usr/local/sbin/hachi-resume"
suspend_program = "/usr/local/sbin/hachi-suspend"
resume_fail_program = "/usr/local/sbin/hachi-resume-failed"
preset = "hgx-h100"
suspend_after = "20m"
resume_timeout = "12m"
max_powered = 8
price_per_gpu_hour = 2.85
)",
                                               "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->pools.size(), 2u);
  const PoolConfig& owned = c->pools[0];
  EXPECT_EQ(owned.kind, PoolKind::kFixed);
  EXPECT_EQ(owned.nodes.names.size(), 64u);
  EXPECT_DOUBLE_EQ(owned.price_per_gpu_hour, 1.1);
  const PoolConfig& burst = c->pools[1];
  EXPECT_EQ(burst.kind, PoolKind::kBurst);
  EXPECT_EQ(PoolKindName(burst.kind), "burst");
  EXPECT_EQ(burst.nodes.names.size(), 17u);
  EXPECT_EQ(burst.nodes.names.back(), "burst20");
  EXPECT_EQ(burst.resume_program, "/usr/local/sbin/hachi-resume");
  EXPECT_EQ(burst.suspend_program, "/usr/local/sbin/hachi-suspend");
  EXPECT_EQ(burst.resume_fail_program, "/usr/local/sbin/hachi-resume-failed");
  EXPECT_EQ(burst.preset, "hgx-h100");
  EXPECT_EQ(burst.suspend_after, 20 * kMinute);
  EXPECT_EQ(burst.resume_timeout, 12 * kMinute);
  EXPECT_EQ(burst.max_powered, 8);
  EXPECT_DOUBLE_EQ(burst.price_per_gpu_hour, 2.85);
}

TEST(ParseClusterConfigTest, PoolErrors) {
  const std::string burst =
      "[[pool]]\nname = \"b\"\nnodes = \"b[1-4]\"\nkind = \"burst\"\n";  // 1-4
  const std::string programs =
      "resume_program = \"/r\"\nsuspend_program = \"/s\"\n";  // lines 5-6
  const std::pair<std::string, std::string> cases[] = {
      {"[[pool]]\nname = \"p\"\n", "c.toml:1: pool[0]: needs nodes (names or ranges)"},
      {"[[pool]]\nname = \"p\"\nnodes = \"all\"\n",
       "c.toml:3: pool[0].nodes: a pool names its nodes"},
      {"[[pool]]\nname = \"p\"\nnodes = \"n1\"\nkind = \"spot\"\n",
       "c.toml:4: pool[0].kind: 'spot' is not a pool kind (\"fixed\" or \"burst\")"},
      {burst + "resume_program = \"/r\"\n",
       "c.toml:1: pool[0]: a burst pool needs a suspend_program"},
      {burst + "resume_program = \"r.sh\"\n",
       "c.toml:5: pool[0].resume_program: 'r.sh' is not an absolute path to a program"},
      {"[[pool]]\nname = \"f\"\nnodes = \"n1\"\nresume_program = \"/r\"\n",
       "c.toml:4: pool[0].resume_program: a fixed pool's nodes are always powered"},
      {"[[pool]]\nname = \"f\"\nnodes = \"n1\"\nsuspend_after = \"5m\"\n",
       "c.toml:4: pool[0].suspend_after: only a burst pool is powered up and down"},
      {burst + programs + "suspend_after = \"0s\"\n",
       "c.toml:7: pool[0].suspend_after: must be longer than 0s"},
      {burst + programs + "price_per_gpu_hour = -1\n",
       "c.toml:7: pool[0].price_per_gpu_hour: must be a number from 0 to"},
      {burst + programs + "preset = \"hgx-h900\"\n",
       "c.toml:7: pool[0].preset: 'hgx-h900' is not a preset (a800, "},
      {"[[pool]]\nname = \"f\"\nnodes = \"n1\"\npreset = \"hgx-h100\"\n",
       "c.toml:4: pool[0].preset: only a burst pool is powered up and down"},
      {burst + programs + "max_powered = -2\n",
       "c.toml:7: pool[0].max_powered: -2 is out of range 0..100000"},
      {burst + programs + "[[pool]]\nname = \"f\"\nnodes = \"b3\"\n",
       "c.toml:9: pool[1].nodes: node 'b3' is already in pool 'b'"},
      {burst + programs + "[[pool]]\nname = \"b\"\nnodes = \"x1\"\n",
       "c.toml:8: pool[1].name: 'b' is already the name of pool[0]"},
  };
  for (const auto& [text, want] : cases) {
    Result<ClusterConfig> got = ParseClusterConfig(text, "c.toml");
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(got.status().message(), HasSubstr(want)) << text;
  }
}

TEST(ParseClusterConfigTest, EmptyFileKeepsDefaults) {
  Result<ClusterConfig> c = ParseClusterConfig("", "empty.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->partitions.empty());
  EXPECT_DOUBLE_EQ(c->weights.tier, sched::PriorityWeights{}.tier);
  ASSERT_TRUE(ParseClusterConfig(kMinimal, "m.toml").ok());
}

// Each bad file is refused with "file:line: key path: what is wrong".
TEST(ParseClusterConfigTest, Errors) {
  struct Case {
    const char* name;
    std::string text;
    const char* want;
  };
  const std::string part = "[[partition]]\nname = \"p\"\nnodes = \"all\"\n";  // lines 1-3
  const Case cases[] = {
      {"bad duration", part + "max_time = \"9x\"\n",
       "c.toml:4: partition[0].max_time: '9x' is not a duration (use 30m, 4h, 7d)"},
      {"duration as a number", part + "grace = 300\n",
       "c.toml:4: partition[0].grace: expected a duration string (30m, 4h, 7d), got an "
       "integer"},
      {"unknown partition key", part + "max_gpu = 4\n",
       "c.toml:4: partition[0].max_gpu: unknown key (known: name, nodes, mode"},
      {"unknown top-level key", "[partitions]\nname = 1\n",
       "c.toml:1: partitions: unknown key (known: partition, qos"},
      {"syntax error", "[[partition]\n", "c.toml:1: "},
      {"duplicate key", part + "name = \"q\"\n", "c.toml:4: "},
      {"partition not an array", "[partition]\nname = \"p\"\n",
       "c.toml:1: partition: expected [[partition]] tables, got a table"},
      {"no name", "[[partition]]\nnodes = \"all\"\n",
       "c.toml:1: partition[0]: needs a name"},
      {"no nodes", "[[partition]]\nname = \"p\"\n",
       "c.toml:1: partition[0]: needs nodes"},
      {"bad name", "[[partition]]\nname = \"a b\"\nnodes = \"all\"\n",
       "c.toml:2: partition[0].name: 'a b' is not a name"},
      {"name not a string", "[[partition]]\nname = 3\nnodes = \"all\"\n",
       "c.toml:2: partition[0].name: expected a string, got an integer"},
      {"duplicate partition", part + part,
       "c.toml:5: partition[1].name: 'p' is already the name of partition[0] (line 1)"},
      {"bad mode", part + "mode = \"exclusive\"\n",
       "c.toml:4: partition[0].mode: 'exclusive' is not a mode (shared or whole-node)"},
      {"bad preempt mode", part + "preempt_mode = \"kill\"\n",
       "c.toml:4: partition[0].preempt_mode: 'kill' is not a preempt mode"},
      {"min over max", part + "min_gpus = 8\nmax_gpus = 4\n",
       "c.toml:4: partition[0].min_gpus: 8 is more than max_gpus 4"},
      // min_gpus = 0 is allowed (jobs without GPUs); max_gpus is not.
      {"zero max gpus", part + "max_gpus = 0\n",
       "c.toml:4: partition[0].max_gpus: 0 is out of range 1..100000"},
      {"negative min gpus", part + "min_gpus = -1\n",
       "c.toml:4: partition[0].min_gpus: -1 is out of range 0..100000"},
      {"feature not a name", "[node.n1]\nfeatures = [\"a&b\"]\n",
       "c.toml:2: node.n1.features: 'a&b' is not a feature name"},
      {"gpus as a string", part + "max_gpus = \"4\"\n",
       "c.toml:4: partition[0].max_gpus: expected an integer, got a string"},
      {"default over max time", part + "default_time = \"8d\"\n",
       "c.toml:4: partition[0].default_time: 8d00h is longer than max_time 7d00h"},
      {"zero max time", part + "max_time = \"0s\"\n",
       "c.toml:4: partition[0].max_time: must be longer than 0s"},
      {"idle action unknown",
       part + "idle_gpu_after = \"1h\"\nidle_gpu_action = \"kill\"\n",
       "c.toml:5: partition[0].idle_gpu_action: 'kill' is not an idle GPU action (warn, "
       "requeue or cancel)"},
      {"idle threshold without a period", part + "idle_gpu_below = 5\n",
       "c.toml:4: partition[0].idle_gpu_below: needs idle_gpu_after (how long every GPU "
       "must stay idle)"},
      {"idle threshold out of range",
       part + "idle_gpu_after = \"1h\"\nidle_gpu_below = 0\n",
       "c.toml:5: partition[0].idle_gpu_below: 0 is out of range 1..100"},
      {"bad default memory", part + "default_mem_per_gpu = \"64Q\"\n",
       "c.toml:4: partition[0].default_mem_per_gpu: '64Q' is not a size (use 512M, 64G, "
       "1T)"},
      {"default memory as a bool", part + "default_mem_per_gpu = true\n",
       "c.toml:4: partition[0].default_mem_per_gpu: expected a size"},
      {"zero default memory", part + "default_mem_per_gpu = 0\n",
       "c.toml:4: partition[0].default_mem_per_gpu: 0 is out of range"},
      {"bad tier", part + "tier = -1\n",
       "c.toml:4: partition[0].tier: -1 is out of range"},
      {"bool as string", part + "preempt_lower_tiers = \"yes\"\n",
       "c.toml:4: partition[0].preempt_lower_tiers: expected true or false, got a "
       "string"},
      {"bad node range", "[[partition]]\nname = \"p\"\nnodes = \"n[5-1]\"\n",
       "c.toml:3: partition[0].nodes: 'n[5-1]' is not a node list: range '5-1' runs "
       "backwards"},
      {"node listed twice", "[[partition]]\nname = \"p\"\nnodes = [\"n[1-3]\", \"n2\"]\n",
       "c.toml:3: partition[0].nodes: node 'n2' is listed twice"},
      {"all with others", "[[partition]]\nname = \"p\"\nnodes = [\"all\", \"n1\"]\n",
       "c.toml:3: partition[0].nodes: \"all\" stands alone"},
      {"empty node list", "[[partition]]\nname = \"p\"\nnodes = []\n",
       "c.toml:3: partition[0].nodes: no nodes"},
      {"node not a string", "[[partition]]\nname = \"p\"\nnodes = [\"n1\", 2]\n",
       "c.toml:3: partition[0].nodes[1]: expected a string, got an integer"},
      {"bad window start", part + "window = { start = \"8am\", end = \"20:00\" }\n",
       "c.toml:4: partition[0].window.start: '8am' is not a time of day"},
      {"window end past midnight",
       part + "window = { start = \"08:00\", end = \"24:30\" }\n",
       "c.toml:4: partition[0].window.end: '24:30' is not a time of day"},
      {"window without end", part + "window = { start = \"08:00\" }\n",
       "c.toml:4: partition[0].window: needs 'end' (HH:MM)"},
      {"window unknown key",
       part + "window = { start = \"08:00\", end = \"09:00\", day = 1 }\n",
       "c.toml:4: partition[0].window.day: unknown key (known: start, end, days, nodes)"},
      {"window bad day",
       part + "window = { start = \"08:00\", end = \"09:00\", days = [\"mo\"] }\n",
       "c.toml:4: partition[0].window.days: 'mo' is not a day of the week"},
      {"window time with seconds",
       part + "window = { start = 08:00:30, end = \"09:00\" }\n",
       "c.toml:4: partition[0].window.start: times of day are whole minutes"},
      {"windows disagree on nodes",
       part +
           "[[partition.window]]\nstart = \"08:00\"\nend = \"09:00\"\nnodes = \"n1\"\n"
           "[[partition.window]]\nstart = \"10:00\"\nend = \"11:00\"\nnodes = \"n2\"\n",
       "c.toml:11: partition[0].window[1].nodes: every window of a partition covers the "
       "same nodes (first given at c.toml:7: partition[0].window[0].nodes)"},
      {"duplicate qos", "[[qos]]\nname = \"a\"\n[[qos]]\nname = \"a\"\n",
       "c.toml:4: qos[1].name: 'a' is already the name of qos[0] (line 1)"},
      {"qos priority range", "[[qos]]\nname = \"a\"\npriority = 5000\n",
       "c.toml:3: qos[0].priority: 5000 is out of range 0..1000"},
      {"limit not a number", "[limits]\nuser_gpus = { alice = \"16\" }\n",
       "c.toml:2: limits.user_gpus.alice: expected an integer, got a string"},
      {"limits unknown key", "[limits]\nnode_gpus = { n1 = 1 }\n",
       "c.toml:2: limits.node_gpus: unknown key (known: user_gpus, account_gpus)"},
      {"zero share", "[fairshare]\nshares = { a = 0 }\n",
       "c.toml:2: fairshare.shares.a: a share must be more than 0"},
      {"zero half-life", "[fairshare]\nhalf_life = \"0s\"\n",
       "c.toml:2: fairshare.half_life: must be longer than 0s"},
      {"negative weight", "[priority]\nage = -1\n",
       "c.toml:2: priority.age: must be a number from 0 to"},
      {"weight unknown key", "[priority]\nages = 1\n",
       "c.toml:2: priority.ages: unknown key"},
      {"age_max bad", "[priority]\nage_max = \"soon\"\n",
       "c.toml:2: priority.age_max: 'soon' is not a duration"},
      {"node override bad range", "[node.\"n[2-1]\"]\nblock = \"b1\"\n",
       "c.toml:1: node.\"n[2-1]\": 'n[2-1]' is not a node list"},
      {"node override unknown key", "[node.n1]\nrack = \"r1\"\n",
       "c.toml:2: node.n1.rack: unknown key (known: block, features, gres_type, "
       "burn_in)"},
      {"sim unknown partition", part + "[sim]\naccount_partitions = { a = \"q\" }\n",
       "c.toml:5: sim.account_partitions.a: no partition 'q' in this file"},
      {"auth anonymous_read bad", "[auth]\nanonymous_read = \"everyone\"\n",
       "c.toml:2: auth.anonymous_read: 'everyone' is not one of localhost, none, all"},
      {"auth admins twice", "[auth]\nadmins = [\"a\", \"a\"]\n",
       "c.toml:2: auth.admins: 'a' is listed twice"},
      {"auth tls half", "[auth]\ntls_cert = \"c.pem\"\n",
       "c.toml:1: auth: tls_cert and tls_key go together"},
      {"auth unknown key", "[auth]\ntokens = 1\n", "c.toml:2: auth.tokens: unknown key"},
      {"auth browser host with a port", "[auth]\nbrowser_hosts = [\"ctl1:8686\"]\n",
       "c.toml:2: auth.browser_hosts: 'ctl1:8686' is not a host name"},
      {"account no members", "[[account]]\nname = \"vision\"\n",
       "c.toml:1: account[0]: needs members"},
      {"account twice",
       "[[account]]\nname = \"v\"\nmembers = []\n[[account]]\nname = \"v\"\nmembers = "
       "[]\n",
       "c.toml:5: account[1].name: 'v' is already the name of account[0]"},
  };
  for (const Case& c : cases) {
    Result<ClusterConfig> got = ParseClusterConfig(c.text, "c.toml");
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(got.status().message(), HasSubstr(c.want)) << c.name;
  }
}

TEST(LoadClusterConfigTest, MissingFileIsNotFound) {
  Result<ClusterConfig> c = LoadClusterConfig("/nonexistent/cluster.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/cluster.toml"));
}

}  // namespace
}  // namespace hachi::config
