#include "tools/common/quantize_static.hpp"

#include <kiln/core.hpp>
#include <kiln/error.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/strings.hpp"
#include "frontend/onnx/tensor_proto.hpp"

namespace kiln::tools {

namespace {

bool onnx_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }
bool moves_values(const std::string& op) {
  return op == "MaxPool" || op == "Reshape" || op == "Flatten" || op == "Transpose" || op == "Squeeze" ||
         op == "Unsqueeze" || op == "Slice";
}
int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}
bool is_clamp(const onnx::NodeProto& n) { return onnx_domain(n) && (n.op_type() == "Relu" || n.op_type() == "Clip"); }

// What the quantizer decided for a graph: the quantized nodes and tensors.
struct Plan {
  std::vector<int> nodes;                            // quantized nodes (indices), in order
  std::vector<std::string> tensors;                  // quantized activations, in order
  std::unordered_map<std::string, std::string> share;  // tensor -> the tensor whose parameters it takes
  std::unordered_map<int, std::string> why_not;      // skipped quantizable nodes -> reason
  std::string root(const std::string& t) const {
    auto it = share.find(t);
    return it == share.end() ? t : root(it->second);
  }
};

class Analysis {
 public:
  Analysis(const onnx::GraphProto& g, const StaticQuantizeOptions& o) : g_(g), o_(o) {
    for (const auto& t : g.initializer()) init_[t.name()] = &t;
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto& in : g.node(i).input())
        if (!in.empty()) readers_[in].push_back(i);
    for (const auto& out : g.output()) outputs_.insert(out.name());
  }

  Plan plan() {
    Plan p;
    std::unordered_map<std::string, bool> quantized;
    auto add = [&](const std::string& t) {
      if (!quantized[t]) p.tensors.push_back(t);
      quantized[t] = true;
    };
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      if (!onnx_domain(n)) continue;
      const std::string& op = n.op_type();
      if (moves_values(op)) {  // follows its input: quantized only when that is
        if (n.input_size() < 1 || !quantized[n.input(0)] || n.output_size() != 1 || o_.exclude.count(n.name())) continue;
        if (!o_.op_types.count("MaxPool") && op == "MaxPool") continue;
        p.nodes.push_back(i);
        p.share[n.output(0)] = n.input(0);
        quantized[n.output(0)] = true;
        p.tensors.push_back(n.output(0));
        continue;
      }
      if (op == "Concat") {
        bool any = false;  // a concat of no quantized input (shape arithmetic, float-only branches) is no candidate
        for (const auto& in : n.input()) any = any || (!in.empty() && quantized[in]);
        if (!o_.op_types.count(op) || !any) continue;
        if (std::string why = concat_why_not(n, quantized, p); !why.empty()) {
          p.why_not[i] = why;
          continue;
        }
        p.nodes.push_back(i);  // its inputs take its output's scale and zero point: one 8-bit copy
        for (const auto& in : n.input()) p.share[in] = n.output(0);
        add(n.output(0));
        continue;
      }
      if (!o_.op_types.count(op)) continue;
      if (o_.exclude.count(n.name())) {
        p.why_not[i] = "excluded";
        continue;
      }
      std::string why;
      std::vector<std::string> ins;
      if (op == "Conv") {
        if (n.input_size() < 2 || is_const(n.input(0))) why = "X is a constant or missing";
        else if (!float_initializer(n.input(1), 3, 5)) why = cat("the weights '", n.input(1), "' are not a float initializer");
        else if (n.input_size() > 2 && !n.input(2).empty() && !float_initializer(n.input(2), 1, 1)) why = "the bias is not a float initializer";
        ins = {n.input(0)};
      } else if (op == "MatMul") {
        if (n.input_size() != 2 || is_const(n.input(0))) why = "A is a constant";
        else if (!float_initializer(n.input(1), 2, 2))
          why = "B is not a 2-D float initializer (attention's products of two activations stay float)";
        ins = {n.input(0)};
      } else if (op == "Gemm") {
        if (n.input_size() < 2 || is_const(n.input(0))) why = "A is a constant";
        else if (int_attr(n, "transA", 0) != 0) why = "A is transposed (transA)";
        else if (!float_initializer(n.input(1), 2, 2)) why = "B is not a 2-D float initializer";
        else if (n.input_size() > 2 && !n.input(2).empty() && !float_initializer(n.input(2), 0, 2))
          why = "C is not a float initializer";
        ins = {n.input(0)};
      } else if (op == "Add") {
        if (n.input_size() != 2 || is_const(n.input(0)) || is_const(n.input(1))) why = "an operand is a constant";
        else if (!quantized[n.input(0)] || !quantized[n.input(1)])
          why = "an operand is not quantized (an int8 sum needs both from int8 ops)";
        ins = {n.input(0), n.input(1)};
      } else {
        why = "not an op static quantization handles";
      }
      if (n.output_size() != 1) why = "more than one output";
      if (!why.empty()) {
        p.why_not[i] = why;
        continue;
      }
      p.nodes.push_back(i);
      for (const auto& t : ins) add(t);
      if (op != "MatMul" && op != "Gemm") add(calibrated_output(n));  // a projection's result stays float
    }
    return p;
  }

  // Why a Concat cannot run on 8-bit data, or "": every input must be a quantized activation
  // whose parameters it can take over (read by this Concat alone, not a graph output, no other
  // tensor taking its parameters), so that all of them share the output's.
  std::string concat_why_not(const onnx::NodeProto& n, std::unordered_map<std::string, bool>& quantized,
                             const Plan& p) const {
    if (o_.exclude.count(n.name())) return "excluded";
    if (n.output_size() != 1 || n.input_size() < 2) return "not a Concat of several inputs";
    std::unordered_set<std::string> shared;
    for (const auto& [t, root] : p.share) shared.insert(root);
    for (const auto& in : n.input()) {
      if (in.empty() || is_const(in) || !quantized[in])
        return cat("input '", in, "' is not quantized (an 8-bit concat needs every input from int8 ops)");
      if (readers_.at(in).size() != 1 || outputs_.count(in) || p.share.count(in) || shared.count(in))
        return cat("input '", in, "' is read elsewhere or shares its scale (every input must take the output's)");
    }
    return "";
  }

  // The op's output, or the Relu / Clip that alone reads it (Conv, Add).
  std::string calibrated_output(const onnx::NodeProto& n) const {
    const std::string& y = n.output(0);
    if (n.op_type() == "MatMul" || n.op_type() == "Gemm" || outputs_.count(y)) return y;
    auto it = readers_.find(y);
    if (it == readers_.end() || it->second.size() != 1) return y;
    const onnx::NodeProto& act = g_.node(it->second[0]);
    return is_clamp(act) && act.input(0) == y && act.output_size() == 1 ? act.output(0) : y;
  }

  bool is_const(const std::string& name) const { return init_.count(name) != 0; }
  bool float_initializer(const std::string& name, int min_rank, int max_rank) const {
    auto it = init_.find(name);
    return it != init_.end() && it->second->data_type() == onnx::TensorProto::FLOAT &&
           it->second->dims_size() >= min_rank && it->second->dims_size() <= max_rank;
  }
  const onnx::TensorProto* initializer(const std::string& name) const { return init_.at(name); }

 private:
  const onnx::GraphProto& g_;
  const StaticQuantizeOptions& o_;
  std::unordered_map<std::string, const onnx::TensorProto*> init_;
  std::unordered_map<std::string, std::vector<int>> readers_;
  std::unordered_set<std::string> outputs_;
};

