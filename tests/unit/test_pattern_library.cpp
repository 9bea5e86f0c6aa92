// The shipped pattern library and apply_transformer_fusions: LayerNorm variants -> ONNX
// LayerNormalization, exact GELU orderings -> com.microsoft Gelu, tanh GELU orderings ->
// com.microsoft FastGelu; wrong constants / axes never fire; and a real BERT of BERT-base's
// structure (tests/models/make_test_models.py) loses every ReduceMean and Erf and computes the same.
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <random>
#include <set>

#include "pattern/pattern_library.hpp"
#include "pattern/pattern_mapping.hpp"
#include "test_models_util.hpp"
#include "test_pattern_util.hpp"

namespace test_pattern_library {

using namespace kiln;
using namespace kiln::pattern;
using kiln::test::count_ops;
using kiln::test::decomposed_layer_norm;
using kiln::test::expect_close;
using kiln::test::GraphBuilder;

namespace {

constexpr float kSqrt2 = 1.4142135381698608f;  // as exported by PyTorch

// Runs the pass on b's graph and checks the outputs against the graph before it.
FusionStats fuse_and_compare(GraphBuilder& b, double rtol = 1e-4, double atol = 1e-5) {
  auto before = b.run_on(b.g->clone());
  FusionStats s = apply_transformer_fusions(*b.g);
  expect_close(before, b.run(), rtol, atol);
  return s;
}

ir::Node* only_node(const ir::Graph& g, const std::string& op) {
  for (ir::Node* n : g.nodes())
    if (n->op_type() == op) return n;
  return nullptr;
}

}  // namespace

TEST(PatternLibrary, ShippedPatternsParse) {
  const auto& all = library_patterns();
  std::set<std::string> names;
  for (const PatternConfig& c : all) EXPECT_TRUE(names.insert(c.name).second) << "duplicate name " << c.name;
  for (const char* n : {"layer_norm", "layer_norm_scale_only", "layer_norm_no_affine", "gelu_erf_x_then_half",
                        "gelu_erf_half_then_x", "gelu_erf_half_x", "fast_gelu_half_x", "fast_gelu_x_then_half",
                        "fast_gelu_half_then_x"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(library_pattern("layer_norm").out_nodes.at(0).op_type, "LayerNormalization");
  EXPECT_THROW(library_pattern("no_such_pattern"), Error);
}

// The C++ checks ask for nodes by label (library/<family>.cpp): every node of every shipped
// config has one, so a check never needs a node number.
TEST(PatternLibrary, EveryShippedNodeIsLabelled) {
  for (const PatternConfig& c : library_patterns())
    for (const PatternNode& n : c.in_nodes) EXPECT_FALSE(n.label.empty()) << c.name << " node " << n.index;
  EXPECT_EQ(library_pattern("attention").find_label("add_mask"), 4);
  EXPECT_EQ(library_pattern("attention_no_mask").find_label("add_mask"), -1);
}

// ---------------- LayerNorm ----------------

TEST(PatternLibrary, LayerNormWithScaleAndBias) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 4, 16});
  ir::Value* y = decomposed_layer_norm(b, x, "ln0", 16, 1e-5f);
  y = decomposed_layer_norm(b, b.op("Relu", {y}, "relu"), "ln1", 16, 0.125f);  // two in a row, other eps
  b.output(y);
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.layer_norm, 2u);
  EXPECT_EQ(s.by_pattern.at("layer_norm"), 2u);
  EXPECT_EQ(b.g->num_nodes(), 3u);
  ir::Node* ln1 = b.g->find_node("ln1/Add_1");
  ASSERT_NE(ln1, nullptr);
  EXPECT_EQ(ln1->op_type(), "LayerNormalization");
  EXPECT_EQ(ln1->attr_i("axis"), -1);
  EXPECT_FLOAT_EQ(ln1->attr_f("epsilon"), 0.125f);
  EXPECT_EQ(ln1->num_inputs(), 3u);
}

