// The cluster policy config file (docs/config.md): partitions, QoS, quotas, fair-share
// shares, priority weights and node overrides, in TOML. Parsing and applying are two
// steps: ParseClusterConfig checks everything that needs only the file (syntax, types,
// unknown keys, durations, times, duplicate names, min > max, ...);
// ApplyClusterConfig resolves node names against a cluster whose nodes came from
// elsewhere (a cluster spec in `hachi sim`, registered agents in the server) and
// installs the policy. Both return an error naming the file, the line and the key
// path ("cluster.toml:12: partition[1].max_time: '9x' is not a duration (use 30m, 4h,
// 7d)") and leave the caller's state as it was: a broken config loses nothing.
//
// This header is light on purpose (no toml++): the parser lives in the .cc files.
// Plain values and pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "sched/cluster.h"
#include "sched/power.h"

namespace hachi::config {

// Node names as written, ranges expanded ("n[0001-0004]" -> n0001 .. n0004), or every
// node of the cluster. Resolved against the cluster by ApplyClusterConfig.
struct NodeSelector {
  bool all = false;
  std::vector<std::string> names;
  std::string where;  // "cluster.toml:7: partition[0].nodes", for messages
};

// (docs/efficiency.md, "Idle GPUs"): what the server does with a running job
// of the partition whose every GPU has stayed below `below_pct` utilisation for `after`:
// warn (shown in queue, explain, the dashboard and /metrics), or also requeue or cancel
// it, with the reason in its history. Off (after 0) by default.
enum class IdleAction : uint8_t { kWarn, kRequeue, kCancel };
std::string_view IdleActionName(IdleAction a);  // "warn", "requeue", "cancel"
struct IdleGpuPolicy {
  Duration after = 0;  // 0: no policy
  int below_pct = 5;   // 1..100
  IdleAction action = IdleAction::kWarn;
};

struct PartitionConfig {
  // Everything but the node indices (`nodes`, `window_nodes`), which
  // ApplyClusterConfig fills from the selectors below.
  sched::Partition partition;
  IdleGpuPolicy idle;  // idle_gpu_after, idle_gpu_below, idle_gpu_action
  NodeSelector nodes;
  NodeSelector window_nodes;  // windows given without nodes: the partition's nodes
  bool has_window_nodes = false;
  std::string where;  // "cluster.toml:3: partition[0]"
};

// [node."n[0001-0016]"] block = "b01": per-node settings over the cluster's own.
struct NodeOverride {
  NodeSelector nodes;
  std::string block;  // empty: unchanged
  // Features for -C/--constraint (added to the automatic ones) and the GPU
  // type name as gres.conf spells it (--gres=gpu:TYPE:N). Empty: unchanged.
  std::vector<std::string> features;
  std::string gres_type;
  // The burn-in checks of these nodes (BurnInConfig::checks' form), over
  // [burn_in]'s; set (even empty) here also for simulated nodes.
  std::optional<std::vector<std::string>> burn_in;
};

// [burn_in] (docs/burn-in.md): what a node must pass before it takes jobs,
// when it registers for the first time or with another driver or topology, and what a
// GPU must pass when it comes back (`hachi resume NODE --gpu N`).
struct BurnInConfig {
  // Run in order; the first that fails fails the burn-in. Each is "doctor" or
  // "commtest" with their options ("commtest --size 64M"), run as `hachi doctor --json`,
  // or a site script: an absolute path with arguments, run by /bin/sh -c with
  // $HACHI_NODE and $HACHI_BURN_IN_GPUS. Empty: no burn-in.
  std::vector<std::string> checks = {"doctor"};
  Duration timeout = 30 * 60;  // per run, all checks together
  // Simulated nodes (agents with --preset or --topology-file, hachi dev without GPUs)
  // have no GPUs to check: they skip [burn_in]'s checks unless this is true (a node
  // override's burn_in list always applies).
  bool simulated = false;
};
// Whether a burn-in check as written is one (BurnInConfig::checks); the reason when not.
Status CheckBurnInCheck(const std::string& check);

// Read only by `hachi sim` (docs/sim.md): trace accounts sent to a partition when
// their rows name none.
struct SimConfig {
  std::unordered_map<std::string, std::string> account_partitions;
};

// [server]: where `hachi server` / `hachi dev` listen and keep their state, when the
// command line does not say (flags win). Empty / 0: the command's default.
struct ServerConfig {
  std::string listen;     // "127.0.0.1:8686"
  std::string socket;     // Unix socket path
  std::string state_dir;  // the SQLite database and the lock live here
  std::string policy;     // hachi | easy | fifo
  Duration agent_timeout = 0;
};

// [auth]: who is an admin, who may read without a token, and the server's TLS and
// cluster-secret files (docs/config.md, docs/api.md "Authentication"). Flags win.
struct AuthConfig {
  std::vector<std::string> admins;  // user names; root on the Unix socket always is one
  // Who may GET without a token over TCP: "localhost" (loopback peers), "none", "all".
  std::string anonymous_read = "localhost";
  std::string tls_cert;  // PEM files; both set: the TCP API is HTTPS
  std::string tls_key;
  std::string cluster_secret_file;  // "": STATE_DIR/cluster-secret
  // Names browsers may reach the server by besides IP literals, localhost, this
  // machine's hostname and the listen address's host (server/browser_host.h).
  std::vector<std::string> browser_hosts;
};

// [[account]] name + members: who may submit under an account (server/auth.h). With
// any [[account]] listed, a submit must name a listed account its user is a member of,
// or leave the account out (it is then the user's name, which needs no listing).
struct AccountConfig {
  std::string name;
  std::vector<std::string> members;
};

// [[pool]] (docs/pools.md): a set of nodes rented or powered as one. A fixed pool is
// always on; a burst pool's nodes are powered up when the queue needs them (the
// resume program, called with their names as one hostlist, Slurm's ResumeProgram
// convention) and down after `suspend_after` idle (the suspend program). Every pool
// has a price per GPU-hour, for the cost of what ran there.
enum class PoolKind : uint8_t { kFixed, kBurst };
std::string_view PoolKindName(PoolKind k);
struct PoolConfig {
  std::string name;
  NodeSelector nodes;  // names (never "all")
  PoolKind kind = PoolKind::kFixed;
  std::string resume_program;   // burst: an absolute path
  std::string suspend_program;  // burst: an absolute path
  // burst, optional: run with the nodes whose resume failed (timed out, or the resume
  // program exited non-zero), Slurm's ResumeFailProgram; before the suspend program.
  std::string resume_fail_program;
  // burst, optional: a topology preset (hachi topo show --preset list) that the pool's
  // nodes register as: what the scheduler plans resumes with for a node that has never
  // registered. Without it, such a node takes the shape of a node of its pool that has.
  std::string preset;
  Duration suspend_after = 30 * kMinute;   // a burst node idle this long is suspended
  Duration resume_timeout = 15 * kMinute;  // a resume not registered by then failed
  int max_powered = 0;                     // burst nodes powered at once; 0: no cap
  double price_per_gpu_hour = 0;           // in the site's currency; 0: not priced
};

struct ClusterConfig {
  std::string origin;  // the file name used in messages
  // Empty: ApplyClusterConfig keeps the cluster's partitions (e.g. hachi sim's
  // "default").
  std::vector<PartitionConfig> partitions;
  std::vector<sched::Qos> qos;
  sched::Limits limits;
  std::unordered_map<std::string, double> shares;  // [fairshare] shares
  // [fairshare] half_life: how fast past usage stops counting (the server's meter).
  Duration fairshare_half_life = 7 * kDay;
  sched::PriorityWeights weights;
  std::vector<NodeOverride> node_overrides;
  SimConfig sim;
  ServerConfig server;
  AuthConfig auth;
  std::vector<AccountConfig> accounts;
  BurnInConfig burn_in;
  std::vector<PoolConfig> pools;  // no node in two
};

// The burn-in checks for `node` (the last override naming it that sets burn_in, else
// [burn_in]'s), empty when it has none: `simulated` nodes only run an override's list or
// [burn_in]'s when it says simulated = true.
std::vector<std::string> BurnInChecksFor(const ClusterConfig& config,
                                         const std::string& node, bool simulated);

// Parses a config file's text; `origin` names it in messages ("cluster.toml").
// kInvalidArgument on any error.
Result<ClusterConfig> ParseClusterConfig(std::string_view text, std::string_view origin);

// Reads and parses `path` (kNotFound when it cannot be read).
Result<ClusterConfig> LoadClusterConfig(const std::string& path);

// Installs `config` onto `state`, whose nodes are already there: replaces the
// partitions (when the config has any; every node's `partitions` list is rebuilt), QoS,
// limits, fair-share shares (usage is kept) and priority weights, and applies node
// overrides. Checks: every node named exists, window nodes are in their partition and
// owned by one partition at most, node overrides do not conflict, and pending or
// running jobs keep their partitions (their indices are remapped). On error `state`
// is unchanged. `allow_empty_partitions`: the server, whose nodes register over time,
// passes true and drops the names not registered yet; a partition may then have no
// nodes for a while.
Status ApplyClusterConfig(const ClusterConfig& config, sched::ClusterState* state,
                          bool allow_empty_partitions = false);

// The [[pool]] tables over `state`'s nodes, for sched::PlanPower (docs/pools.md). Every
// node named must exist (the error names it and the line).
Result<std::vector<sched::PowerPool>> PowerPools(const ClusterConfig& config,
                                                 const sched::ClusterState& state);

}  // namespace hachi::config
