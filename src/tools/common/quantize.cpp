#include "tools/common/quantize.hpp"

#include <kiln/error.hpp>
#include <kiln/tensor.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/strings.hpp"
#include "frontend/onnx/tensor_proto.hpp"

namespace kiln::tools {

namespace {

constexpr int kMinOpset = 11;  // DynamicQuantizeLinear

// Every value name a graph and its subgraphs read (subgraphs may read outer values by name).
void collect_reads(const onnx::GraphProto& g, std::unordered_set<std::string>& names) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) names.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), names);
      for (const auto& sg : a.graphs()) collect_reads(sg, names);
    }
  }
  for (const auto& o : g.output()) names.insert(o.name());
}

class Rewriter {
 public:
  Rewriter(onnx::ModelProto& m, const std::string& base_dir, const QuantizeOptions& o)
      : g_(*m.mutable_graph()), base_dir_(base_dir), o_(o), names_(g_) {
    for (const auto& t : g_.initializer()) init_[t.name()] = &t;
  }

  QuantizeReport run() {
    QuantizeReport report;
    std::vector<onnx::NodeProto> out;
    for (const onnx::NodeProto& n : g_.node()) {
      const std::string what = cat(n.name().empty() ? n.output(0) : n.name(), " (", n.op_type(), ")");
      const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
      if (!onnx_domain || !o_.op_types.count(n.op_type())) {
        out.push_back(n);
        continue;
      }
      if (o_.exclude.count(n.name())) {
        report.skipped.push_back(what + ": excluded");
        out.push_back(n);
        continue;
      }
      const std::string why = n.op_type() == "MatMul" ? matmul(n, out) : n.op_type() == "Conv" ? conv(n, out) : "not quantizable";
      if (why.empty()) {
        report.quantized.push_back(what);
      } else {
        report.skipped.push_back(what + ": " + why);
        out.push_back(n);
      }
    }
    g_.clear_node();
    for (auto& n : out) *g_.add_node() = std::move(n);
    drop_unread_initializers();
    return report;
  }

 private:
  std::string fresh(const std::string& base) { return names_.fresh(base); }
  std::pair<Tensor, std::vector<float>> quantize_weight(const Tensor& w, size_t axis) {
    return quantize_weight_symmetric(w, axis, o_.per_channel, o_.reduce_range);
  }

