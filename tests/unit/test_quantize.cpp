// kiln quantize --dynamic (tools/common/quantize.cpp): the rewrite of the zoo's models
// (MatMul in the MLP and BERT, Conv in ResNet-18), per tensor and per channel, exclusions and
// the reasons nodes stay float; the quantized model is a valid model that kiln runs on its
// integer nodes, and it computes what the float model computes to int8 precision.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

#include <cmath>
#include <map>
#include <random>

#include "cpu/nodes/int8_util.hpp"
#include "error_util.hpp"
#include "onnx_builder.hpp"
#include "tensor_test_util.hpp"
#include "tools/common/quantize.hpp"
#include "tools/common/quantize_static.hpp"
#include "tools/common/zoo.hpp"

namespace test_quantize {

using namespace kiln;
using namespace kiln::test;

namespace {

std::map<std::string, int> op_counts(const onnx::ModelProto& m) {
  std::map<std::string, int> c;
  for (const auto& n : m.graph().node()) c[n.op_type()]++;
  return c;
}

// Cosine similarity of the float and the quantized model's outputs on a random input.
double cosine_on_random(const onnx::ModelProto& f, const onnx::ModelProto& q, const Shape& input, uint32_t seed) {
  Core core;
  std::vector<std::vector<double>> outs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Tensor x(DType::f32, input);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = d(rng);
  for (const onnx::ModelProto* m : {&f, &q}) {
    CompiledModel c = core.compile_model(core.read_model_from_memory(m->SerializeAsString()),
                                         {{"inference_precision", "f32"}});
    InferRequest r = c.create_infer_request();
    r.set_input_tensor(0, x);
    r.infer();
    outs.push_back(r.get_output_tensor(0).to_f64());
  }
  double dot = 0, a = 0, b = 0;
  for (size_t i = 0; i < outs[0].size(); ++i) {
    dot += outs[0][i] * outs[1][i];
    a += outs[0][i] * outs[0][i];
    b += outs[1][i] * outs[1][i];
  }
  return dot / std::sqrt(a * b);
}

}  // namespace

TEST(Quantize, MlpMatMulsBecomeMatMulIntegerAndStayClose) {
  const onnx::ModelProto f = tools::zoo_model("mlp");
  onnx::ModelProto q = f;
  const tools::QuantizeReport r = tools::quantize_dynamic(q, ".", {});
  EXPECT_EQ(r.quantized.size(), 2u);
  EXPECT_TRUE(r.skipped.empty());
  auto ops = op_counts(q);
  EXPECT_EQ(ops["MatMul"], 0);
  EXPECT_EQ(ops["MatMulInteger"], 2);
  EXPECT_EQ(ops["DynamicQuantizeLinear"], 2);
  for (const auto& t : q.graph().initializer())  // the float weights are gone, the int8 ones are there
    EXPECT_TRUE(t.data_type() != onnx::TensorProto::FLOAT || t.dims_size() <= 1) << t.name();
  EXPECT_GT(cosine_on_random(f, q, {4, 16}, 1), 0.999);
}

TEST(Quantize, ResNetConvolutionsPerChannelWithAnExclusion) {
  const onnx::ModelProto f = tools::zoo_model("resnet18");
  std::string first_conv;
  for (const auto& n : f.graph().node())
    if (n.op_type() == "Conv" && first_conv.empty()) first_conv = n.name();
  onnx::ModelProto q = f;
  tools::QuantizeOptions o;
  o.per_channel = true;
  o.exclude = {first_conv};
  const tools::QuantizeReport r = tools::quantize_dynamic(q, ".", o);
  auto ops = op_counts(q);
  EXPECT_EQ(ops["Conv"], 1) << "the excluded one";
  EXPECT_EQ(ops["ConvInteger"], static_cast<int>(r.quantized.size()));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("excluded"), std::string::npos) << r.skipped[0];
  // one scale per output channel ([M, 1, 1]), the zero point one scalar 0 (what ORT reads)
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : q.graph().initializer()) inits[t.name()] = &t;
  size_t per_channel_scales = 0;
  for (const auto& n : q.graph().node()) {
    if (n.op_type() == "ConvInteger") {
      ASSERT_TRUE(inits.count(n.input(3)));
      EXPECT_EQ(inits[n.input(3)]->dims_size(), 0) << n.name();
    }
    if (n.op_type() == "Mul" && inits.count(n.input(1)) && inits[n.input(1)]->dims_size() == 3) ++per_channel_scales;
  }
  EXPECT_EQ(per_channel_scales, r.quantized.size());
  EXPECT_GT(cosine_on_random(f, q, {1, 3, 224, 224}, 2), 0.99);
}

