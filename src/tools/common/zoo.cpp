#include "tools/common/zoo.hpp"

#include <kiln/error.hpp>
#include <kiln/tensor.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "core/strings.hpp"

namespace kiln::tools {

namespace {

constexpr int kOpset = 13;

struct Attr {
  onnx::AttributeProto proto;
};

Attr attr_i(const std::string& name, int64_t v) {
  Attr a;
  a.proto.set_name(name);
  a.proto.set_type(onnx::AttributeProto::INT);
  a.proto.set_i(v);
  return a;
}
Attr attr_f(const std::string& name, float v) {
  Attr a;
  a.proto.set_name(name);
  a.proto.set_type(onnx::AttributeProto::FLOAT);
  a.proto.set_f(v);
  return a;
}
Attr attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  Attr a;
  a.proto.set_name(name);
  a.proto.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.proto.add_ints(x);
  return a;
}

// Builds one ModelProto: initializers, nodes, inputs and outputs.
class Builder {
 public:
  Builder(const std::string& graph_name, uint32_t seed) : rng_(seed) {
    model_.set_ir_version(7);
    model_.set_producer_name("kiln zoo");
    model_.set_producer_version("0.1.0");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(kOpset);
    g_ = model_.mutable_graph();
    g_->set_name(graph_name);
  }

  // dims: numbers are static, anything else is a symbolic dim name.
  static void set_type(onnx::ValueInfoProto* vi, int elem_type, const std::vector<std::string>& dims) {
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  }
  void input(const std::string& name, int elem_type, const std::vector<std::string>& dims) {
    auto* vi = g_->add_input();
    vi->set_name(name);
    set_type(vi, elem_type, dims);
  }
  void output(const std::string& name, int elem_type, const std::vector<std::string>& dims) {
    auto* vi = g_->add_output();
    vi->set_name(name);
    set_type(vi, elem_type, dims);
  }

  // Float initializer stored as raw_data (like exporters write weights).
  std::string init_f32(const std::string& name, const Shape& shape, const std::vector<float>& v) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    KILN_CHECK(static_cast<int64_t>(v.size()) == shape_size(shape), "zoo: initializer size mismatch");
    std::string raw(v.size() * sizeof(float), '\0');
    if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
    t->set_raw_data(std::move(raw));
    return name;
  }
  // Small float constant stored in float_data (exercises the other TensorProto path).
  std::string const_f32(const std::string& name, const Shape& shape, const std::vector<float>& v) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return name;
  }
  std::string const_i64(const std::string& name, const Shape& shape, const std::vector<int64_t>& v) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }
  // N(mean, std) weights.
  std::string randn(const std::string& name, const Shape& shape, float stddev, float mean = 0.f) {
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(static_cast<size_t>(shape_size(shape)));
    for (float& x : v) x = dist(rng_);
    return init_f32(name, shape, v);
  }
  // U[lo, hi) weights.
  std::string uniform(const std::string& name, const Shape& shape, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(shape_size(shape)));
    for (float& x : v) x = dist(rng_);
    return init_f32(name, shape, v);
  }

  // Adds a node with one output; returns the output name (`out`, or generated).
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<Attr>& attrs = {},
                   std::string out = "") {
    ++counter_;
    if (out.empty()) out = cat(op, "_", counter_, "_out");
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(cat(op, "_", counter_));
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(out);
    for (const Attr& a : attrs) *n->add_attribute() = a.proto;
    return out;
  }

  onnx::ModelProto take() { return std::move(model_); }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* g_ = nullptr;
  std::mt19937 rng_;
  int counter_ = 0;
};

// ---------------------------------------------------------------- mlp

onnx::ModelProto build_mlp(uint32_t seed) {
  Builder b("mlp", seed);
  const int64_t in = 16, hidden = 32, out = 10;
  b.input("input", onnx::TensorProto::FLOAT, {"batch", "16"});
  auto w1 = b.randn("fc1.weight", {in, hidden}, std::sqrt(2.f / in));
  auto b1 = b.uniform("fc1.bias", {hidden}, -0.1f, 0.1f);
  auto w2 = b.randn("fc2.weight", {hidden, out}, std::sqrt(1.f / hidden));
  auto b2 = b.uniform("fc2.bias", {out}, -0.1f, 0.1f);
  auto x = b.node("MatMul", {"input", w1});
  x = b.node("Add", {x, b1});
  x = b.node("Relu", {x});
  x = b.node("MatMul", {x, w2});
  x = b.node("Add", {x, b2}, {}, "logits");
  b.node("Softmax", {x}, {attr_i("axis", -1)}, "output");
  b.output("output", onnx::TensorProto::FLOAT, {"batch", "10"});
  return b.take();
}

