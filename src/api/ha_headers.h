// The headers by which several controllers on one database tell clients and agents who
// leads (docs/ha.md, docs/api.md).
#pragma once

namespace hachi::api {

// Every reply of a leader that holds a lease: its epoch, in decimal. Agents refuse a
// reply whose epoch is below the highest they have seen (a deposed leader's).
inline constexpr const char* kEpochHeader = "X-Hachi-Epoch";
// Every reply of a standby (HTTP 503): "1".
inline constexpr const char* kStandbyHeader = "X-Hachi-Standby";
// A standby's reply, while a leader holds the lease: the leader's advertised URL.
inline constexpr const char* kLeaderHeader = "X-Hachi-Leader";

}  // namespace hachi::api
