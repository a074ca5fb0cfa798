// `hachi doctor --server`'s clock-offset item: this node's wall clock against the
// server's, as the server measured it at its agent's last work poll
// (server/clock_offsets.h). Past api::kClockOffsetProblemMs either way it is a FAIL: a
// node problem to fix with its time sync. Stateless; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "diag/check.h"
#include "state/records.h"

namespace hachi::cli {

// The item for node `node` from the server's node list (or why it could not be had):
// OK within the bound, FAIL past it, WARN when the server cannot be asked, has no such
// node or no reading of it. `server` only names the server in the evidence.
diag::CheckItem ClockCheckItem(const std::string& server, const std::string& node,
                               const Result<std::vector<state::NodeStatus>>& nodes);

// Asks `server` for its nodes, then ClockCheckItem.
diag::CheckItem ClockCheck(const std::string& server, const std::string& node);

}  // namespace hachi::cli