TEST(PatternLibrary, LayerNormScaleOnly) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {3, 8});
  b.output(decomposed_layer_norm(b, x, "ln", 8, 1e-3f, true, false));
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.by_pattern.at("layer_norm_scale_only"), 1u);
  ir::Node* ln = only_node(*b.g, "LayerNormalization");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->num_inputs(), 2u);
  EXPECT_EQ(b.g->num_nodes(), 1u);
}

TEST(PatternLibrary, LayerNormWithoutAffine) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {3, 10});
  b.output(b.op("Relu", {decomposed_layer_norm(b, x, "ln", 10, 1e-5f, false, false)}, "after"));
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.by_pattern.at("layer_norm_no_affine"), 1u);
  ir::Node* ln = only_node(*b.g, "LayerNormalization");
  ASSERT_NE(ln, nullptr);
  ASSERT_EQ(ln->num_inputs(), 2u);  // scale of ones added by the fix-up
  ASSERT_TRUE(ln->input(1)->is_constant());
  EXPECT_EQ(ln->input(1)->constant().shape(), (Shape{10}));
  EXPECT_EQ(ln->input(1)->constant().to_f64()[3], 1.0);
}

TEST(PatternLibrary, LayerNormRank3GammaIsFlattened) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 3, 6});
  ir::Value* mean = b.op("ReduceMean", {x}, "m", {{"axes", std::vector<int64_t>{2}}});  // positive last axis
  ir::Value* d = b.op("Sub", {x, mean}, "s");
  ir::Value* var = b.op("ReduceMean", {b.op("Pow", {d, b.scalar(2)}, "p")}, "v", {{"axes", std::vector<int64_t>{-1}}});
  ir::Value* y = b.op("Div", {d, b.op("Sqrt", {b.op("Add", {b.scalar(1e-5f), var}, "a")}, "q")}, "dv");  // eps first
  y = b.op("Mul", {b.vec({1, 1, 6}), y}, "g");  // gamma first, rank 3
  y = b.op("Add", {y, b.vec({6})}, "bias");
  b.output(y);
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.layer_norm, 1u);
  ir::Node* ln = only_node(*b.g, "LayerNormalization");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->input(1)->type.shape.rank(), 1u);
}

TEST(PatternLibrary, LayerNormInOpset13ModelGetsOpset17Node) {
  GraphBuilder b(13);
  ir::Value* x = b.input("x", {2, 5});
  b.output(decomposed_layer_norm(b, x, "ln", 5, 1e-5f));
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.layer_norm, 1u);
  EXPECT_EQ(only_node(*b.g, "LayerNormalization")->opset(), 17);
}

TEST(PatternLibrary, LayerNormNotFusedOverAnotherAxis) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {4, 6});
  b.output(decomposed_layer_norm(b, x, "ln", 6, 1e-5f, false, false, 2.f, {0}));
  EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
  EXPECT_EQ(count_ops(*b.g, "ReduceMean"), 2u);
}

TEST(PatternLibrary, LayerNormNotFusedWithOtherExponent) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {4, 6});
  b.output(decomposed_layer_norm(b, x, "ln", 6, 1e-5f, true, true, 3.f));
  EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
  EXPECT_EQ(count_ops(*b.g, "LayerNormalization"), 0u);
}

TEST(PatternLibrary, LayerNormNotFusedWhenMeanIsOfAnotherTensor) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {4, 6});
  ir::Value* other = b.input("other", {4, 6});
  ir::Value* mean = b.op("ReduceMean", {other}, "m", {{"axes", std::vector<int64_t>{-1}}});
  ir::Value* d = b.op("Sub", {x, mean}, "s");
  ir::Value* var = b.op("ReduceMean", {b.op("Pow", {d, b.scalar(2)}, "p")}, "v", {{"axes", std::vector<int64_t>{-1}}});
  b.output(b.op("Div", {d, b.op("Sqrt", {b.op("Add", {var, b.scalar(1e-5f)}, "a")}, "q")}, "dv"));
  EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
}

