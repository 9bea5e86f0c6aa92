#include <kiln/core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/npy.hpp"
#include "tools/common/run_util.hpp"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

using tools::fmt_ms;
using tools::ms_since;

// --compare-precision: the same inputs again with inference_precision=f32; per floating
// output the largest and mean absolute difference, against the largest f32 magnitude.
void compare_with_f32(Core& core, const std::shared_ptr<Model>& model, const AnyMap& properties,
                      const CompiledModel& compiled, const InferRequest& req, const std::vector<Tensor>& inputs) {
  const std::string precision = compiled.get_property("inference_precision");
  if (precision == "f32") {
    std::cout << "compare    the model ran in f32: nothing to compare (--compare-precision shows what bf16 changes)\n";
    return;
  }
  AnyMap f32 = properties;
  for (const char* k : {"inference_precision", "ENFORCE_BF16", "execution_mode", "EXECUTION_MODE_HINT"}) f32.erase(k);
  f32["inference_precision"] = "f32";
  CompiledModel reference = core.compile_model(model, f32);
  InferRequest ref_req = reference.create_infer_request();
  for (size_t i = 0; i < inputs.size(); ++i) ref_req.set_input_tensor(i, inputs[i]);
  ref_req.infer();
  const auto& outs = compiled.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor got = req.get_output_tensor(i), want = ref_req.get_output_tensor(i);
    if (!got.is_tensor() || !is_floating(got.dtype()) || got.shape() != want.shape()) continue;
    const std::vector<double> a = got.to_f64(), b = want.to_f64();
    double max_diff = 0, sum_diff = 0, max_ref = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      const double d = std::fabs(a[k] - b[k]);
      max_diff = std::max(max_diff, d);
      sum_diff += d;
      max_ref = std::max(max_ref, std::fabs(b[k]));
    }
    const double mean_diff = a.empty() ? 0 : sum_diff / static_cast<double>(a.size());
    char buf[256];
    std::snprintf(buf, sizeof buf, "max |%s - f32| %.4g, mean %.4g (f32 values up to %.4g: %.3g%% of it)",
                  precision.c_str(), max_diff, mean_diff, max_ref, max_ref > 0 ? 100 * max_diff / max_ref : 0.0);
    std::cout << "compare    " << outs[i].name << "  " << buf << "\n";
  }
}

}  // namespace

int cmd_run(const RunOptions& o) {
  KILN_CHECK(o.iterations >= 1, cat("--iterations must be >= 1 (got ", o.iterations, ")"));
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(o.model, ec), cat("'", o.model, "' is a directory, not a model file"));

  AnyMap properties = parse_property_specs(o.properties);
  if (o.threads > 0) add_property(properties, "inference_num_threads", std::to_string(o.threads), "-t");
  if (!o.disabled_passes.empty())
    add_property(properties, "kiln_disable_passes", join(o.disabled_passes, ","), "--disable-pass");
  // with a model cache (-p cache_dir=DIR): compile_model(FILE), which reads the file only on a miss
  const bool through_cache = gives_cache_dir(properties);

  Core core;
  std::shared_ptr<Model> model;
  CompiledModel compiled;
  double load_ms = 0, compile_ms = 0;
  auto t0 = Clock::now();
  if (through_cache) {
    compiled = core.compile_model(o.model, properties);
    compile_ms = ms_since(t0);
    std::cout << "cache  " << compiled.get_property("kiln_model_cache") << "\n";
  } else {
    model = core.read_model(o.model);
    load_ms = ms_since(t0);
  }
  const std::vector<PortInfo> ports = through_cache ? compiled.inputs() : model->inputs();  // (a copy: see below)

  tools::PreparedInputs in = tools::prepare_inputs(ports, o.inputs, o.shapes, o.random_inputs, o.seed);
  const auto& tensors = in.tensors;
  const auto& sources = in.sources;
  for (size_t i = 0; i < ports.size(); ++i)
    std::cout << "input  " << ports[i].name << "  " << shape_to_string(tensors[i].shape()) << "  "
              << dtype_name(tensors[i].dtype()) << "  (" << sources[i] << ")\n";
  if (!in.defaulted_dims_hint.empty()) std::cout << "note   " << in.defaulted_dims_hint << "\n";

  if (!through_cache) {
    t0 = Clock::now();
    // handed over unless --compare-precision compiles it again: each weight is then kept once, packed
    compiled = o.compare_precision ? core.compile_model(model, properties)
                                   : core.compile_model(std::move(model), properties);
    compile_ms = ms_since(t0);
  }
  std::cout << "precision  " << describe_precision(compiled.get_property("inference_precision"), properties) << "\n";
  InferRequest req = compiled.create_infer_request();
  for (size_t i = 0; i < ports.size(); ++i) req.set_input_tensor(i, tensors[i]);

  std::vector<double> times;
  try {
    for (int it = 0; it < o.iterations; ++it) {
      t0 = Clock::now();
      req.infer();
      times.push_back(ms_since(t0));
    }
  } catch (const Error& e) {
    throw Error(in.explain(e));  // naming the defaulted dims, the likely cause
  }

  const auto& outs = compiled.outputs();
  if (!o.output_dir.empty()) {
    std::filesystem::create_directories(o.output_dir, ec);
    KILN_CHECK(!ec && std::filesystem::is_directory(o.output_dir),
               cat("cannot create output directory '", o.output_dir, "'", ec ? ": " + ec.message() : ""));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    Tensor t = req.get_output_tensor(i);
    std::cout << "output " << tools::summarize_tensor(outs[i].name, t) << "\n";
    if (!o.output_dir.empty()) {
      auto path = std::filesystem::path(o.output_dir) / (tools::sanitize_file_name(outs[i].name) + ".npy");
      tools::write_npy(path.string(), t);
      std::cout << "       wrote " << path.string() << "\n";
    }
  }
  if (o.compare_precision) compare_with_f32(core, model ? model : core.read_model(o.model), properties, compiled, req, tensors);
  std::cout << "load " << fmt_ms(load_ms) << ", compile " << fmt_ms(compile_ms) << ", inference ";
  if (times.size() == 1) {
    std::cout << fmt_ms(times[0]) << "\n";
  } else {
    double sum = 0;
    for (double t : times) sum += t;
    std::cout << "mean " << fmt_ms(sum / static_cast<double>(times.size())) << ", min "
              << fmt_ms(*std::min_element(times.begin(), times.end())) << " over " << times.size()
              << " iterations\n";
  }
  return 0;
}

}  // namespace kiln::cli
