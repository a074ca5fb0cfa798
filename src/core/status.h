// Status and Result<T>: errors as values (DESIGN.md §4.6).
//
// A Status is either OK or carries a code and a human-readable message that names
// what is wrong (a file, a row, a column, a flag). Result<T> holds either a value or a
// non-OK Status. Both are plain values: copyable, movable, safe to pass between threads
// (no shared state). Exceptions from third-party code are caught at the edge and turned
// into a Status; they never cross module boundaries.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hachi {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the input is malformed (bad flag, bad file, bad request)
  kNotFound,          // a named thing does not exist (file, preset, GPU)
  kUnsatisfiable,     // can never be met on this topology/cluster
  kBusy,              // cannot be met now; may be later
  kUnavailable,       // an outside dependency is missing (no NVML, no nvidia-smi)
  kInternal,          // a bug or an unexpected OS failure
  kPermissionDenied,  // the caller may not do this (another user's job, an admin action)
  kUnauthenticated,   // the caller did not say who they are, or not believably (no token)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", or "ok".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFound(std::string msg) {
  return Status(StatusCode::kNotFound, std::move(msg));
}
inline Status Unsatisfiable(std::string msg) {
  return Status(StatusCode::kUnsatisfiable, std::move(msg));
}
inline Status Busy(std::string msg) { return Status(StatusCode::kBusy, std::move(msg)); }
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status Unauthenticated(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status Unavailable(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status Internal(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}

// Result<T>: a T or a non-OK Status. Constructing from an OK Status is a bug.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace hachi

// Returns early from a function returning Status or Result<U> when `expr` fails.
#define HACHI_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::hachi::Status hachi_status_ = (expr);        \
    if (!hachi_status_.ok()) return hachi_status_; \
  } while (0)