// ---------------------------------------------------------------- resnet18

struct ResNetBuilder {
  Builder& b;

  std::string conv(const std::string& prefix, const std::string& x, int64_t cin, int64_t cout, int64_t k,
                   int64_t stride, int64_t pad) {
    auto w = b.randn(prefix + ".weight", {cout, cin, k, k}, std::sqrt(2.f / static_cast<float>(cin * k * k)));
    return b.node("Conv", {x, w},
                  {attr_ints("dilations", {1, 1}), attr_i("group", 1), attr_ints("kernel_shape", {k, k}),
                   attr_ints("pads", {pad, pad, pad, pad}), attr_ints("strides", {stride, stride})});
  }
  // Inference-mode BatchNormalization; `gain` scales gamma (small on a block's last BN
  // so the residual sums stay O(1), as zero-init-residual training tends to produce).
  std::string bn(const std::string& prefix, const std::string& x, int64_t c, float gain = 1.f) {
    auto gamma = b.uniform(prefix + ".weight", {c}, 0.8f * gain, 1.2f * gain);
    auto beta = b.uniform(prefix + ".bias", {c}, -0.1f, 0.1f);
    auto mean = b.uniform(prefix + ".running_mean", {c}, -0.1f, 0.1f);
    auto var = b.uniform(prefix + ".running_var", {c}, 0.5f, 1.5f);
    return b.node("BatchNormalization", {x, gamma, beta, mean, var},
                  {attr_f("epsilon", 1e-5f), attr_f("momentum", 0.9f)});
  }
  std::string basic_block(const std::string& prefix, const std::string& x, int64_t cin, int64_t cout,
                          int64_t stride) {
    auto y = conv(prefix + ".conv1", x, cin, cout, 3, stride, 1);
    y = bn(prefix + ".bn1", y, cout);
    y = b.node("Relu", {y});
    y = conv(prefix + ".conv2", y, cout, cout, 3, 1, 1);
    y = bn(prefix + ".bn2", y, cout, 0.5f);
    std::string identity = x;
    if (stride != 1 || cin != cout) {
      identity = conv(prefix + ".downsample.0", x, cin, cout, 1, stride, 0);
      identity = bn(prefix + ".downsample.1", identity, cout);
    }
    auto s = b.node("Add", {y, identity});
    return b.node("Relu", {s});
  }
};

onnx::ModelProto build_resnet18(uint32_t seed) {
  Builder b("resnet18", seed);
  ResNetBuilder r{b};
  b.input("input", onnx::TensorProto::FLOAT, {"1", "3", "224", "224"});
  auto x = r.conv("conv1", "input", 3, 64, 7, 2, 3);
  x = r.bn("bn1", x, 64);
  x = b.node("Relu", {x});
  x = b.node("MaxPool", {x},
             {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {2, 2})});
  int64_t cin = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    int64_t cout = widths[stage];
    for (int blk = 0; blk < 2; ++blk) {
      int64_t stride = (stage > 0 && blk == 0) ? 2 : 1;
      x = r.basic_block(cat("layer", stage + 1, ".", blk), x, cin, cout, stride);
      cin = cout;
    }
  }
  x = b.node("GlobalAveragePool", {x});
  x = b.node("Flatten", {x}, {attr_i("axis", 1)});
  auto fw = b.randn("fc.weight", {1000, 512}, std::sqrt(1.f / 512.f));
  auto fb = b.uniform("fc.bias", {1000}, -0.05f, 0.05f);
  b.node("Gemm", {x, fw, fb}, {attr_f("alpha", 1.f), attr_f("beta", 1.f), attr_i("transB", 1)}, "output");
  b.output("output", onnx::TensorProto::FLOAT, {"1", "1000"});
  return b.take();
}

// ---------------------------------------------------------------- bert_tiny

struct BertBuilder {
  Builder& b;
  int64_t hidden = 64, heads = 2, ffn = 256;