// ---------------- GELU ----------------

namespace {

// x / sqrt(2) in one of the exported forms.
ir::Value* erf_arg(GraphBuilder& b, ir::Value* x, int form, float c = kSqrt2) {
  if (form == 0) return b.op("Div", {x, b.scalar(c)});
  if (form == 1) return b.op("Mul", {x, b.scalar(1.0f / c)});
  return b.op("Mul", {b.scalar(1.0f / c), x});
}

// The three orderings of x * 0.5 * (1 + erf(x / sqrt 2)).
ir::Value* gelu_erf(GraphBuilder& b, ir::Value* x, int order, int form, float half = 0.5f, float one = 1.f,
                    float c = kSqrt2) {
  ir::Value* p = b.op("Add", {b.op("Erf", {erf_arg(b, x, form, c)}), b.scalar(one)});
  switch (order) {
    case 0: return b.op("Mul", {b.op("Mul", {x, p}), b.scalar(half)});     // (x * p) * 0.5  (BERT)
    case 1: return b.op("Mul", {b.op("Mul", {p, b.scalar(half)}), x});     // (p * 0.5) * x
    default: return b.op("Mul", {b.op("Mul", {b.scalar(half), x}), p});    // (0.5 * x) * p
  }
}

// The three orderings of 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
ir::Value* gelu_tanh(GraphBuilder& b, ir::Value* x, int order, float k = 0.044715f, float half = 0.5f) {
  ir::Value* inner = b.op("Add", {x, b.op("Mul", {b.op("Pow", {x, b.scalar(3)}), b.scalar(k)})});
  ir::Value* t = b.op("Tanh", {b.op("Mul", {inner, b.scalar(0.7978845608028654f)})});
  ir::Value* p = b.op("Add", {t, b.scalar(1)});
  switch (order) {
    case 0: return b.op("Mul", {b.op("Mul", {x, b.scalar(half)}), p});     // (x * 0.5) * p  (GPT-2)
    case 1: return b.op("Mul", {b.op("Mul", {x, p}), b.scalar(half)});     // (x * p) * 0.5
    default: return b.op("Mul", {b.op("Mul", {p, b.scalar(half)}), x});    // (p * 0.5) * x
  }
}

}  // namespace

TEST(PatternLibrary, GeluErfEveryOrderingAndForm) {
  for (int order = 0; order < 3; ++order) {
    for (int form = 0; form < 3; ++form) {
      SCOPED_TRACE(cat("order ", order, " form ", form));
      GraphBuilder b;
      ir::Value* x = b.input("x", {3, 20});
      b.output(b.op("Neg", {gelu_erf(b, b.op("Relu", {x}), order, form)}));
      FusionStats s = fuse_and_compare(b);
      EXPECT_EQ(s.gelu, 1u);
      EXPECT_EQ(b.g->num_nodes(), 3u);
      ir::Node* g = only_node(*b.g, "Gelu");
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(g->domain(), "com.microsoft");
      EXPECT_EQ(count_ops(*b.g, "Erf"), 0u);
    }
  }
}

TEST(PatternLibrary, GeluErfWithOtherConstantsDoesNotFire) {
  struct Case {
    const char* what;
    float half, one, c;
    int form;
  };
  for (const Case& k : {Case{"0.6 instead of 0.5", 0.6f, 1.f, kSqrt2, 0}, Case{"2 instead of 1", 0.5f, 2.f, kSqrt2, 0},
                        Case{"x / 1.5", 0.5f, 1.f, 1.5f, 0}, Case{"x * (1/1.5)", 0.5f, 1.f, 1.5f, 1}}) {
    for (int order = 0; order < 3; ++order) {
      SCOPED_TRACE(cat(k.what, ", order ", order));
      GraphBuilder b;
      ir::Value* x = b.input("x", {8});
      b.output(gelu_erf(b, x, order, k.form, k.half, k.one, k.c));
      EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
      EXPECT_EQ(count_ops(*b.g, "Erf"), 1u);
    }
  }
  // sqrt(2) / x instead of x / sqrt(2)
  GraphBuilder b;
  ir::Value* x = b.input("x", {8});
  ir::Value* p = b.op("Add", {b.op("Erf", {b.op("Div", {b.scalar(kSqrt2), x})}), b.scalar(1)});
  b.output(b.op("Mul", {b.op("Mul", {x, p}), b.scalar(0.5f)}));
  EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
}

