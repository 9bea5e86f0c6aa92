// kiln quantize: post-training quantization of an ONNX model into a standard model any runtime
// reads (tools/common/quantize.hpp), and a report of what it costs in accuracy: the quantized
// and the f32 model run (in f32) on the same samples, per output the largest difference, the
// cosine similarity and, for [N, classes] outputs, how often the top-1 class agrees.
#include <kiln/core.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/quantize.hpp"
#include "tools/common/quantize_static.hpp"
#include "tools/common/run_util.hpp"
#include "tools/common/tensor_file.hpp"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

// The samples for the report: DIR/<input>/*.npy (one sample per file, sorted by name) or
// DIR/<input>.npy (one sample); without a directory, one set of random inputs.
std::vector<std::vector<Tensor>> load_samples(const std::string& dir, const std::vector<PortInfo>& ports, uint32_t seed) {
  std::vector<std::vector<Tensor>> samples;
  if (dir.empty()) {
    samples.push_back(tools::prepare_inputs(ports, {}, {}, true, seed).tensors);
    return samples;
  }
  std::error_code ec;
  KILN_CHECK(fs::is_directory(dir, ec), cat("--calibration: '", dir, "' is not a directory"));
  std::vector<std::vector<std::string>> files(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) {
    const fs::path sub = fs::path(dir) / tools::sanitize_file_name(ports[i].name);
    if (fs::is_directory(sub, ec)) {
      for (const auto& e : fs::directory_iterator(sub))
        if (e.path().extension() == ".npy" || e.path().extension() == ".pb") files[i].push_back(e.path().string());
      std::sort(files[i].begin(), files[i].end());
    } else if (fs::exists(sub.string() + ".npy", ec)) {
      files[i].push_back(sub.string() + ".npy");
    }
    KILN_CHECK(!files[i].empty(), cat("--calibration: no sample for input '", ports[i].name, "' (expected ",
                                      sub.string(), "/*.npy or ", sub.string(), ".npy)"));
    KILN_CHECK(files[i].size() == files[0].size(),
               cat("--calibration: input '", ports[i].name, "' has ", files[i].size(), " samples, input '",
                   ports[0].name, "' has ", files[0].size()));
  }
  for (size_t s = 0; s < files[0].size(); ++s) {
    std::vector<Tensor> one;
    for (size_t i = 0; i < ports.size(); ++i) one.push_back(tools::load_tensor_file(files[i][s]));
    samples.push_back(std::move(one));
  }
  return samples;
}

std::vector<std::vector<Tensor>> run_all(Core& core, const std::shared_ptr<Model>& model,
                                         const std::vector<std::vector<Tensor>>& samples) {
  CompiledModel compiled = core.compile_model(model, {{"inference_precision", "f32"}});
  InferRequest req = compiled.create_infer_request();
  std::vector<std::vector<Tensor>> outs;
  for (const auto& s : samples) {
    for (size_t i = 0; i < s.size(); ++i) req.set_input_tensor(i, s[i]);
    req.infer();
    std::vector<Tensor> o;
    for (size_t i = 0; i < compiled.outputs().size(); ++i) o.push_back(req.get_output_tensor(i).clone());
    outs.push_back(std::move(o));
  }
  return outs;
}

void report_accuracy(const std::vector<PortInfo>& outputs, const std::vector<std::vector<Tensor>>& want,
                     const std::vector<std::vector<Tensor>>& got) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    double max_diff = 0, dot = 0, na = 0, nb = 0, max_ref = 0;
    int64_t top1_same = 0, top1_total = 0;
    bool floating = true;
    for (size_t s = 0; s < want.size(); ++s) {
      const Tensor &w = want[s][k], &g = got[s][k];
      if (!w.is_tensor() || !is_floating(w.dtype()) || w.shape() != g.shape()) {
        floating = false;
        break;
      }
      const std::vector<double> a = w.to_f64(), b = g.to_f64();
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
        max_ref = std::max(max_ref, std::fabs(a[i]));
        dot += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      if (w.rank() == 2 && w.shape()[1] > 1) {  // [N, classes]
        const int64_t C = w.shape()[1];
        for (int64_t r = 0; r < w.shape()[0]; ++r) {
          auto row = [&](const std::vector<double>& v) {
            return std::max_element(v.begin() + r * C, v.begin() + (r + 1) * C) - (v.begin() + r * C);
          };
          top1_same += row(a) == row(b);
          ++top1_total;
        }
      }
    }
    if (!floating) {
      std::cout << "  " << outputs[k].name << ": not a float tensor, not compared\n";
      continue;
    }
    const double cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
    char buf[256];
    std::snprintf(buf, sizeof buf, "max |diff| %.4g (f32 values up to %.4g), cosine similarity %.6f", max_diff, max_ref,
                  cosine);
    std::cout << "  " << outputs[k].name << ": " << buf;
    if (top1_total > 0) std::cout << cat(", top-1 agreement ", top1_same, "/", top1_total);
    std::cout << "\n";
  }
}

}  // namespace

