#include <kiln/core.hpp>

#include <algorithm>
#include <chrono>
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

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

}  // namespace

int cmd_run(const RunOptions& o) {
  KILN_CHECK(o.iterations >= 1, cat("--iterations must be >= 1 (got ", o.iterations, ")"));
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(o.model, ec), cat("'", o.model, "' is a directory, not a model file"));

  Core core;
  auto t0 = Clock::now();
  auto model = core.read_model(o.model);
  double load_ms = ms_since(t0);
  const auto& ports = model->inputs();

  tools::PreparedInputs in = tools::prepare_inputs(ports, o.inputs, o.shapes, o.random_inputs, o.seed);
  const auto& tensors = in.tensors;
  const auto& sources = in.sources;
  for (size_t i = 0; i < ports.size(); ++i)
    std::cout << "input  " << ports[i].name << "  " << shape_to_string(tensors[i].shape()) << "  "
              << dtype_name(tensors[i].dtype()) << "  (" << sources[i] << ")\n";
  if (!in.defaulted_dims_hint.empty()) std::cout << "note   " << in.defaulted_dims_hint << "\n";

  t0 = Clock::now();
  AnyMap properties = parse_property_specs(o.properties);
  if (o.threads > 0) add_property(properties, "inference_num_threads", std::to_string(o.threads), "-t");
  if (!o.disabled_passes.empty())
    add_property(properties, "kiln_disable_passes", join(o.disabled_passes, ","), "--disable-pass");
  CompiledModel compiled = core.compile_model(model, properties);
  double compile_ms = ms_since(t0);
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
    throw Error(in.explain(e));  // naming the dims set to 1, the likely cause
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
