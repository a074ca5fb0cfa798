// Who is asking, and what a request may carry (docs/api.md "Authentication",
// architecture.md §5). The pieces the HTTP layer and the Controller share, without
// httplib:
//  - users on the Unix socket are who the kernel says (SO_PEERCRED); over TCP they send
//    `Authorization: Bearer hachi_<id>_<secret>`, a token an admin issued, which the
//    server knows only by its SHA-256 (Controller::Authenticate, tokens.cc);
//  - agents send the cluster secret in `X-Hachi-Cluster-Secret` on /agents/*; a user's
//    token does not open those endpoints, nor the secret the users' ones;
//  - reads (GET) without a token are allowed from loopback peers by default, the
//    dashboard's "read-only for anonymous viewers on localhost" ([auth] anonymous_read);
//  - a job's paths and environment are checked at submit (api::CheckJobSpec).
// What a caller may do once known is decided by the Authorizer (server/authorizer.h).
//
// Free functions and plain values; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/http_client.h"
#include "api/submit_checks.h"
#include "core/status.h"
#include "server/authorizer.h"  // Caller, AnonymousRead
#include "state/records.h"

namespace hachi::server {

inline constexpr std::string_view kTokenPrefix = "hachi_";
using api::kClusterSecretHeader;  // "X-Hachi-Cluster-Secret"

// 127.0.0.0/8, ::1 and ::ffff:127.x.y.z, as httplib writes a peer's address.
bool IsLoopback(std::string_view address);

// The token in an `Authorization: Bearer TOKEN` header's value; "" when it is not one.
std::string_view BearerToken(std::string_view authorization);

// A new token for id `id`: "hachi_" + id + "_" + 64 random hex digits. The id part lets
// the server find the record without a search; only the whole token's hash matches.
Result<std::string> NewToken(const std::string& id);
// The id part of a token ("" when it does not look like one of ours).
std::string_view TokenId(std::string_view token);

// Job credentials: what a job's processes show the server, so that srun,
// squeue and sbatch inside a job work from any node without a token of the user's (the
// role of Slurm's munge credential). "hachijob_<job>_<start>_<HMAC-SHA256 of
// "<job>.<start>" under the cluster secret>": it names one run of one job, is valid only
// while that run is running, and makes its bearer the job's user (never an admin). The
// agent gives it to the job as HACHI_JOB_TOKEN.
inline constexpr std::string_view kJobCredentialPrefix = "hachijob_";
std::string JobCredential(std::string_view key, state::JobId job, Time start);
// The job and run a credential names, when it is well formed and its HMAC matches
// (compared in constant time); false otherwise.
bool CheckJobCredential(std::string_view key, std::string_view token, state::JobId* job,
                        Time* start);

// A job's spec as submitted (api/submit_checks.h), checked before the server stores
// it and by `scontrol update`.
using api::CheckJobSpec;

// What a job's record shows a caller the Authorizer does not allow
// Action::kSeeJobDetails (neither its owner nor an admin): no environment (it holds keys
// and passwords as often as paths), a placeholder for the script, which is no less
// private, and no arguments: argv becomes the command's base name (command jobs only)
// and "(N arguments not shown)".
void RedactJobDetails(state::JobRecord* job);

// What a node's stray GPU processes (processes no job was given their GPU for) show a
// caller who is not an admin: each command's base name, not its arguments, which may
// hold a password as a job's do.
void RedactStrayProcesses(state::NodeStatus* node);

}  // namespace hachi::server
