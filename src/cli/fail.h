// How a user command reports an error (docs/cli.md): one line on stderr, then exit 2 for
// bad input, 1 for anything else.
#pragma once

#include <iostream>

#include "core/status.h"

namespace hachi::cli {

inline int Fail(const Status& s) {
  std::cerr << "hachi: error: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace hachi::cli