void check_opset(const onnx::ModelProto& model, const StaticQuantizeOptions& o) {
  const int opset = onnx_opset(model), need = o.per_channel ? 13 : 10;
  KILN_CHECK(opset >= need, cat("kiln quantize: the model imports ONNX opset ", opset, "; static quantization",
                                o.per_channel ? " per channel (DequantizeLinear with axis)" : "", " needs opset ", need,
                                " or later"));
}

// 8-bit parameters of a range [lo, hi] (0 included): scale (hi - lo) / 255 and the zero point
// that maps lo to the type's lowest value; symmetric: scale max(|lo|, |hi|) / 127.5 (uint8) or
// / 127 (int8, so -127..127 and 0 exact) and the zero point 128 / 0.
std::pair<float, int32_t> activation_params(std::pair<float, float> r, bool is_signed, bool symmetric) {
  const float lo = std::min(r.first, 0.0f), hi = std::max(r.second, 0.0f);
  const int32_t qmin = is_signed ? -128 : 0;
  if (symmetric) {
    const float m = std::max(-lo, hi);
    const int32_t zp = is_signed ? 0 : 128;
    if (!(m > 0) || !std::isfinite(m)) return {1.0f, zp};
    return {m / (is_signed ? 127.0f : 127.5f), zp};
  }
  if (!(hi - lo > 0) || !std::isfinite(hi - lo)) return {1.0f, 0};  // all zeros: 0 maps to 0 in either type
  const float scale = (hi - lo) / 255.0f;
  const float zp = std::clamp(std::nearbyint(static_cast<float>(qmin) - lo / scale), float(qmin), float(qmin + 255));
  return {scale, static_cast<int32_t>(zp)};
}

}  // namespace