int cmd_quantize(const QuantizeCmdOptions& o) {
  std::error_code ec;
  KILN_CHECK(fs::exists(o.model, ec) && !fs::is_directory(o.model, ec), cat("model file '", o.model, "' does not exist"));
  if (o.output.empty()) {
    std::cerr << "kiln quantize: -o OUT.onnx is required\n";
    return 2;
  }
  if (!o.dynamic && o.calibration.empty()) {
    std::cerr << "kiln quantize: static quantization calibrates activation ranges on your samples: give "
                 "--calibration DIR (DIR/<input>/*.npy or DIR/<input>.npy), or use --dynamic\n";
    return 2;
  }
  onnx::ModelProto model;
  {
    std::ifstream f(o.model, std::ios::binary);
    KILN_CHECK(f && model.ParseFromIstream(&f), cat("'", o.model, "' is not a readable ONNX model"));
  }
  for (const auto& name : o.exclude) {
    bool found = false;
    for (const auto& n : model.graph().node()) found = found || n.name() == name;
    KILN_CHECK(found, cat("--exclude: the model has no node named '", name, "'"));
  }
  std::string base_dir = fs::path(o.model).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  const std::set<std::string> allowed = o.dynamic ? std::set<std::string>{"MatMul", "Conv"}
                                                  : std::set<std::string>{"Conv", "MatMul", "Gemm", "Add", "Concat", "MaxPool"};
  for (const auto& t : o.op_types)
    KILN_CHECK(allowed.count(t), cat("--op-types: '", t, "' cannot be quantized", o.dynamic ? " dynamically" : "",
                                     " (", join(std::vector<std::string>(allowed.begin(), allowed.end()), ", "), ")"));
  Core core;
  const std::shared_ptr<Model> float_model = core.read_model(o.model);  // read once: the ports and the report
  const auto ports = float_model->inputs();
  std::vector<std::vector<Tensor>> samples;
  tools::QuantizeReport report;
  if (o.dynamic) {
    tools::QuantizeOptions q;
    q.per_channel = o.per_channel;
    q.reduce_range = o.reduce_range;
    q.exclude.insert(o.exclude.begin(), o.exclude.end());
    if (!o.op_types.empty()) q.op_types = std::set<std::string>(o.op_types.begin(), o.op_types.end());
    report = tools::quantize_dynamic(model, base_dir, q);
  } else {
    tools::StaticQuantizeOptions q;
    q.per_channel = o.per_channel;
    q.reduce_range = o.reduce_range;
    KILN_CHECK(o.activation_type == "uint8" || o.activation_type == "int8",
               cat("--activation-type: '", o.activation_type, "' is not uint8 or int8"));
    q.signed_activations = o.activation_type == "int8";
    q.symmetric_activations = o.symmetric_activations;
    q.exclude.insert(o.exclude.begin(), o.exclude.end());
    if (!o.op_types.empty()) q.op_types = std::set<std::string>(o.op_types.begin(), o.op_types.end());
    tools::RangeCalibrator calibrator(o.method, o.percentile);
    samples = load_samples(o.calibration, ports, o.seed);
    if (const size_t folded = tools::fold_batch_norms(model, base_dir))
      std::cout << "folded " << folded << " BatchNormalization into the Conv before them\n";
    const std::vector<std::string> tensors = tools::tensors_to_calibrate(model, q);
    const auto ranges = tools::calibrate(core, model, base_dir, tensors, samples, calibrator);
    std::cout << "calibrated " << tensors.size() << " tensors on " << samples.size() << " sample"
              << (samples.size() == 1 ? "" : "s") << " (" << o.method << ")\n";
    report = tools::quantize_static(model, base_dir, q, ranges);
  }
  {
    std::ofstream f(o.output, std::ios::binary);
    KILN_CHECK(f && model.SerializeToOstream(&f), cat("cannot write '", o.output, "'"));
  }
  std::map<std::string, int> by_op;
  for (const auto& s : report.quantized) by_op[s.substr(s.rfind('(') + 1, s.size() - s.rfind('(') - 2)]++;
  std::cout << "quantized " << report.quantized.size() << " nodes (" << (o.dynamic ? "dynamic" : "static QDQ")
            << ", " << (o.reduce_range ? "7-bit" : "int8") << " weights " << (o.per_channel ? "per channel" : "per tensor") << ", "
            << (o.dynamic ? "uint8" : o.activation_type) << (o.symmetric_activations && !o.dynamic ? " symmetric" : "")
            << " activations):";
  for (const auto& [op, n] : by_op) std::cout << " " << op << " x" << n;
  std::cout << "\n";
  for (const auto& s : report.skipped) std::cout << "kept in float: " << s << "\n";
  std::cout << "wrote " << o.output << "\n";
  if (o.no_report) return 0;

  if (samples.empty()) samples = load_samples(o.calibration, ports, o.seed);
  const auto want = run_all(core, float_model, samples);
  const auto got = run_all(core, core.read_model(o.output), samples);
  std::cout << "accuracy against the float model on " << samples.size()
            << (o.calibration.empty() ? " random sample" : " sample") << (samples.size() == 1 ? "" : "s")
            << (o.dynamic ? " (both run in f32)" : " (the float model in f32, the quantized one as kiln runs it)")
            << ":\n";
  report_accuracy(float_model->outputs(), want, got);
  return 0;
}

}  // namespace kiln::cli
