#pragma once
// Helpers behind `kiln run` and `kiln benchmark` (in the library so tests can use them):
// input preparation (files, --shape, random data), tensor summaries, parsing of NAME=VALUE
// options, output file names, latency statistics and peak memory.
#include <kiln/core.hpp>
#include <kiln/tensor.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tools {

// "NAME=[1,128]", "NAME=1,128", "NAME=[]" -> (NAME, shape). Throws kiln::Error.
std::pair<std::string, Shape> parse_shape_spec(const std::string& spec);

// Splits "NAME=VALUE" at the first '='; no '=' -> ("", spec).
std::pair<std::string, std::string> split_assignment(const std::string& spec);

// Concrete shape for a model input: the declared dims with dynamic ones taken from `symbols`
// (by dim name), else probe_dim (core/probe_dims.hpp: compile_model's probe, a batch 1, an
// image's height and width 224 where `image_sizes`, any other dim 64). Throws when the rank is
// unknown.
Shape concrete_shape(const PortInfo& port, const std::map<std::string, int64_t>& symbols, bool image_sizes = true);

// Random data for an input: floats U[-1,1); bool 50/50; integers by name: names with
// "mask" -> 1, "type_ids"/"segment" -> [0,2), "ids" -> [0,100), u8 -> [0,256), others [0,10).
Tensor random_tensor(const std::string& name, DType dtype, const Shape& shape, std::mt19937& rng);

// Inputs for a model, from the command line: `input_specs` are --input values (NAME=FILE, or
// FILE for a single-input model), `shape_specs` are --shape values (NAME=[d0,...] for an input,
// SYMBOL=N for a symbolic dim). Inputs not given as files get random data (random_tensor,
// std::mt19937(seed)) when `random_missing`, else a kiln::Error names them.
struct PreparedInputs {
  std::vector<Tensor> tensors;       // one per model input, in port order
  std::vector<std::string> sources;  // file name or "random, seed N"
  // Dynamic dims of random inputs that no --shape gave, set to probe_dim: their symbols
  // (each once, one value wherever it appears), and "x dim 2" for a dim without a name.
  std::vector<std::string> defaulted_dims;
  std::vector<std::string> defaulted_unnamed;
  // "" when nothing was defaulted; else a sentence naming those dims, their values and how to
  // give them, for the CLI's note and for errors of a model that does not run at those sizes.
  std::string defaulted_dims_hint;
  // An error of compiling or running with these inputs, with the hint when there is one
  // (the likely cause).
  std::string explain(const Error& e) const;
};
// benchmark_app's -data_shape: "x[1,3,48,96][1,3,48,120]" or, for several inputs,
// "ids[1,8][1,12],mask[1,8][1,12]" (the i-th shape of every input go together; an input with one
// shape keeps it in every group; the name may be left out when the model has one input). Returns
// the groups, each as --shape specs (NAME=[d0,...]) for prepare_inputs. Errors name the spec.
std::vector<std::vector<std::string>> parse_data_shape(const std::string& spec, const std::vector<PortInfo>& ports);

PreparedInputs prepare_inputs(const std::vector<PortInfo>& ports, const std::vector<std::string>& input_specs,
                              const std::vector<std::string>& shape_specs, bool random_missing, uint32_t seed);

// Statistics of a tensor's values (NaN excluded from min/max/mean).
struct TensorStats {
  int64_t count = 0, nan = 0, inf = 0;
  double min = 0, max = 0, mean = 0;
};
TensorStats tensor_stats(const Tensor& t);
// "output  [1,1000]  f32  min=-3.1 max=4.2 mean=0.001" (+ "  nan=3" / "  inf=1").
std::string summarize_tensor(const std::string& name, const Tensor& t);

// Output file name: characters other than letters, digits, '.', '-', '_' become '_'.
std::string sanitize_file_name(const std::string& name);

// Latency statistics in ms: median (mean of the two middle values for an even count), min,
// p90 (nearest rank: the ceil(0.9 n)-th smallest), max, mean. All zero for no samples.
struct LatencyStats {
  double median = 0, min = 0, p90 = 0, max = 0, mean = 0;
  double total = 0;  // the sum of all
};
LatencyStats latency_stats(std::vector<double> ms);

// Peak resident set size of this process in MiB (VmHWM in /proc/self/status); -1 if unknown.
double peak_rss_mib();
// Resident set size now, in MiB (VmRSS); -1 if unknown.
double rss_mib();

// Milliseconds from t0 to now (steady clock).
double ms_since(std::chrono::steady_clock::time_point t0);
// "12.345 ms"
std::string fmt_ms(double ms);

}  // namespace kiln::tools