size_t fold_batch_norms(onnx::ModelProto& model, const std::string& base_dir) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::unordered_map<std::string, const onnx::TensorProto*> init;
  for (const auto& t : g.initializer()) init[t.name()] = &t;
  std::unordered_map<std::string, int> readers;
  for (const auto& n : g.node())
    for (const auto& in : n.input()) readers[in]++;
  for (const auto& o : g.output()) readers[o.name()]++;
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output()) producer[o] = i;
  auto constant = [&](const std::string& name) -> const onnx::TensorProto* {
    auto it = init.find(name);
    return it != init.end() && it->second->data_type() == onnx::TensorProto::FLOAT ? it->second : nullptr;
  };
  GraphNames names(g);
  std::unordered_set<int> drop;
  std::vector<std::pair<std::string, Tensor>> added;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& bn = g.node(i);
    if (!onnx_domain(bn) || bn.op_type() != "BatchNormalization" || bn.input_size() != 5 || bn.output_size() != 1) continue;
    auto p = producer.find(bn.input(0));
    if (p == producer.end() || readers[bn.input(0)] != 1) continue;
    onnx::NodeProto& conv = *g.mutable_node(p->second);
    if (!onnx_domain(conv) || conv.op_type() != "Conv" || conv.input_size() < 2 || !constant(conv.input(1))) continue;
    const bool has_bias = conv.input_size() > 2 && !conv.input(2).empty();
    if (has_bias && !constant(conv.input(2))) continue;
    bool params = true;
    for (int k = 1; k < 5; ++k) params = params && constant(bn.input(k));
    if (!params) continue;
    Tensor w = frontend::tensor_from_proto(*constant(conv.input(1)), base_dir).clone();
    const int64_t M = w.shape()[0], inner = w.size() / M;
    std::vector<Tensor> bp;
    for (int k = 1; k < 5; ++k) bp.push_back(frontend::tensor_from_proto(*constant(bn.input(k)), base_dir));
    bool sizes = true;
    for (const Tensor& t : bp) sizes = sizes && t.size() == M;
    if (!sizes) continue;
    float eps = 1e-5f;
    for (const auto& a : bn.attribute())
      if (a.name() == "epsilon") eps = a.f();
    Tensor b(DType::f32, Shape{M});
    const Tensor b0 = has_bias ? frontend::tensor_from_proto(*constant(conv.input(2)), base_dir) : Tensor();
    for (int64_t m = 0; m < M; ++m) {
      const float k = bp[0].data<float>()[m] / std::sqrt(bp[3].data<float>()[m] + eps);
      for (int64_t j = 0; j < inner; ++j) w.data<float>()[m * inner + j] *= k;
      const float bias = has_bias ? b0.data<float>()[m] : 0.0f;
      b.data<float>()[m] = (bias - bp[2].data<float>()[m]) * k + bp[1].data<float>()[m];
    }
    const std::string wn = names.fresh(conv.input(1) + "_bn_folded"), bn_name = names.fresh(bn.output(0) + "_bias");
    added.emplace_back(wn, w);
    added.emplace_back(bn_name, b);
    conv.set_input(1, wn);
    if (conv.input_size() > 2) conv.set_input(2, bn_name);
    else conv.add_input(bn_name);
    conv.set_output(0, bn.output(0));
    drop.insert(i);
  }
  if (drop.empty()) return 0;
  std::vector<onnx::NodeProto> keep;
  for (int i = 0; i < g.node_size(); ++i)
    if (!drop.count(i)) keep.push_back(g.node(i));
  g.clear_node();
  for (auto& n : keep) *g.add_node() = std::move(n);
  for (auto& [name, t] : added) add_initializer(g, name, t);
  drop_unread_initializers(g);
  return drop.size();
}

