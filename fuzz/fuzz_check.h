// FUZZ_CHECK(cond, detail): an invariant of a fuzz target. On failure it prints the
// condition and `detail` (a std::string, built only then) and aborts, which libFuzzer
// reports as a crash and saves the input for.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, detail)                                                      \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n  %s\n", __FILE__, __LINE__, \
                   #cond, std::string(detail).c_str());                               \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
