#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <onnx/checker.h>

#include <cmath>
#include <cstring>
#include <map>

#include "precision_util.hpp"
#include "tools/common/zoo.hpp"

namespace test_zoo {

using namespace kiln;
using namespace kiln::tools;

namespace {

std::map<std::string, std::vector<float>> float_initializers(const onnx::ModelProto& m) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : m.graph().initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT || t.raw_data().empty()) continue;
    std::vector<float> v(t.raw_data().size() / 4);
    std::memcpy(v.data(), t.raw_data().data(), v.size() * 4);
    out[t.name()] = std::move(v);
  }
  return out;
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_f64())
    if (!std::isfinite(v)) return false;
  return true;
}

std::vector<Tensor> run(const std::string& name, const std::vector<Tensor>& inputs) {
  Core core;
  auto model = core.read_model_from_memory(zoo_model_bytes(name, 0));
  auto compiled = core.compile_model(model, test::f32_properties());  // hand-computed f32 references
  auto req = compiled.create_infer_request();
  for (size_t i = 0; i < inputs.size(); ++i) req.set_input_tensor(i, inputs[i]);
  req.infer();
  std::vector<Tensor> outs;
  for (size_t i = 0; i < compiled.outputs().size(); ++i) outs.push_back(req.get_output_tensor(i));
  return outs;
}

}  // namespace

TEST(Zoo, ModelsPassTheOnnxChecker) {
  for (const auto& e : zoo_entries()) {
    SCOPED_TRACE(e.name);
    onnx::ModelProto m = zoo_model(e.name, 0);
    EXPECT_NO_THROW(onnx::checker::check_model(m));
    EXPECT_EQ(m.opset_import(0).version(), 13);
  }
  EXPECT_THROW(zoo_model("no_such_model"), Error);
}

TEST(Zoo, Deterministic) {
  EXPECT_EQ(zoo_model_bytes("mlp", 3), zoo_model_bytes("mlp", 3));
  EXPECT_NE(zoo_model_bytes("mlp", 3), zoo_model_bytes("mlp", 4));
}

TEST(Zoo, ResNet18Topology) {
  onnx::ModelProto m = zoo_model("resnet18", 0);
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ++ops[n.op_type()];
  EXPECT_EQ(ops["Conv"], 20);  // 1 stem + 16 in blocks + 3 downsample
  EXPECT_EQ(ops["BatchNormalization"], 20);
  EXPECT_EQ(ops["Add"], 8);
  EXPECT_EQ(ops["MaxPool"], 1);
  EXPECT_EQ(ops["Gemm"], 1);
  // torchvision's ResNet-18 has 11,689,512 parameters (+ 9,600 BN running statistics).
  int64_t params = 0;
  for (const auto& t : m.graph().initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    params += n;
  }
  EXPECT_EQ(params, 11689512 + 9600);
}

TEST(Zoo, MlpRunsAndMatchesHandComputation) {
  const int64_t batch = 3;
  std::vector<float> x(batch * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  auto outs = run("mlp", {Tensor::from_vector(x, {batch, 16})});
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0].shape(), (Shape{batch, 10}));
  const float* y = outs[0].data<float>();

  auto w = float_initializers(zoo_model("mlp", 0));
  const auto &w1 = w["fc1.weight"], &b1 = w["fc1.bias"], &w2 = w["fc2.weight"], &b2 = w["fc2.bias"];
  for (int64_t r = 0; r < batch; ++r) {
    float h[32], z[10], mx = -1e30f, sum = 0, ysum = 0;
    for (int j = 0; j < 32; ++j) {
      float a = b1[j];
      for (int k = 0; k < 16; ++k) a += x[r * 16 + k] * w1[k * 32 + j];
      h[j] = a > 0 ? a : 0;
    }
    for (int j = 0; j < 10; ++j) {
      float a = b2[j];
      for (int k = 0; k < 32; ++k) a += h[k] * w2[k * 10 + j];
      z[j] = a;
      mx = std::max(mx, a);
    }
    for (int j = 0; j < 10; ++j) sum += std::exp(z[j] - mx);
    for (int j = 0; j < 10; ++j) {
      EXPECT_NEAR(y[r * 10 + j], std::exp(z[j] - mx) / sum, 1e-5f) << "row " << r << " col " << j;
      ysum += y[r * 10 + j];
    }
    EXPECT_NEAR(ysum, 1.f, 1e-5f);
  }
}

TEST(Zoo, ResNet18Runs) {
  std::vector<float> x(3 * 224 * 224);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.001f * static_cast<float>(i));
  auto outs = run("resnet18", {Tensor::from_vector(x, {1, 3, 224, 224})});
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0].shape(), (Shape{1, 1000}));
  ASSERT_TRUE(all_finite(outs[0]));
  double mn = 1e30, mx = -1e30;
  for (double v : outs[0].to_f64()) mn = std::min(mn, v), mx = std::max(mx, v);
  EXPECT_GT(mx - mn, 1e-3);  // not degenerate
  EXPECT_LT(mx - mn, 1e4);   // activations stay bounded
}

TEST(Zoo, BertTinyRunsAndMaskingWorks) {
  // Batch 1, 6 tokens with the last two masked out, vs. the first 4 tokens alone: the
  // unmasked positions must agree (masked keys get -10000 before the softmax).
  std::vector<int64_t> ids = {5, 17, 42, 99, 3, 64};
  auto full = run("bert_tiny", {Tensor::from_vector(ids, {1, 6}),
                                Tensor::from_vector<int64_t>({1, 1, 1, 1, 0, 0}, {1, 6})});
  auto part = run("bert_tiny", {Tensor::from_vector<int64_t>({5, 17, 42, 99}, {1, 4}),
                                Tensor::from_vector<int64_t>({1, 1, 1, 1}, {1, 4})});
  ASSERT_EQ(full.size(), 2u);
  ASSERT_EQ(full[0].shape(), (Shape{1, 6, 64}));
  ASSERT_EQ(full[1].shape(), (Shape{1, 64}));
  ASSERT_EQ(part[0].shape(), (Shape{1, 4, 64}));
  ASSERT_TRUE(all_finite(full[0]));
  const float* a = full[0].data<float>();
  const float* b = part[0].data<float>();
  for (int i = 0; i < 4 * 64; ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << "element " << i;
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(full[1].data<float>()[i], part[1].data<float>()[i], 1e-4f);
  // LayerNorm output: each token's 64 features have mean ~ mean(beta) (|.| < 0.05) and
  // variance ~ mean(gamma^2) (gamma in [0.9, 1.1]).
  for (int t = 0; t < 6; ++t) {
    double m = 0, v = 0;
    for (int j = 0; j < 64; ++j) m += a[t * 64 + j];
    m /= 64;
    for (int j = 0; j < 64; ++j) v += (a[t * 64 + j] - m) * (a[t * 64 + j] - m);
    v /= 64;
    EXPECT_LT(std::abs(m), 0.05);
    EXPECT_GT(v, 0.7);
    EXPECT_LT(v, 1.3);
  }
  // Batch 2 with symbolic dims.
  auto two = run("bert_tiny", {Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}),
                               Tensor::from_vector<int64_t>({1, 1, 1, 1, 1, 1}, {2, 3})});
  EXPECT_EQ(two[0].shape(), (Shape{2, 3, 64}));
  EXPECT_EQ(two[1].shape(), (Shape{2, 64}));
}

}  // namespace test_zoo
