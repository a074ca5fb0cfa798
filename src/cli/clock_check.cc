#include "cli/clock_check.h"

#include <memory>
#include <utility>

#include "api/clock_offset.h"
#include "cli/client.h"

namespace hachi::cli {

diag::CheckItem ClockCheckItem(const std::string& server, const std::string& node,
                               const Result<std::vector<state::NodeStatus>>& nodes) {
  diag::CheckItem item;
  item.check = "clock-offset";
  auto warn = [&](std::string evidence, std::string fix) {
    item.status = diag::CheckStatus::kWarn;
    item.evidence = std::move(evidence);
    item.fix = std::move(fix);
    return item;
  };
  if (!nodes.ok()) {
    return warn("cannot ask the server " + server + ": " + nodes.status().message(),
                "check --server and that the server runs");
  }
  for (const state::NodeStatus& n : *nodes) {
    if (n.record.name != node) continue;
    if (!n.clock_offset_ms) {
      return warn("the server has no clock reading of node " + node +
                      " (its agent is older, or has not polled since the server started)",
                  "run a current `hachi agent` on this node");
    }
    const std::string off = api::FormatClockOffset(n.clock_offset_ms);
    if (api::ClockOffsetIsProblem(*n.clock_offset_ms)) {
      item.status = diag::CheckStatus::kFail;
      item.evidence =
          "node " + node + "'s clock is " + off +
          " off the server's (measured at its agent's last poll); more than " +
          std::to_string(api::kClockOffsetProblemMs / 1000) + "s";
      item.fix =
          "fix this node's time sync (chronyc tracking; timedatectl): jobs keep their "
          "limits and accounting (the server's clock), but its logs' times and "
          "time-bound credentials are off";
      return item;
    }
    item.evidence = "node " + node + "'s clock is " + off + " off the server's";
    return item;
  }
  return warn("the server " + server + " has no node " + node,
              "pass --node with the name its agent registered");
}

diag::CheckItem ClockCheck(const std::string& server, const std::string& node) {
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  const Result<std::vector<state::NodeStatus>> nodes =
      c.ok() ? (*c)->Nodes() : Result<std::vector<state::NodeStatus>>(c.status());
  return ClockCheckItem(server, node, nodes);
}

}  // namespace hachi::cli