TEST(Quantize, AttentionMatMulsOfTwoActivationsStayFloat) {
  onnx::ModelProto q = tools::zoo_model("bert_tiny");
  const tools::QuantizeReport r = tools::quantize_dynamic(q, ".", {});
  EXPECT_FALSE(r.quantized.empty());
  ASSERT_FALSE(r.skipped.empty());
  for (const auto& s : r.skipped) EXPECT_NE(s.find("is not a constant initializer"), std::string::npos) << s;
  Core core;  // loads and compiles
  EXPECT_NO_THROW(core.compile_model(core.read_model_from_memory(q.SerializeAsString()), {{"inference_precision", "f32"}}));
}

TEST(Quantize, OldOpsetIsRefusedWithTheReason) {
  onnx::ModelProto q = tools::zoo_model("mlp");
  for (auto& o : *q.mutable_opset_import())
    if (o.domain().empty()) o.set_version(10);
  const std::string msg = error_of([&] { tools::quantize_dynamic(q, ".", {}); });
  EXPECT_NE(msg.find("opset 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DynamicQuantizeLinear"), std::string::npos) << msg;
}

// --- static quantization (tools/common/quantize_static.cpp) ---

namespace {

std::vector<std::vector<Tensor>> random_samples(const Shape& s, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<Tensor>> out;
  for (int k = 0; k < count; ++k) {
    Tensor x(DType::f32, s);
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = d(rng);
    out.push_back({x});
  }
  return out;
}

// fold, calibrate, rewrite: what `kiln quantize` does without --dynamic.
onnx::ModelProto quantize_static_zoo(const std::string& name, const Shape& input, const std::string& method,
                                     tools::QuantizeReport* report = nullptr) {
  onnx::ModelProto m = tools::zoo_model(name);
  tools::fold_batch_norms(m, ".");
  tools::StaticQuantizeOptions o;
  o.per_channel = true;
  const auto tensors = tools::tensors_to_calibrate(m, o);
  tools::RangeCalibrator cal(method);
  Core core;
  const auto ranges = tools::calibrate(core, m, ".", tensors, random_samples(input, 2, 5), cal);
  EXPECT_EQ(ranges.size(), tensors.size());
  tools::QuantizeReport r = tools::quantize_static(m, ".", o, ranges);
  if (report) *report = r;
  return m;
}

}  // namespace

// --reduce-range: 7-bit weights, [-64, 64] per channel, the scale max|w| / 64 (no two of one sign
// overflow vpmaddubsw's 16-bit pair sums with u8 activations: 255 x 128 < 2^15)
TEST(QuantizeStatic, ReduceRangeWritesSevenBitWeights) {
  Tensor w(DType::f32, Shape{2, 3});
  const float v[] = {0.5f, -1.0f, 0.25f, 3.0f, -1.5f, 0.0f};
  for (int i = 0; i < 6; ++i) w.data<float>()[i] = v[i];
  for (bool reduce : {false, true}) {
    const auto [q, scale] = tools::quantize_weight_symmetric(w, 0, /*per_channel=*/true, reduce);
    const float qmax = reduce ? 64.0f : 127.0f;
    ASSERT_EQ(scale.size(), 2u);
    EXPECT_FLOAT_EQ(scale[0], 1.0f / qmax);
    EXPECT_FLOAT_EQ(scale[1], 3.0f / qmax);
    EXPECT_EQ(q.data<int8_t>()[1], -static_cast<int>(qmax));  // each channel's largest at the bound
    EXPECT_EQ(q.data<int8_t>()[3], static_cast<int>(qmax));
    EXPECT_EQ(q.data<int8_t>()[4], static_cast<int>(std::nearbyint(-1.5f / scale[1])));
    for (int i = 0; i < 6; ++i) EXPECT_LE(std::abs(q.data<int8_t>()[i]), static_cast<int>(qmax));
  }
}

