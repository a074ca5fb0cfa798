// sacctmgr under Slurm's name (docs/slurm.md "Accounts: sacctmgr"): `show` (or `list`)
// of accounts, users, associations and QoS in Slurm 22.05's columns, from the
// association tree the server's config makes (GET /api/v1/priority).
//
// Hachi's accounts, shares, GPU limits and QoS are its cluster config's ([[account]],
// [fairshare], [limits], [[qos]]): the one source of truth every server — the standby's
// too — reads, reviewed and versioned as a file. So `add`, `modify` and `delete` change
// nothing and say where the change is made; a second, durable copy written by sacctmgr
// could disagree with the file.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/slurm/print_fields.h"
#include "core/status.h"
#include "report/priority_report.h"

namespace hachi::cli::slurm {

enum class SacctmgrEntity : uint8_t { kAccount, kUser, kAssociation, kQos };

struct SacctmgrOptions {
  bool help = false;
  SacctmgrEntity entity = SacctmgrEntity::kAssociation;
  // The conditions ("where" is optional): names (account, user, qos), accounts, users.
  std::vector<std::string> names, accounts, users;
  std::string format;  // format=; empty: the entity's default
  FieldOutput out;     // -n, -p, -P
  std::string server;
};
// kInvalidArgument with sacctmgr's words for an unknown entity, condition or field;
// kUnsatisfiable for add/modify/delete (what to edit instead).
Result<SacctmgrOptions> ParseSacctmgrArgs(const std::vector<std::string>& args);
Result<std::string> RenderSacctmgr(const SacctmgrOptions& o,
                                   const report::PriorityReport& r);

// The association tree's pieces, shared with `scontrol show assoc_mgr`:
// an account's raw shares as configured (0 without one while others have one; 1 for
// every account when none is configured, as the factors treat them), and its users (its
// members and whoever ran under it), ascending.
double RawShares(const report::PriorityReport& r, const std::string& account);
std::vector<std::string> AccountUsers(const report::PriorityReport& r,
                                      const report::AccountEntry& a);

}  // namespace hachi::cli::slurm