TEST(PatternLibrary, GeluErfWithVectorConstantDoesNotFire) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {4});
  ir::Value* p = b.op("Add", {b.op("Erf", {b.op("Div", {x, b.scalar(kSqrt2)})}), b.constant(Tensor::from_vector<float>({1, 1, 1, 1}, {4}))});
  b.output(b.op("Mul", {b.op("Mul", {x, p}), b.scalar(0.5f)}));
  EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u);
}

TEST(PatternLibrary, FastGeluEveryOrdering) {
  for (int order = 0; order < 3; ++order) {
    SCOPED_TRACE(cat("order ", order));
    GraphBuilder b;
    ir::Value* x = b.input("x", {2, 3, 16});
    b.output(gelu_tanh(b, x, order));
    FusionStats s = fuse_and_compare(b);
    EXPECT_EQ(s.fast_gelu, 1u);
    ASSERT_EQ(b.g->num_nodes(), 1u);
    ir::Node* g = only_node(*b.g, "FastGelu");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->domain(), "com.microsoft");
    EXPECT_EQ(g->num_inputs(), 1u);
  }
}

TEST(PatternLibrary, FastGeluWithOtherConstantsDoesNotFire) {
  for (int order = 0; order < 3; ++order) {
    GraphBuilder b;
    ir::Value* x = b.input("x", {16});
    b.output(gelu_tanh(b, x, order, 0.05f));
    b.output(gelu_tanh(b, b.input("y", {16}), order, 0.044715f, 0.25f));
    EXPECT_EQ(apply_transformer_fusions(*b.g).total(), 0u) << "order " << order;
  }
}

TEST(PatternLibrary, FusionsInsideALargerGraph) {
  // LayerNorm -> MatMul -> GELU -> MatMul -> residual Add -> LayerNorm, with a symbolic batch.
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 5, 12});
  ir::Value* h = decomposed_layer_norm(b, x, "ln_a", 12, 1e-12f);
  ir::Value* u = b.op("MatMul", {h, b.constant(b.random({12, 24}))});
  u = gelu_erf(b, u, 0, 0);
  u = b.op("MatMul", {u, b.constant(b.random({24, 12}))});
  b.output(decomposed_layer_norm(b, b.op("Add", {u, h}), "ln_b", 12, 1e-12f));
  FusionStats s = fuse_and_compare(b, 1e-4, 1e-4);
  EXPECT_EQ(s.layer_norm, 2u);
  EXPECT_EQ(s.gelu, 1u);
  EXPECT_EQ(s.skip_layer_norm, 1u);  // the residual Add joins ln_b
  EXPECT_EQ(b.g->num_nodes(), 5u);
}

TEST(PatternLibrary, SymbolicBatchAndSequence) {
  GraphBuilder b;
  ir::Value* x = b.g->add_input("x", {DType::f32, ir::PartialShape({ir::Dim::sym("batch"), ir::Dim::sym("seq"), 8})});
  b.feeds.push_back(b.random({3, 5, 8}));
  ir::Value* h = decomposed_layer_norm(b, x, "ln", 8, 1e-6f, false, false);
  b.output(gelu_tanh(b, gelu_erf(b, h, 1, 1), 2));
  FusionStats s = fuse_and_compare(b);
  EXPECT_EQ(s.layer_norm, 1u);
  EXPECT_EQ(s.gelu, 1u);
  EXPECT_EQ(s.fast_gelu, 1u);
  EXPECT_EQ(b.g->num_nodes(), 3u);
  EXPECT_EQ(b.g->outputs()[0]->type.shape.to_string(), "[batch,seq,8]");
}

