#pragma once
// The `kiln` subcommands. Each returns the process exit code; kiln::Error propagates to
// main, which prints "kiln: error: ..." and exits with 1.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE or FILE
  std::vector<std::string> shapes;  // NAME=[d0,d1,...] or SYMBOL=N
  std::string output_dir;           // empty: do not write outputs
  bool random_inputs = false;
  uint32_t seed = 0;
  int iterations = 1;
};
int cmd_run(const RunOptions& o);

struct InfoOptions {
  std::string model;
  bool graph = false;  // also print the graph dump
};
int cmd_info(const InfoOptions& o);

struct ZooOptions {
  std::string name;
  std::string output;
  uint32_t seed = 0;
  bool list = false;
};
int cmd_zoo(const ZooOptions& o);

}  // namespace kiln::cli