  onnx::NodeProto& add(std::vector<onnx::NodeProto>& out, const std::string& op, const std::vector<std::string>& in,
                       const std::vector<std::string>& outs, const std::string& name) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(fresh(name));
    for (const auto& i : in) n.add_input(i);
    for (const auto& o : outs) n.add_output(o);
    out.push_back(std::move(n));
    return out.back();
  }

  void add_initializer(const std::string& name, const Tensor& t) { tools::add_initializer(g_, name, t); }

  // A constant float initializer of this rank range, or why not.
  std::string float_weight(const std::string& name, size_t min_rank, size_t max_rank, Tensor* w) {
    auto it = init_.find(name);
    if (it == init_.end()) return cat("'", name, "' is not a constant initializer");
    if (it->second->data_type() != onnx::TensorProto::FLOAT) return cat("'", name, "' is not float");
    *w = frontend::tensor_from_proto(*it->second, base_dir_);
    if (w->rank() < min_rank || w->rank() > max_rank) return cat("'", name, "' has rank ", w->rank());
    return "";
  }

  // DynamicQuantizeLinear of activation `x`, made once (before the first node that needs it).
  const std::array<std::string, 3>& quantized(const std::string& x, std::vector<onnx::NodeProto>& out) {
    auto it = dql_.find(x);
    if (it != dql_.end()) return it->second;
    std::array<std::string, 3> names = {fresh(x + "_quantized"), fresh(x + "_scale"), fresh(x + "_zero_point")};
    add(out, "DynamicQuantizeLinear", {x}, {names[0], names[1], names[2]}, x + "_QuantizeLinear");
    return dql_[x] = names;
  }

  // scale tensor: a scalar, or the per-channel values shaped `shape`.
  std::string scale_initializer(const std::string& base, const std::vector<float>& scale, const Shape& shape) {
    const std::string name = fresh(base);
    if (scale.size() == 1) add_initializer(name, Tensor::scalar<float>(scale[0]));
    else add_initializer(name, Tensor::from_vector<float>(scale, shape));
    return name;
  }

  std::string matmul(const onnx::NodeProto& n, std::vector<onnx::NodeProto>& out) {
    if (n.input_size() != 2 || n.output_size() != 1) return "not a two-input MatMul";
    if (init_.count(n.input(0))) return "A is a constant";
    Tensor b;
    if (std::string why = float_weight(n.input(1), 2, 2, &b); !why.empty()) return why;
    auto [q, scale] = quantize_weight(b, 1);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    const std::string bq = fresh(n.input(1) + "_quantized"), bz = fresh(n.input(1) + "_zero_point");
    add_initializer(bq, q);
    const int64_t N = b.shape()[1];
    add_initializer(bz, Tensor::scalar<int8_t>(0));  // symmetric: 0 for every column
    const std::string bs = scale_initializer(n.input(1) + "_scale", scale, {N});
    const auto& a = quantized(n.input(0), out);
    const std::string acc = fresh(n.output(0) + "_output_quantized"), accf = fresh(n.output(0) + "_output_float"),
                      s = fresh(base + "_scales");
    add(out, "MatMulInteger", {a[0], bq, a[2], bz}, {acc}, base + "_quant");
    add(out, "Cast", {acc}, {accf}, base + "_cast").add_attribute()->CopyFrom(int_attribute("to", onnx::TensorProto::FLOAT));
    add(out, "Mul", {a[1], bs}, {s}, base + "_scales_mul");
    add(out, "Mul", {accf, s}, {n.output(0)}, base + "_output_scale_mul");
    return "";
  }

  std::string conv(const onnx::NodeProto& n, std::vector<onnx::NodeProto>& out) {
    if (n.input_size() < 2 || n.output_size() != 1) return "not a Conv with weights";
    if (init_.count(n.input(0))) return "X is a constant";
    Tensor w, bias;
    if (std::string why = float_weight(n.input(1), 3, 5, &w); !why.empty()) return why;
    const bool has_bias = n.input_size() > 2 && !n.input(2).empty();
    if (has_bias) {
      if (std::string why = float_weight(n.input(2), 1, 1, &bias); !why.empty()) return "bias " + why;
    }
    auto [q, scale] = quantize_weight(w, 0);
    const int64_t M = w.shape()[0];
    Shape per_channel(w.rank() - 1, 1);  // [M, 1, ...]: broadcasts over [N, M, spatial...]
    per_channel[0] = M;
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    const std::string wq = fresh(n.input(1) + "_quantized"), wz = fresh(n.input(1) + "_zero_point");
    add_initializer(wq, q);
    add_initializer(wz, Tensor::scalar<int8_t>(0));  // symmetric: 0 for every channel (ORT takes no other form)
    const std::string ws = scale_initializer(n.input(1) + "_scale", scale, per_channel);
    const auto& x = quantized(n.input(0), out);
    const std::string acc = fresh(n.output(0) + "_output_quantized"), accf = fresh(n.output(0) + "_output_float"),
                      s = fresh(base + "_scales");
    onnx::NodeProto& ci = add(out, "ConvInteger", {x[0], wq, x[2], wz}, {acc}, base + "_quant");
    for (const auto& attr : n.attribute()) *ci.add_attribute() = attr;  // same window
    add(out, "Cast", {acc}, {accf}, base + "_cast").add_attribute()->CopyFrom(int_attribute("to", onnx::TensorProto::FLOAT));
    add(out, "Mul", {x[1], ws}, {s}, base + "_scales_mul");
    if (!has_bias) {
      add(out, "Mul", {accf, s}, {n.output(0)}, base + "_output_scale_mul");
      return "";
    }
    const std::string scaled = fresh(n.output(0) + "_scaled"), b = fresh(n.input(2) + "_reshaped");
    add_initializer(b, Tensor::from_vector<float>(
                           std::vector<float>(bias.data<float>(), bias.data<float>() + bias.size()), per_channel));
    add(out, "Mul", {accf, s}, {scaled}, base + "_output_scale_mul");
    add(out, "Add", {scaled, b}, {n.output(0)}, base + "_bias_add");
    return "";
  }

  void drop_unread_initializers() { tools::drop_unread_initializers(g_); }

  onnx::GraphProto& g_;
  std::string base_dir_;
  const QuantizeOptions& o_;
  std::unordered_map<std::string, const onnx::TensorProto*> init_;
  GraphNames names_;
  std::map<std::string, std::array<std::string, 3>> dql_;
};

}  // namespace