// ---------------- BERT ----------------

namespace {

// Random token ids and a mask with 16 padding positions at the end.
std::vector<Tensor> bert_inputs(const ir::Graph& g) {
  std::vector<Tensor> feeds;
  std::mt19937 rng(7);
  for (const ir::Value* in : g.inputs()) {
    Tensor t(DType::i64, in->type.shape.to_shape());
    const bool mask = in->name().find("mask") != std::string::npos;
    for (int64_t i = 0; i < t.size(); ++i)
      t.data<int64_t>()[i] = mask ? (i < t.size() - 16 ? 1 : 0) : static_cast<int64_t>(rng() % 1000);
    feeds.push_back(t);
  }
  return feeds;
}

}  // namespace

TEST(PatternLibrary, BertFusesEveryLayerNormGeluAndAttention) {
  // BERT-base's structure (12 layers), small (hidden 64): tests/models/make_test_models.py
  const std::filesystem::path path = test::test_model("bert_12l");
  if (!std::filesystem::exists(path)) return;
  std::shared_ptr<ir::Graph> fused = Core().read_model(path.string())->graph();
  std::shared_ptr<ir::Graph> original = fused->clone();
  FusionStats stats = apply_transformer_fusions(*fused);
  EXPECT_EQ(stats.layer_norm, 25u);
  EXPECT_EQ(stats.gelu, 12u);
  EXPECT_EQ(stats.fast_gelu, 0u);
  EXPECT_EQ(stats.attention, 12u);
  // the 24 LayerNorms of the layers follow a residual Add; the embeddings' follows an Add of
  // a broadcast constant (the token-type row), which SkipLayerNormalization does not take
  EXPECT_EQ(stats.skip_layer_norm, 24u);
  for (const char* gone : {"ReduceMean", "Erf", "Sqrt", "Pow", "Softmax", "Transpose"})
    EXPECT_EQ(count_ops(*fused, gone), 0u) << gone;
  EXPECT_EQ(count_ops(*fused, "LayerNormalization"), 1u);
  EXPECT_EQ(count_ops(*fused, "SkipLayerNormalization"), 24u);
  EXPECT_EQ(count_ops(*fused, "Gelu"), 12u);
  EXPECT_EQ(count_ops(*fused, "MultiHeadAttention"), 12u);
  // LayerNorm: 9 nodes -> 1, then Add + LayerNorm -> 1; GELU: 5 -> 1; attention: 13 -> 1
  EXPECT_EQ(original->num_nodes() - fused->num_nodes(), 25u * 8 + 24u + 12u * 4 + 12u * 12);
  ASSERT_EQ(fused->outputs().size(), 1u);
  EXPECT_EQ(fused->outputs()[0]->name(), original->outputs()[0]->name());

  // the same outputs on the reference executor (a couple of seconds for both runs)
  std::vector<Tensor> feeds = bert_inputs(*fused);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> want = runtime::ReferenceExecutor(original).run(feeds);
  std::vector<Tensor> got = runtime::ReferenceExecutor(fused).run(feeds);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_close(want, got, 1e-3, 1e-4);
  std::cout << "[ info     ] bert_12l reference runs (unfused + fused): " << secs << " s\n";
}

TEST(PatternLibrary, BertSmallFusionCounts) {
  const std::filesystem::path path = test::test_model("bert_small");
  if (!std::filesystem::exists(path)) return;
  std::shared_ptr<ir::Graph> g = Core().read_model(path.string())->graph();
  FusionStats stats = apply_transformer_fusions(*g);
  EXPECT_EQ(stats.layer_norm, 9u);
  EXPECT_EQ(stats.gelu, 4u);
  EXPECT_EQ(count_ops(*g, "ReduceMean") + count_ops(*g, "Erf"), 0u);
}

}  // namespace test_pattern_library
