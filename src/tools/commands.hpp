#pragma once
// The `kiln` subcommands (run, benchmark, info, zoo). Each returns the process exit code; kiln::Error propagates to
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
  int threads = 0;  // > 0: compile property inference_num_threads
  std::vector<std::string> disabled_passes;  // compile property kiln_disable_passes
};
int cmd_run(const RunOptions& o);

struct BenchmarkOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE or FILE; inputs not given get random data
  std::vector<std::string> shapes;  // NAME=[d0,d1,...] or SYMBOL=N
  uint32_t seed = 0;
  int threads = 0;        // > 0: compile property inference_num_threads
  int iterations = 0;     // -niter; 0: not given
  double seconds = 0;     // -time; 0: not given
  int warmup = 2;         // untimed runs after the first inference
  std::string json_path;  // empty: no JSON file
  std::vector<std::string> disabled_passes;  // compile property kiln_disable_passes
  bool perf_counts = false;  // -pc
  std::string pc_sort;       // -pcsort: sort | no_sort | simple_sort (empty: no_sort unless given)
};
int cmd_benchmark(const BenchmarkOptions& o);

struct InfoOptions {
  std::string model;
  bool graph = false;  // also print the graph dump
};
int cmd_info(const InfoOptions& o);

struct InspectOptions {
  std::string model;
  std::vector<std::string> shapes;           // NAME=[d0,...] or SYMBOL=N
  std::vector<std::string> disabled_passes;  // pass names or all-fusions
  std::string exec_graph_path, dot_path, svg_path;
  bool explain_fusions = false;
};
int cmd_inspect(const InspectOptions& o);

struct ZooOptions {
  std::string name;
  std::string output;
  uint32_t seed = 0;
  bool list = false;
};
int cmd_zoo(const ZooOptions& o);

}  // namespace kiln::cli