  std::string layer_norm(const std::string& prefix, const std::string& x) {
    auto gamma = b.uniform(prefix + ".weight", {hidden}, 0.9f, 1.1f);
    auto beta = b.uniform(prefix + ".bias", {hidden}, -0.05f, 0.05f);
    auto mean = b.node("ReduceMean", {x}, {attr_ints("axes", {-1}), attr_i("keepdims", 1)});
    auto d = b.node("Sub", {x, mean});
    auto sq = b.node("Pow", {d, "const_two"});
    auto var = b.node("ReduceMean", {sq}, {attr_ints("axes", {-1}), attr_i("keepdims", 1)});
    auto ve = b.node("Add", {var, "const_ln_eps"});
    auto sd = b.node("Sqrt", {ve});
    auto n = b.node("Div", {d, sd});
    auto m = b.node("Mul", {n, gamma});
    return b.node("Add", {m, beta});
  }
  std::string dense(const std::string& prefix, const std::string& x, int64_t in, int64_t out) {
    auto w = b.randn(prefix + ".weight", {in, out}, std::sqrt(1.f / static_cast<float>(in)));
    auto bias = b.uniform(prefix + ".bias", {out}, -0.05f, 0.05f);
    auto y = b.node("MatMul", {x, w});
    return b.node("Add", {y, bias});
  }
  std::string gelu(const std::string& x) {
    auto d = b.node("Div", {x, "const_sqrt2"});
    auto e = b.node("Erf", {d});
    auto a = b.node("Add", {e, "const_one"});
    auto m = b.node("Mul", {x, a});
    return b.node("Mul", {m, "const_half"});
  }
  // [b,s,hidden] -> [b,heads,s,head_dim] (perm 0,2,1,3) or [b,heads,head_dim,s] (0,2,3,1).
  std::string split_heads(const std::string& x, const std::vector<int64_t>& perm) {
    auto r = b.node("Reshape", {x, "const_heads_shape"});
    return b.node("Transpose", {r}, {attr_ints("perm", perm)});
  }
  std::string layer(const std::string& prefix, const std::string& x, const std::string& mask_bias) {
    auto q = split_heads(dense(prefix + ".attention.self.query", x, hidden, hidden), {0, 2, 1, 3});
    auto k = split_heads(dense(prefix + ".attention.self.key", x, hidden, hidden), {0, 2, 3, 1});
    auto v = split_heads(dense(prefix + ".attention.self.value", x, hidden, hidden), {0, 2, 1, 3});
    auto scores = b.node("MatMul", {q, k});
    scores = b.node("Div", {scores, "const_attn_scale"});
    scores = b.node("Add", {scores, mask_bias});
    auto probs = b.node("Softmax", {scores}, {attr_i("axis", -1)});
    auto ctx = b.node("MatMul", {probs, v});
    ctx = b.node("Transpose", {ctx}, {attr_ints("perm", {0, 2, 1, 3})});
    ctx = b.node("Reshape", {ctx, "const_merge_shape"});
    auto attn = dense(prefix + ".attention.output.dense", ctx, hidden, hidden);
    auto h = layer_norm(prefix + ".attention.output.LayerNorm", b.node("Add", {attn, x}));
    auto inter = gelu(dense(prefix + ".intermediate.dense", h, hidden, ffn));
    auto out = dense(prefix + ".output.dense", inter, ffn, hidden);
    return layer_norm(prefix + ".output.LayerNorm", b.node("Add", {out, h}));
  }
};