std::pair<Tensor, std::vector<float>> quantize_weight_symmetric(const Tensor& w, size_t axis, bool per_channel,
                                                                bool reduce_range) {
  const float qmax = reduce_range ? 64.0f : 127.0f;
  const Shape& s = w.shape();
  int64_t inner = 1;
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  const int64_t channels = per_channel ? s[axis] : 1;
  std::vector<float> absmax(static_cast<size_t>(channels), 0.0f);
  const float* p = w.data<float>();
  auto channel = [&](int64_t i) { return static_cast<size_t>(per_channel ? (i / inner) % s[axis] : 0); };
  for (int64_t i = 0; i < w.size(); ++i) absmax[channel(i)] = std::max(absmax[channel(i)], std::fabs(p[i]));
  std::vector<float> scale(absmax.size());
  for (size_t c = 0; c < scale.size(); ++c) scale[c] = absmax[c] > 0.0f ? absmax[c] / qmax : 1.0f;
  Tensor q(DType::i8, s);
  for (int64_t i = 0; i < w.size(); ++i) {
    const float v = std::nearbyint(p[i] / scale[channel(i)]);
    q.data<int8_t>()[i] = static_cast<int8_t>(std::clamp(v, -qmax, qmax));
  }
  return {q, scale};
}

GraphNames::GraphNames(const onnx::GraphProto& g) {
  for (const auto& i : g.input()) taken_.insert(i.name());
  for (const auto& n : g.node()) {
    taken_.insert(n.name());
    for (const auto& v : n.output()) taken_.insert(v);
  }
  for (const auto& t : g.initializer()) taken_.insert(t.name());
}

std::string GraphNames::fresh(const std::string& base) {
  std::string name = base;
  for (int k = 1; taken_.count(name); ++k) name = cat(base, "_", k);
  taken_.insert(name);
  return name;
}

void add_initializer(onnx::GraphProto& g, const std::string& name, const Tensor& t) {
  onnx::TensorProto* p = g.add_initializer();
  frontend::tensor_to_proto(t, *p);
  p->set_name(name);
}

onnx::AttributeProto int_attribute(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

void drop_unread_initializers(onnx::GraphProto& g) {
  std::unordered_set<std::string> reads;
  collect_reads(g, reads);
  auto* inits = g.mutable_initializer();
  std::unordered_set<std::string> dropped;
  for (int i = inits->size() - 1; i >= 0; --i)
    if (!reads.count(inits->Get(i).name())) {
      dropped.insert(inits->Get(i).name());
      inits->DeleteSubrange(i, 1);
    }
  auto* inputs = g.mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
}

int onnx_opset(const onnx::ModelProto& model) {
  int opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  return opset;
}

QuantizeReport quantize_dynamic(onnx::ModelProto& model, const std::string& base_dir, const QuantizeOptions& options) {
  const int opset = onnx_opset(model);
  KILN_CHECK(opset >= kMinOpset, cat("kiln quantize: the model imports ONNX opset ", opset,
                                     "; dynamic quantization needs opset ", kMinOpset,
                                     " or later (DynamicQuantizeLinear)"));
  return Rewriter(model, base_dir, options).run();
}

}  // namespace kiln::tools