std::vector<std::string> tensors_to_calibrate(const onnx::ModelProto& model, const StaticQuantizeOptions& options) {
  check_opset(model, options);
  Plan p = Analysis(model.graph(), options).plan();
  std::vector<std::string> out;
  for (const auto& t : p.tensors)
    if (!p.share.count(t)) out.push_back(t);
  return out;
}

RangeCalibrator::RangeCalibrator(std::string method, double percentile)
    : method_(std::move(method)), percentile_(percentile) {
  KILN_CHECK(method_ == "minmax" || method_ == "percentile" || method_ == "entropy",
             cat("--method: '", method_, "' is not a calibration method (minmax, percentile, entropy)"));
  KILN_CHECK(percentile_ > 0 && percentile_ <= 100, cat("--percentile: ", percentile_, " is not in (0, 100]"));
}

namespace {
constexpr int kBins = 2048;
}

void RangeCalibrator::observe_range(const std::string& tensor, const Tensor& t) {
  KILN_CHECK(t.dtype() == DType::f32, cat("calibration: tensor '", tensor, "' is ", dtype_name(t.dtype()), ", not float"));
  Stats& s = stats_[tensor];
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) {
    if (!std::isfinite(p[i])) continue;
    s.lo = std::min(s.lo, p[i]);
    s.hi = std::max(s.hi, p[i]);
  }
}

void RangeCalibrator::observe_histogram(const std::string& tensor, const Tensor& t) {
  Stats& s = stats_.at(tensor);
  const double top = std::max(std::fabs(double(s.lo)), std::fabs(double(s.hi)));
  if (s.hist.empty()) s.hist.assign(kBins, 0.0);
  if (!(top > 0)) return;
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) {
    if (!std::isfinite(p[i])) continue;
    const int b = std::min(kBins - 1, static_cast<int>(std::fabs(double(p[i])) / top * kBins));
    s.hist[static_cast<size_t>(b)] += 1;
  }
}

