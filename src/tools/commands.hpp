#pragma once
// The `kiln` subcommands (run, benchmark, info, zoo). Each returns the process exit code; kiln::Error propagates to
// main, which prints "kiln: error: ..." and exits with 1.
#include <kiln/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

// Compile properties from the command line: `--property KEY=VALUE` values (old or new key
// names; compile_model checks them) plus those other options set. Throws kiln::Error for a
// spec without '=' or a key given twice with different values.
void add_property(AnyMap& properties, const std::string& key, const std::string& value, const std::string& from);
AnyMap parse_property_specs(const std::vector<std::string>& specs);
// The properties name a model cache folder (cache_dir or CACHE_DIR, not empty): the command then
// compiles from the file (Core::compile_model(path)), which reads it only on a cache miss.
bool gives_cache_dir(const AnyMap& properties);
// The "precision" line of run / benchmark / inspect: the effective inference_precision and,
// when it was not given, that it is this CPU's default, e.g.
// "bf16  (default: this CPU runs bf16 natively; --property inference_precision=f32 for f32)".
std::string describe_precision(const std::string& effective, const AnyMap& properties);

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
  std::vector<std::string> properties;       // --property KEY=VALUE
  bool compare_precision = false;  // also run in f32 and report how far the outputs moved
};
int cmd_run(const RunOptions& o);

struct BenchmarkOptions {
  std::string model;
  std::string model_flag;  // -m FILE (benchmark_app), instead of the positional model
  std::string device;      // -d: CPU or empty
  bool json_stats = false; // -json_stats: JSON report into report_folder
  std::string cache_dir;   // -cache_dir: the model cache's folder (property cache_dir)
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
  std::vector<std::string> properties;  // --property KEY=VALUE
  std::string hint;          // -hint latency | throughput | none (empty: not given)
  std::string nstreams;      // -nstreams N | AUTO | NUMA (empty: not given)
  int nthreads = 0;          // -nthreads N (like -t)
  int nireq = 0;             // -nireq N; 0: 1 for sync, optimal_number_of_infer_requests for async
  std::string api;           // -api sync | async (empty: async with -hint throughput, -nstreams or -nireq > 1)
  std::string pin;           // -pin YES | NO | NUMA (empty: not given)
  std::string infer_precision;  // -infer_precision f32 | bf16 (empty: not given)
  std::string trace_path;    // --trace FILE.json: Chrome-trace timeline of every node of every request
  std::string exec_graph_path;  // -exec_graph_path FILE.json: the runtime graph
  std::string report_type;      // -report_type no_counters | average_counters | detailed_counters (CSV reports)
  std::string report_folder;    // -report_folder DIR (default: the current directory)
  std::string data_shape;       // -data_shape "x[1,3,48,96][1,3,48,120]": cycle through these input shapes
};
int cmd_benchmark(const BenchmarkOptions& o);

struct ServeOptions {
  std::string repository;           // --model-repository DIR: DIR/<name>/model.onnx [+ config.json]
  std::string host = "127.0.0.1";   // --host
  int http_port = 8000;             // --http-port (0: any free port, printed)
  size_t max_request_bytes = size_t(64) << 20;  // --max-request-bytes: larger bodies get 413
  int http_threads = 0;             // --http-threads (0: twice the models' streams, at least 8)
  std::vector<std::string> properties;  // --property KEY=VALUE: defaults for every model
  bool quiet = false;               // --quiet: no per-request log lines
};
int cmd_serve(const ServeOptions& o, const std::string& version);

struct InfoOptions {
  std::string model;
  bool graph = false;  // also print the graph dump
  bool ops = false;    // list the operators and versions kiln implements (no model needed)
};
int cmd_info(const InfoOptions& o);

struct InspectOptions {
  std::string model;
  std::vector<std::string> shapes;           // NAME=[d0,...] or SYMBOL=N
  std::vector<std::string> disabled_passes;  // pass names or all-fusions
  std::string exec_graph_path, dot_path, svg_path;
  bool explain_fusions = false;
  std::vector<std::string> properties;       // --property KEY=VALUE
};
int cmd_inspect(const InspectOptions& o);

struct ZooOptions {
  std::string name;
  std::string output;
  uint32_t seed = 0;
  bool list = false;
};
int cmd_zoo(const ZooOptions& o);

struct QuantizeCmdOptions {
  std::string model;
  std::string output;                 // -o
  bool dynamic = false;               // --dynamic (else static: QDQ calibrated on --calibration)
  std::string method = "minmax";      // --method minmax|percentile|entropy (static)
  double percentile = 99.999;         // --percentile (method percentile)
  bool per_channel = false;           // --per-channel
  bool reduce_range = false;          // --reduce-range: 7-bit weights ([-64, 64])
  std::string activation_type = "uint8";  // --activation-type uint8|int8 (static)
  bool symmetric_activations = false;     // --symmetric-activations (static: zero point 0 / 128)
  std::vector<std::string> exclude;   // --exclude NODE...
  std::vector<std::string> op_types;  // --op-types (default: dynamic MatMul Conv; static Conv MatMul Gemm Add Concat MaxPool)
  std::string calibration;            // --calibration DIR: calibration (static) and accuracy report samples
  uint32_t seed = 0;                  // random sample without --calibration
  bool no_report = false;             // --no-report
};
int cmd_quantize(const QuantizeCmdOptions& o);

}  // namespace kiln::cli
