#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"hachi: a job scheduler for clusters of 8-GPU servers"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