float RangeCalibrator::threshold(const Stats& s) const {
  const double top = std::max(std::fabs(double(s.lo)), std::fabs(double(s.hi)));
  const double width = top / kBins;
  double total = 0;
  for (double h : s.hist) total += h;
  if (!(total > 0)) return static_cast<float>(top);
  if (method_ == "percentile") {
    double cum = 0;
    for (int b = 0; b < kBins; ++b) {
      cum += s.hist[static_cast<size_t>(b)];
      if (cum >= total * percentile_ / 100.0) return static_cast<float>((b + 1) * width);
    }
    return static_cast<float>(top);
  }
  // entropy: the threshold i (in bins) whose distribution P (outliers folded into its last
  // bin), merged into `levels` bins and expanded back as Q, has the least KL(P || Q)
  const int levels = s.lo >= 0 ? 255 : 128;  // the steps one sign of the range gets
  double best = std::numeric_limits<double>::infinity();
  int best_i = kBins;
  for (int i = levels; i <= kBins; ++i) {
    std::vector<double> P(s.hist.begin(), s.hist.begin() + i);
    for (int b = i; b < kBins; ++b) P[static_cast<size_t>(i - 1)] += s.hist[static_cast<size_t>(b)];
    std::vector<double> Q(static_cast<size_t>(i), 0.0);
    for (int l = 0; l < levels; ++l) {
      const int b0 = l * i / levels, b1 = (l + 1) * i / levels;
      double sum = 0;
      int nonzero = 0;
      for (int b = b0; b < b1; ++b) {
        sum += s.hist[static_cast<size_t>(b)];
        nonzero += s.hist[static_cast<size_t>(b)] > 0;
      }
      for (int b = b0; b < b1; ++b)
        if (s.hist[static_cast<size_t>(b)] > 0) Q[static_cast<size_t>(b)] = sum / nonzero;
    }
    double ps = 0, qs = 0;
    for (int b = 0; b < i; ++b) ps += P[static_cast<size_t>(b)], qs += Q[static_cast<size_t>(b)];
    if (!(ps > 0) || !(qs > 0)) continue;
    double kl = 0;
    for (int b = 0; b < i; ++b) {
      const double pb = P[static_cast<size_t>(b)] / ps, qb = Q[static_cast<size_t>(b)] / qs;
      if (pb > 0) kl += qb > 0 ? pb * std::log(pb / qb) : pb * 30.0;  // an empty Q bin where P has mass: a large cost
    }
    if (kl < best) best = kl, best_i = i;
  }
  return static_cast<float>((best_i + 0.5) * width);
}

std::map<std::string, std::pair<float, float>> RangeCalibrator::ranges() const {
  std::map<std::string, std::pair<float, float>> r;
  for (const auto& [name, s] : stats_) {
    float lo = s.lo, hi = s.hi;
    if (needs_histogram() && !s.hist.empty()) {
      const float t = threshold(s);
      lo = std::max(lo, -t);
      hi = std::min(hi, t);
    }
    r[name] = {std::min(lo, 0.0f), std::max(hi, 0.0f)};
  }
  return r;
}

std::map<std::string, std::pair<float, float>> calibrate(Core& core, const onnx::ModelProto& model,
                                                         const std::string& base_dir,
                                                         const std::vector<std::string>& tensors,
                                                         const std::vector<std::vector<Tensor>>& samples,
                                                         RangeCalibrator& calibrator) {
  onnx::ModelProto probe = model;
  std::set<std::string> outputs;
  for (const auto& o : probe.graph().output()) outputs.insert(o.name());
  for (const auto& t : tensors)
    if (!outputs.count(t)) {
      onnx::ValueInfoProto* v = probe.mutable_graph()->add_output();
      v->set_name(t);
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    }
  std::string bytes;
  KILN_CHECK(probe.SerializeToString(&bytes), "kiln quantize: cannot serialize the calibration model");
  CompiledModel compiled =
      core.compile_model(core.read_model_from_memory(bytes, base_dir), {{"inference_precision", "f32"}});
  std::map<std::string, size_t> index;
  const auto ports = compiled.outputs();
  for (size_t i = 0; i < ports.size(); ++i) index[ports[i].name] = i;
  InferRequest req = compiled.create_infer_request();
  const int passes = calibrator.needs_histogram() ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass)
    for (const auto& s : samples) {
      for (size_t i = 0; i < s.size(); ++i) req.set_input_tensor(i, s[i]);
      req.infer();
      for (const auto& t : tensors) {
        const Tensor v = req.get_output_tensor(index.at(t));
        if (pass == 0) calibrator.observe_range(t, v);
        else calibrator.observe_histogram(t, v);
      }
    }
  return calibrator.ranges();
}

