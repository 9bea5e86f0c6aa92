#include <kiln/core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/npy.hpp"
#include "tools/common/run_util.hpp"
#include "tools/common/tensor_file.hpp"

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

std::string input_names(const std::vector<PortInfo>& ports) {
  std::vector<std::string> names;
  for (const auto& p : ports) names.push_back(p.name);
  return join(names, ", ");
}

int find_port(const std::vector<PortInfo>& ports, const std::string& name) {
  for (size_t i = 0; i < ports.size(); ++i)
    if (ports[i].name == name) return static_cast<int>(i);
  return -1;
}

bool is_symbol(const std::vector<PortInfo>& ports, const std::string& name) {
  for (const auto& p : ports)
    for (size_t i = 0; i < p.shape.size(); ++i)
      if (p.shape[i] < 0 && i < p.dim_names.size() && p.dim_names[i] == name) return true;
  return false;
}

// Records the value of each symbolic dim of `port` seen in a concrete shape.
void bind_symbols(const PortInfo& port, const Shape& shape, std::map<std::string, int64_t>& symbols) {
  if (!port.rank_known || port.shape.size() != shape.size()) return;
  for (size_t i = 0; i < shape.size(); ++i)
    if (port.shape[i] < 0 && i < port.dim_names.size() && !port.dim_names[i].empty())
      symbols.emplace(port.dim_names[i], shape[i]);
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

  // --shape: per-input shapes or symbolic dim values.
  std::map<std::string, Shape> shapes;
  std::map<std::string, int64_t> symbols;
  for (const auto& spec : o.shapes) {
    auto [name, shape] = tools::parse_shape_spec(spec);
    if (find_port(ports, name) >= 0) {
      KILN_CHECK(!shapes.count(name), cat("--shape given twice for input '", name, "'"));
      shapes[name] = shape;
    } else if (is_symbol(ports, name)) {
      KILN_CHECK(shape.size() == 1, cat("--shape '", spec, "': '", name, "' is a symbolic dim; give one value, e.g. ",
                                        name, "=4"));
      symbols[name] = shape[0];
    } else {
      throw Error(cat("--shape '", spec, "': the model has no input or symbolic dim named '", name,
                      "' (inputs: ", input_names(ports), ")"));
    }
  }

  // --input: files.
  std::vector<Tensor> tensors(ports.size());
  std::vector<std::string> sources(ports.size());
  for (const auto& spec : o.inputs) {
    auto [name, file] = tools::split_assignment(spec);
    int idx = name.empty() ? -1 : find_port(ports, name);
    if (idx < 0) {
      if (ports.size() == 1 && (name.empty() || std::filesystem::exists(spec, ec))) {
        idx = 0;
        file = spec;
      } else if (name.empty()) {
        throw Error(cat("--input '", spec, "': the model has ", ports.size(),
                        " inputs; give --input NAME=FILE (inputs: ", input_names(ports), ")"));
      } else {
        throw Error(cat("--input '", spec, "': the model has no input named '", name, "' (inputs: ",
                        input_names(ports), ")"));
      }
    }
    KILN_CHECK(!tensors[idx].defined(), cat("--input: input '", ports[idx].name, "' given twice"));
    tensors[idx] = tools::load_tensor_file(file);
    sources[idx] = file;
    bind_symbols(ports[idx], tensors[idx].shape(), symbols);
  }
  for (size_t i = 0; i < ports.size(); ++i)
    if (!tensors[i].defined() && shapes.count(ports[i].name)) bind_symbols(ports[i], shapes[ports[i].name], symbols);

  // Missing inputs: random data or an error.
  std::vector<std::string> missing;
  for (size_t i = 0; i < ports.size(); ++i)
    if (!tensors[i].defined()) missing.push_back("'" + ports[i].name + "'");
  if (!missing.empty() && !o.random_inputs)
    throw Error(cat("missing input", missing.size() > 1 ? "s " : " ", join(missing, ", "),
                    ": give --input NAME=FILE (.npy or .pb) or use --random-inputs"));
  std::mt19937 rng(o.seed);
  for (size_t i = 0; i < ports.size(); ++i) {
    if (tensors[i].defined()) continue;
    auto it = shapes.find(ports[i].name);
    Shape shape = it != shapes.end() ? it->second : tools::concrete_shape(ports[i], symbols);
    KILN_CHECK(ports[i].dtype != DType::undefined,
               cat("input '", ports[i].name, "' has no declared element type; give it with --input"));
    tensors[i] = tools::random_tensor(ports[i].name, ports[i].dtype, shape, rng);
    sources[i] = cat("random, seed ", o.seed);
  }
  for (size_t i = 0; i < ports.size(); ++i)
    std::cout << "input  " << ports[i].name << "  " << shape_to_string(tensors[i].shape()) << "  "
              << dtype_name(tensors[i].dtype()) << "  (" << sources[i] << ")\n";

  t0 = Clock::now();
  CompiledModel compiled = core.compile_model(model);
  double compile_ms = ms_since(t0);
  InferRequest req = compiled.create_infer_request();
  for (size_t i = 0; i < ports.size(); ++i) req.set_input_tensor(i, tensors[i]);

  std::vector<double> times;
  for (int it = 0; it < o.iterations; ++it) {
    t0 = Clock::now();
    req.infer();
    times.push_back(ms_since(t0));
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