TEST(QuantizeStatic, ResNetBecomesQdqWithFoldedBatchNormsAndStaysClose) {
  const onnx::ModelProto f = tools::zoo_model("resnet18");
  tools::QuantizeReport r;
  const onnx::ModelProto q = quantize_static_zoo("resnet18", {1, 3, 224, 224}, "minmax", &r);
  auto ops = op_counts(q);
  EXPECT_EQ(ops["BatchNormalization"], 0) << "folded into the convolutions";
  EXPECT_EQ(ops["Conv"], op_counts(f)["Conv"]);
  ASSERT_EQ(ops["Gemm"], 1) << "the classifier";
  EXPECT_EQ(r.quantized.size(), static_cast<size_t>(ops["Conv"] + ops["Gemm"] + ops["Add"] + ops["MaxPool"]));
  // one Q -> DQ per quantized activation, one DQ per weight and per bias (the classifier's too)
  EXPECT_GT(ops["QuantizeLinear"], 0);
  EXPECT_EQ(ops["DequantizeLinear"], ops["QuantizeLinear"] + 2 * ops["Conv"] + 2);
  for (const auto& t : q.graph().initializer())  // no float weights left
    EXPECT_FALSE(t.data_type() == onnx::TensorProto::FLOAT && t.dims_size() > 1) << t.name();
  for (const auto& n : q.graph().node())
    if (n.op_type() == "Gemm") {  // its weights per output column: axis 0 of the [N, K] B it transposes
      bool per_column = false;
      for (const auto& d : q.graph().node())
        if (d.op_type() == "DequantizeLinear" && d.output(0) == n.input(1))
          for (const auto& a : d.attribute()) per_column |= a.name() == "axis" && a.i() == 0;
      EXPECT_TRUE(per_column);
    }
  EXPECT_GT(cosine_on_random(f, q, {1, 3, 224, 224}, 6), 0.98);
}

// The histogram methods (minmax: above), one test each: under the sanitizers each takes about
// 40 s, and gtest's shards take tests in turn, so two tests land in two shards.
namespace {
void expect_usable_with(const char* method) {
  const onnx::ModelProto f = tools::zoo_model("resnet18");
  const onnx::ModelProto q = quantize_static_zoo("resnet18", {1, 3, 224, 224}, method);
  EXPECT_GT(cosine_on_random(f, q, {1, 3, 224, 224}, 7), 0.95) << method;
}
}  // namespace

TEST(QuantizeStatic, PercentileCalibrationGivesAUsableModel) { expect_usable_with("percentile"); }

TEST(QuantizeStatic, EntropyCalibrationGivesAUsableModel) {
  expect_usable_with("entropy");
  EXPECT_NE(error_of([] { tools::RangeCalibrator("kl"); }).find("minmax, percentile, entropy"), std::string::npos);
}

TEST(QuantizeStatic, HistogramMethodsClipOutliersMinmaxKeeps) {
  Tensor t(DType::f32, Shape{10000});
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i % 100) / 100.0f;  // [0, 1)
  t.data<float>()[0] = 50.0f;                                                                      // one outlier
  for (const char* method : {"minmax", "percentile", "entropy"}) {
    tools::RangeCalibrator c(method, 99.9);
    c.observe_range("t", t);
    if (c.needs_histogram()) c.observe_histogram("t", t);
    const auto r = c.ranges().at("t");
    EXPECT_EQ(r.first, 0.0f) << method;
    if (std::string(method) == "minmax") {
      EXPECT_EQ(r.second, 50.0f);
    } else {  // entropy searches thresholds of at least one histogram bin per 8-bit level: 255 / 2048 of 50
      EXPECT_LT(r.second, std::string(method) == "entropy" ? 6.5f : 2.0f) << method << " keeps the outlier";
    }
  }
}

TEST(QuantizeStatic, TransformerProjectionsQuantizeAttentionStaysFloat) {
  const onnx::ModelProto f = tools::zoo_model("bert_tiny");
  onnx::ModelProto q = f;
  tools::StaticQuantizeOptions o;
  const auto tensors = tools::tensors_to_calibrate(q, o);
  // the zoo's BERT takes token ids: calibrate on its own random inputs
  Core core;
  const auto ports = core.read_model_from_memory(f.SerializeAsString())->inputs();
  std::vector<std::vector<Tensor>> samples(2);
  for (int s = 0; s < 2; ++s)
    for (const auto& p : ports) {
      Shape shape(p.shape.begin(), p.shape.end());
      for (size_t k = 0; k < shape.size(); ++k)
        if (shape[k] < 0) shape[k] = k == 0 ? 1 : 16;  // batch 1, 16 tokens
      Tensor t(p.dtype, shape);
      for (int64_t i = 0; i < t.size(); ++i) {
        if (p.dtype == DType::i64) t.data<int64_t>()[i] = (i * 7 + s) % 100;
        else if (p.dtype == DType::f32) t.data<float>()[i] = 1.0f;
      }
      samples[s].push_back(t);
    }
  tools::RangeCalibrator cal("minmax");
  const auto ranges = tools::calibrate(core, q, ".", tensors, samples, cal);
  const tools::QuantizeReport r = tools::quantize_static(q, ".", o, ranges);
  EXPECT_FALSE(r.quantized.empty());
  bool attention_float = false;
  for (const auto& s : r.skipped) attention_float |= s.find("attention's products of two activations") != std::string::npos;
  EXPECT_TRUE(attention_float);
  for (const auto& s : r.quantized) EXPECT_NE(s.find("(MatMul)"), std::string::npos) << s << ": only projections quantize";
  EXPECT_NO_THROW(core.compile_model(core.read_model_from_memory(q.SerializeAsString()), {{"inference_precision", "f32"}}));
}