onnx::ModelProto build_bert_tiny(uint32_t seed) {
  Builder b("bert_tiny", seed);
  BertBuilder t{b};
  const int64_t vocab = 1000, max_pos = 128, head_dim = t.hidden / t.heads;
  b.input("input_ids", onnx::TensorProto::INT64, {"batch", "seq"});
  b.input("attention_mask", onnx::TensorProto::INT64, {"batch", "seq"});
  b.const_f32("const_two", {}, {2.f});
  b.const_f32("const_ln_eps", {}, {1e-12f});
  b.const_f32("const_sqrt2", {}, {1.41421356f});
  b.const_f32("const_one", {}, {1.f});
  b.const_f32("const_half", {}, {0.5f});
  b.const_f32("const_attn_scale", {}, {std::sqrt(static_cast<float>(head_dim))});
  b.const_f32("const_mask_value", {}, {-10000.f});
  b.const_i64("const_heads_shape", {4}, {0, 0, t.heads, head_dim});
  b.const_i64("const_merge_shape", {3}, {0, 0, t.hidden});
  b.const_i64("const_i0", {}, {0});
  b.const_i64("const_i1", {}, {1});
  b.const_i64("const_axes_0", {1}, {0});
  b.const_i64("const_axes_12", {2}, {1, 2});

  // Embeddings: word + position (Range over the runtime sequence length) + token type 0.
  auto word = b.randn("embeddings.word_embeddings.weight", {vocab, t.hidden}, 1.f);
  auto pos = b.randn("embeddings.position_embeddings.weight", {max_pos, t.hidden}, 0.5f);
  auto type = b.randn("embeddings.token_type_embeddings.weight", {1, t.hidden}, 0.5f);
  auto we = b.node("Gather", {word, "input_ids"}, {attr_i("axis", 0)});
  auto shape = b.node("Shape", {"input_ids"});
  auto seq = b.node("Gather", {shape, "const_i1"}, {attr_i("axis", 0)});
  auto ids = b.node("Range", {"const_i0", seq, "const_i1"});
  ids = b.node("Unsqueeze", {ids, "const_axes_0"});
  auto pe = b.node("Gather", {pos, ids}, {attr_i("axis", 0)});
  auto x = b.node("Add", {we, pe});
  x = b.node("Add", {x, type});
  x = t.layer_norm("embeddings.LayerNorm", x);

  // Extended attention mask: (1 - mask) * -10000, shape [batch,1,1,seq].
  auto m = b.node("Cast", {"attention_mask"}, {attr_i("to", onnx::TensorProto::FLOAT)});
  m = b.node("Unsqueeze", {m, "const_axes_12"});
  m = b.node("Sub", {"const_one", m});
  auto mask_bias = b.node("Mul", {m, "const_mask_value"});

  for (int l = 0; l < 2; ++l) x = t.layer(cat("encoder.layer.", l), x, mask_bias);
  x = b.node("Identity", {x}, {}, "last_hidden_state");

  // Pooler: tanh(dense(first token)).
  auto first = b.node("Gather", {x, "const_i0"}, {attr_i("axis", 1)});
  auto pooled = t.dense("pooler.dense", first, t.hidden, t.hidden);
  b.node("Tanh", {pooled}, {}, "pooler_output");

  b.output("last_hidden_state", onnx::TensorProto::FLOAT, {"batch", "seq", std::to_string(t.hidden)});
  b.output("pooler_output", onnx::TensorProto::FLOAT, {"batch", std::to_string(t.hidden)});
  return b.take();
}

}  // namespace

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> entries = {
      {"resnet18", "torchvision ResNet-18 (BatchNormalization kept), input f32 [1,3,224,224] -> output [1,1000]"},
      {"mlp", "MatMul+Add+Relu+MatMul+Add+Softmax, input f32 [batch,16] -> output [batch,10]"},
      {"bert_tiny",
       "2-layer BERT encoder (hidden 64, 2 heads, LayerNorm decomposed, erf GELU), input_ids/attention_mask "
       "i64 [batch,seq] -> last_hidden_state [batch,seq,64], pooler_output [batch,64]"},
  };
  return entries;
}

onnx::ModelProto zoo_model(const std::string& name, uint32_t seed) {
  if (name == "resnet18") return build_resnet18(seed);
  if (name == "mlp") return build_mlp(seed);
  if (name == "bert_tiny") return build_bert_tiny(seed);
  std::vector<std::string> names;
  for (const auto& e : zoo_entries()) names.push_back(e.name);
  throw Error(cat("unknown zoo model '", name, "' (available: ", join(names, ", "), ")"));
}

std::string zoo_model_bytes(const std::string& name, uint32_t seed) {
  std::string out;
  KILN_CHECK(zoo_model(name, seed).SerializeToString(&out), cat("zoo: cannot serialize model '", name, "'"));
  return out;
}

void write_zoo_model(const std::string& name, const std::string& path, uint32_t seed) {
  std::string bytes = zoo_model_bytes(name, seed);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(f, cat("cannot write '", path, "'"));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  KILN_CHECK(f, cat("error writing '", path, "'"));
}

}  // namespace kiln::tools