QuantizeReport quantize_static(onnx::ModelProto& model, const std::string& base_dir,
                               const StaticQuantizeOptions& options,
                               const std::map<std::string, std::pair<float, float>>& ranges) {
  check_opset(model, options);
  onnx::GraphProto& g = *model.mutable_graph();
  Analysis analysis(g, options);
  const Plan plan = analysis.plan();
  GraphNames names(g);
  QuantizeReport report;

  // parameters of every quantized tensor
  struct Params {
    std::string scale, zero_point;
    float scale_value = 1;
  };
  std::unordered_map<std::string, Params> params;
  auto add_init = [&](const std::string& base, const Tensor& t) {
    const std::string name = names.fresh(base);
    add_initializer(g, name, t);
    return name;
  };
  for (const auto& t : plan.tensors) {
    if (plan.share.count(t)) continue;
    auto it = ranges.find(t);
    KILN_CHECK(it != ranges.end(), cat("kiln quantize: no calibrated range for tensor '", t, "'"));
    const auto [scale, zp] = activation_params(it->second, options.signed_activations, options.symmetric_activations);
    const Tensor zp_tensor = options.signed_activations ? Tensor::scalar<int8_t>(static_cast<int8_t>(zp))
                                                        : Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp));
    params[t] = {add_init(t + "_scale", Tensor::scalar<float>(scale)), add_init(t + "_zero_point", zp_tensor), scale};
  }
  auto params_of = [&](const std::string& t) -> const Params& { return params.at(plan.root(t)); };

  // the quantized value each tensor's readers take instead: t -> DQ(Q(t))
  std::unordered_map<std::string, std::string> dq_name;
  for (const auto& t : plan.tensors) dq_name[t] = names.fresh(t + "_DequantizeLinear_Output");
  auto qdq = [&](const std::string& t, std::vector<onnx::NodeProto>& out) {
    const Params& p = params_of(t);
    const std::string q = names.fresh(t + "_QuantizeLinear_Output");
    onnx::NodeProto qn, dn;
    qn.set_op_type("QuantizeLinear");
    qn.set_name(names.fresh(t + "_QuantizeLinear"));
    for (const auto& i : {t, p.scale, p.zero_point}) qn.add_input(i);
    qn.add_output(q);
    dn.set_op_type("DequantizeLinear");
    dn.set_name(names.fresh(t + "_DequantizeLinear"));
    for (const auto& i : {q, p.scale, p.zero_point}) dn.add_input(i);
    dn.add_output(dq_name.at(t));
    out.push_back(std::move(qn));
    out.push_back(std::move(dn));
  };
  auto dq_const = [&](const std::string& base, const Tensor& q, const std::vector<float>& scale, const Tensor& zp,
                      int64_t axis, std::vector<onnx::NodeProto>& out) {
    onnx::NodeProto dn;
    dn.set_op_type("DequantizeLinear");
    dn.set_name(names.fresh(base + "_DequantizeLinear"));
    dn.add_input(add_init(base + "_quantized", q));
    dn.add_input(add_init(base + "_scale", scale.size() == 1 ? Tensor::scalar<float>(scale[0])
                                                             : Tensor::from_vector<float>(scale, {int64_t(scale.size())})));
    dn.add_input(add_init(base + "_zero_point", zp));
    if (scale.size() > 1) *dn.add_attribute() = int_attribute("axis", axis);
    const std::string out_name = names.fresh(base + "_DequantizeLinear_Output");
    dn.add_output(out_name);
    out.push_back(std::move(dn));
    return out_name;
  };

  // a bias of M values as int32 in the scale x_scale * w_scale[m] (the product's), behind its DQ
  auto int32_bias = [&](const std::string& base, const Tensor& b, float sx, const std::vector<float>& ws,
                        std::vector<onnx::NodeProto>& out) {
    const int64_t M = b.size();
    std::vector<float> bs(static_cast<size_t>(M));
    Tensor bq(DType::i32, {M});
    for (int64_t m = 0; m < M; ++m) {
      bs[static_cast<size_t>(m)] = sx * ws[ws.size() == 1 ? 0 : static_cast<size_t>(m)];
      const double v = std::nearbyint(double(b.data<float>()[m]) / bs[static_cast<size_t>(m)]);
      bq.data<int32_t>()[m] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
    }
    return dq_const(base, bq, bs, Tensor::from_vector<int32_t>(std::vector<int32_t>(size_t(M), 0), {M}), 0, out);
  };
  // a float weight initializer as int8 (symmetric, zero point 0), per tensor or per index of
  // `axis`, behind its DQ: the DQ's output and the scales
  auto weight_dq = [&](const std::string& name, int64_t axis, std::vector<onnx::NodeProto>& out) {
    const Tensor w = frontend::tensor_from_proto(*analysis.initializer(name), base_dir);
    auto [wq, ws] = quantize_weight_symmetric(w, static_cast<size_t>(axis), options.per_channel, options.reduce_range);
    const Tensor zero = Tensor::from_vector<int8_t>(std::vector<int8_t>(ws.size(), 0),
                                                    ws.size() == 1 ? Shape{} : Shape{int64_t(ws.size())});
    return std::make_pair(dq_const(name, wq, ws, zero, axis, out), ws);
  };
  std::unordered_set<int> quantized_nodes(plan.nodes.begin(), plan.nodes.end());
  std::unordered_set<std::string> quantized_tensors(plan.tensors.begin(), plan.tensors.end());
  std::vector<onnx::NodeProto> out;
  for (const auto& in : g.input())
    if (quantized_tensors.count(in.name())) qdq(in.name(), out);
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto n = g.node(i);
    const std::string what = cat(n.name().empty() ? n.output(0) : n.name(), " (", n.op_type(), ")");
    // readers of quantized tensors read their DQ
    for (auto& in : *n.mutable_input())
      if (auto it = dq_name.find(in); it != dq_name.end()) in = it->second;
    if (quantized_nodes.count(i) && n.op_type() == "Conv") {
      const auto [w, ws] = weight_dq(n.input(1), 0, out);
      n.set_input(1, w);
      if (n.input_size() > 2 && !n.input(2).empty())
        n.set_input(2, int32_bias(n.input(2), frontend::tensor_from_proto(*analysis.initializer(n.input(2)), base_dir),
                                  params_of(g.node(i).input(0)).scale_value, ws, out));
    } else if (quantized_nodes.count(i) && n.op_type() == "MatMul" && analysis.is_const(n.input(1))) {
      n.set_input(1, weight_dq(n.input(1), 1, out).first);
    } else if (quantized_nodes.count(i) && n.op_type() == "Gemm") {
      // B per output column: axis 0 of [N, K] (transB), else axis 1 of [K, N]; a C of N values
      // int32 in the scale a_scale * b_scale[n], as for a Conv's bias
      const int64_t axis = int_attr(n, "transB", 0) ? 0 : 1;
      const int64_t N = analysis.initializer(n.input(1))->dims(static_cast<int>(axis));
      const auto [b, bs] = weight_dq(n.input(1), axis, out);
      n.set_input(1, b);
      const Tensor c = n.input_size() > 2 && !n.input(2).empty()
                           ? frontend::tensor_from_proto(*analysis.initializer(n.input(2)), base_dir)
                           : Tensor();
      if (c.dtype() == DType::f32 && c.rank() == 1 && c.size() == N)  // else C stays float
        n.set_input(2, int32_bias(n.input(2), c, params_of(g.node(i).input(0)).scale_value, bs, out));
    }
    if (quantized_nodes.count(i)) report.quantized.push_back(what);
    else if (auto it = plan.why_not.find(i); it != plan.why_not.end()) report.skipped.push_back(what + ": " + it->second);
    std::vector<std::string> made;
    for (const auto& o : n.output())
      if (quantized_tensors.count(o)) made.push_back(o);
    out.push_back(std::move(n));
    for (const auto& o : made) qdq(o, out);
  }
  // graph outputs keep their float values (read before the Q)
  g.clear_node();
  for (auto& n : out) *g.add_node() = std::move(n);
  drop_unread_initializers(g);
  return report;
}

}  // namespace kiln::tools