namespace {

// An inception-like block: x -> Conv1x1 -> Relu (a), x -> Conv3x3 -> Relu (b); Concat(a, b) ->
// MaxPool -> Conv1x1 -> y; and a second Concat(a2, x2) whose input x2 is also read by another
// node, so it cannot take the Concat's parameters.
onnx::ModelProto inception_block() {
  OnnxBuilder b(13);
  b.input("x", {1, 8, 12, 12});
  auto conv = [&](const std::string& in, const std::string& out, int64_t ci, int64_t co, int64_t k, uint32_t seed) {
    b.initializer(out + "_w", random_tensor({co, ci, k, k}, seed, 0.3f));
    b.initializer(out + "_b", random_tensor({co}, seed + 1, 0.1f));
    auto* n = b.node("Conv", {in, out + "_w", out + "_b"}, {out + "_c"}, out + "_conv");
    OnnxBuilder::attr_ints(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    b.node("Relu", {out + "_c"}, {out}, out + "_relu");
  };
  conv("x", "a", 8, 6, 1, 1);
  conv("x", "b", 8, 10, 3, 3);
  OnnxBuilder::attr_i(b.node("Concat", {"a", "b"}, {"cat"}, "cat"), "axis", 1);
  auto* pool = b.node("MaxPool", {"cat"}, {"pool"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  conv("pool", "y", 16, 4, 1, 5);
  conv("x", "a2", 8, 4, 1, 7);
  conv("x", "x2", 8, 4, 1, 9);
  OnnxBuilder::attr_i(b.node("Concat", {"a2", "x2"}, {"cat2"}, "cat2"), "axis", 1);
  b.node("Relu", {"x2"}, {"x2_also"}, "second_reader");
  b.output("y");
  b.output("cat2");
  b.output("x2_also");
  return b.model;
}

}  // namespace

// A Concat of int8 branches: its inputs take the output's scale and zero point (one Q -> DQ pair
// each, with the output's parameters), so QdqToQLinear runs it on 8-bit data; a Concat whose
// input is read elsewhere stays float, with the reason.
TEST(QuantizeStatic, ConcatInputsTakeTheOutputsParameters) {
  onnx::ModelProto m = inception_block();
  const onnx::ModelProto f = m;
  tools::StaticQuantizeOptions o;
  const auto tensors = tools::tensors_to_calibrate(m, o);
  for (const char* shared : {"a", "b"})
    EXPECT_EQ(std::count(tensors.begin(), tensors.end(), shared), 0) << shared << " takes cat's range, not its own";
  EXPECT_EQ(std::count(tensors.begin(), tensors.end(), "cat"), 1);
  EXPECT_EQ(std::count(tensors.begin(), tensors.end(), "x2"), 1);
  tools::RangeCalibrator cal("minmax");
  Core core;
  const auto ranges = tools::calibrate(core, m, ".", tensors, random_samples({1, 8, 12, 12}, 2, 8), cal);
  const tools::QuantizeReport r = tools::quantize_static(m, ".", o, ranges);
  bool cat_quantized = false, cat2_skipped = false;
  for (const auto& s : r.quantized) cat_quantized |= s.rfind("cat (Concat)", 0) == 0;
  for (const auto& s : r.skipped) cat2_skipped |= s.rfind("cat2 (Concat)", 0) == 0 && s.find("read elsewhere") != std::string::npos;
  EXPECT_TRUE(cat_quantized);
  EXPECT_TRUE(cat2_skipped);
  // the QuantizeLinear of a, of b and of cat use one scale and one zero point
  std::map<std::string, std::pair<std::string, std::string>> q_params;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "QuantizeLinear") q_params[n.input(0)] = {n.input(1), n.input(2)};
  ASSERT_TRUE(q_params.count("a") && q_params.count("b") && q_params.count("cat"));
  EXPECT_EQ(q_params["a"], q_params["cat"]);
  EXPECT_EQ(q_params["b"], q_params["cat"]);
  // kiln runs the quantized Concat on 8-bit data where int8 is exact, and stays close to the float model
  CompiledModel c = core.compile_model(core.read_model_from_memory(m.SerializeAsString()), {{"inference_precision", "f32"}});
  size_t u8_concats = 0;
  for (const auto& n : c.get_runtime_model().nodes)
    if (n.type == "Concat" && n.outputs.at(0).precision == DType::u8) ++u8_concats;
  EXPECT_EQ(u8_concats, cpu::int8_network_kernels() ? 1u : 0u);
  EXPECT_GT(cosine_on_random(f, m, {1, 8, 12, 12}, 9), 0.99);
}

}  // namespace test_quantize
