// `hachi sim --placement openb`: FGD's static placement benchmark (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <string>

namespace hachi::cli {

struct PlacementFlags {
  std::string trace;  // openb (the only one)
  std::string pods = "default";
  int64_t seed = 42;
  std::string policy = "hachi";
  bool json = false;
  bool curve = false;
};

// Runs one seed and prints the result; returns the exit code (0 done, 2 bad input).
int RunPlacement(const PlacementFlags& f);

}  // namespace hachi::cli
