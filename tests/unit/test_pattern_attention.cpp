// The attention pattern (src/pattern/library/attention.json): a BERT-style attention block
// on a hand-built graph collapses into one kiln MultiHeadAttention whose outputs equal the
// block's; variants that are not that computation are left alone. Plus the op's shape
// checks and the cpu Attention node against the reference kernel.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_util.hpp"
#include "cpu/executor.hpp"
#include "pattern/pattern_library.hpp"
#include "transforms/hoist_qdq.hpp"
#include "test_pattern_util.hpp"

namespace test_pattern_attention {

using namespace kiln;
using namespace kiln::test;

namespace {

struct AttentionOptions {
  bool mask = true;
  bool mul_scale = false;                  // Mul by 1/sqrt(d) instead of Div by sqrt(d)
  std::vector<int64_t> k_perm = {0, 2, 3, 1};
  int64_t softmax_axis = -1;
  bool qdq = false;  // QuantizeLinear -> DequantizeLinear on every MatMul input, as quantize_static writes
};

// x -> QuantizeLinear -> DequantizeLinear (u8, per tensor)
ir::Value* qdq_pair(GraphBuilder& b, ir::Value* x, float scale, int zp, const std::string& n) {
  Tensor z(DType::u8, Shape{});
  z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  ir::Value* s = b.scalar(scale);
  ir::Value* zv = b.constant(z);
  return b.op("DequantizeLinear", {b.op("QuantizeLinear", {x, s, zv}, n + "_q"), s, zv}, n + "_dq");
}

// x [B, S, H*D] -> Q, K, V = x Wq, x Wk, x Wv -> attention -> [B, S, H*D]
ir::Value* attention_block(GraphBuilder& b, ir::Value* x, ir::Value* mask, int64_t B, int64_t S, int64_t H, int64_t D,
                           const AttentionOptions& o) {
  const int64_t C = H * D;
  auto proj = [&](const char* n) { return b.op("MatMul", {x, b.constant(b.random({C, C}, -0.3f, 0.3f))}, n); };
  auto split = [&](ir::Value* v, const std::string& n) {
    return b.op("Reshape", {v, b.constant(Tensor::from_vector<int64_t>({B, S, H, D}, {4}))}, n);
  };
  using A = ir::Attribute;
  ir::Value* q = b.op("Transpose", {split(proj("q"), "rq")}, "tq", {{"perm", A(std::vector<int64_t>{0, 2, 1, 3})}});
  ir::Value* k = b.op("Transpose", {split(proj("k"), "rk")}, "tk", {{"perm", A(o.k_perm)}});
  ir::Value* v = b.op("Transpose", {split(proj("v"), "rv")}, "tv", {{"perm", A(std::vector<int64_t>{0, 2, 1, 3})}});
  if (o.qdq) {
    q = qdq_pair(b, q, 0.03f, 128, "q");
    k = qdq_pair(b, k, 0.025f, 120, "k");
    v = qdq_pair(b, v, 0.02f, 131, "v");
  }
  ir::Value* s = b.op("MatMul", {q, k}, "qk");
  s = o.mul_scale ? b.op("Mul", {s, b.scalar(1.0f / std::sqrt(static_cast<float>(D)))}, "scale")
                  : b.op("Div", {s, b.scalar(std::sqrt(static_cast<float>(D)))}, "scale");
  if (mask) s = b.op("Add", {s, mask}, "mask_add");
  s = b.op("Softmax", {s}, "softmax", {{"axis", A(o.softmax_axis)}});
  if (o.qdq) s = qdq_pair(b, s, 0.05f, 0, "p");  // a coarse grid: quantizing shows in Y
  ir::Value* y = b.op("MatMul", {s, v}, "pv");
  y = b.op("Transpose", {y}, "to", {{"perm", A(std::vector<int64_t>{0, 2, 1, 3})}});
  return b.op("Reshape", {y, b.constant(Tensor::from_vector<int64_t>({B, S, C}, {3}))}, "merge");
}

ir::Node* only_mha(const ir::Graph& g) {
  ir::Node* found = nullptr;
  for (ir::Node* n : g.nodes())
    if (n->op_type() == "MultiHeadAttention") found = n;
  return found;
}

}  // namespace

TEST(PatternAttention, BlockWithMaskBecomesOneMultiHeadAttention) {
  for (bool mul : {false, true}) {
    GraphBuilder b;
    ir::Value* x = b.input("x", {2, 5, 12});
    ir::Value* mask = b.input("mask", {2, 1, 1, 5});
    b.output(attention_block(b, x, mask, 2, 5, 3, 4, {true, mul}));
    auto original = b.g->clone();
    auto want = b.run_on(original);
    auto stats = pattern::apply_transformer_fusions(*b.g);
    EXPECT_EQ(stats.attention, 1u);
    ir::Node* mha = only_mha(*b.g);
    ASSERT_NE(mha, nullptr);
    EXPECT_EQ(mha->domain(), "kiln");
    EXPECT_EQ(mha->name(), "pv");
    EXPECT_EQ(mha->attr_i("num_heads"), 3);
    EXPECT_NEAR(mha->attr_f("scale"), 0.5f, 1e-6);
    EXPECT_EQ(mha->num_inputs(), 4u);
    EXPECT_EQ(count_ops(*b.g, "Transpose"), 0u);
    EXPECT_EQ(count_ops(*b.g, "Softmax"), 0u);
    EXPECT_EQ(b.g->num_nodes(), 4u);  // three projections + attention
    expect_close(want, b.run(), 1e-4, 1e-5);
  }
}

TEST(PatternAttention, BlockWithoutMask) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {1, 7, 8});
  b.output(attention_block(b, x, nullptr, 1, 7, 2, 4, {false}));
  auto want = b.run_on(b.g->clone());
  EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).attention, 1u);
  ASSERT_NE(only_mha(*b.g), nullptr);
  EXPECT_EQ(only_mha(*b.g)->num_inputs(), 3u);
  expect_close(want, b.run(), 1e-4, 1e-5);
}

TEST(PatternAttention, OtherComputationsAreLeftAlone) {
  AttentionOptions wrong_perm;
  wrong_perm.k_perm = {0, 2, 1, 3};  // K not transposed: then the MatMul shapes only agree when S == D
  AttentionOptions wrong_axis;
  wrong_axis.softmax_axis = 2;  // softmax over queries
  for (const AttentionOptions& o : {wrong_perm, wrong_axis}) {
    GraphBuilder b;
    ir::Value* x = b.input("x", {1, 4, 8});
    ir::Value* mask = b.input("mask", {1, 1, 1, 4});
    b.output(attention_block(b, x, mask, 1, 4, 2, 4, o));
    EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).attention, 0u);
    EXPECT_EQ(only_mha(*b.g), nullptr);
  }
}

TEST(PatternAttention, AnIntermediateReadOutsideBlocksTheFusion) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {1, 4, 8});
  ir::Value* mask = b.input("mask", {1, 1, 1, 4});
  b.output(attention_block(b, x, mask, 1, 4, 2, 4, {}));
  // the attention probabilities are also a graph output
  for (ir::Node* n : b.g->nodes())
    if (n->name() == "softmax") b.output(n->output(0));
  EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).attention, 0u);
}

// A QDQ model's attention (quantize_static puts a QuantizeLinear -> DequantizeLinear pair on
// every MatMul input: Q, K and V after their Transposes, the probabilities after Softmax): the
// pairs on Q, K and V move up to the projections (HoistQdqAboveLayout, exact) and the rest
// becomes one MultiHeadAttention that quantizes its probabilities (probs_*). Against the
// unfused graph; the probabilities' grid is coarse (0.05), so leaving out its rounding would
// show, and a softmax rounded differently meeting a rounding tie is too unlikely to.
TEST(PatternAttention, QdqOnTheMatMulInputsKeepsTheFusion) {
  for (bool mask : {true, false}) {
    GraphBuilder b(13);
    ir::Value* x = b.input("x", {2, 5, 12});
    ir::Value* m = mask ? b.input("mask", {2, 1, 1, 5}) : nullptr;
    AttentionOptions o;
    o.mask = mask;
    o.qdq = true;
    b.output(attention_block(b, x, m, 2, 5, 3, 4, o));
    auto want = b.run_on(b.g->clone());
    transforms::PassLog log;
    EXPECT_EQ(transforms::hoist_qdq_above_layout(*b.g, &log), 6u);  // 3 pairs, each above a Transpose and a Reshape
    ir::infer_shapes(*b.g);
    EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).attention, 1u);
    ir::Node* mha = only_mha(*b.g);
    ASSERT_NE(mha, nullptr);
    EXPECT_NEAR(mha->attr_f("probs_scale"), 0.05f, 1e-9);
    EXPECT_EQ(mha->attr_i("probs_zero_point", -1), 0);
    EXPECT_EQ(mha->attr_i("probs_type", -1), 2);
    EXPECT_EQ(count_ops(*b.g, "Transpose"), 0u);
    EXPECT_EQ(count_ops(*b.g, "QuantizeLinear"), 3u) << "Q, K and V's, on the projections";
    for (ir::Node* n : b.g->nodes())
      if (n->op_type() == "QuantizeLinear") {
        EXPECT_EQ(n->input(0)->producer()->op_type(), "MatMul") << n->name();
      }
    expect_close(want, b.run(), 1e-3, 1e-4);
    // the CPU plugin, on every ISA: one Attention node against the unfused graph
    GraphBuilder u(13);
    ir::Value* ux = u.input("x", {2, 5, 12});
    ir::Value* um = mask ? u.input("mask", {2, 1, 1, 5}) : nullptr;
    u.output(attention_block(u, ux, um, 2, 5, 3, 4, o));
    std::vector<Tensor> feeds = {random_tensor({2, 5, 12}, 21)};
    if (mask) feeds.push_back(random_tensor({2, 1, 1, 5}, 22, 2.0f));
    cpu::Executor ex(u.g);
    std::vector<Shape> shapes;
    for (const Tensor& t : feeds) shapes.push_back(t.shape());
    const auto& plan = ex.plan_for(shapes);
    ASSERT_TRUE(plan.cpu);
    EXPECT_EQ(count_type(*plan.cpu, "Attention"), 1u) << plan.cpu->describe();
    EXPECT_EQ(count_type(*plan.cpu, "MatMul"), 0u) << plan.cpu->describe();
    expect_close(runtime::ReferenceExecutor(u.g).run(feeds)[0], ex.run(feeds)[0], 1e-3, 1e-4);
  }
}

TEST(PatternAttention, OpRejectsInconsistentShapes) {
  GraphBuilder b;
  ir::Value* q = b.input("q", {1, 4, 9});
  ir::Node* n = b.node("MultiHeadAttention", {q, q, q}, "mha", {{"num_heads", ir::Attribute(int64_t{2})},
                                                              {"scale", ir::Attribute(1.0f)}}, "kiln");
  b.g->opset_imports["kiln"] = 1;
  b.output(n->output(0));
  try {
    ir::infer_shapes(*b.g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of num_heads"), std::string::npos) << e.what();
  }
}

TEST(CpuAttention, MatchesTheReferenceKernelWithBroadcastMasks) {
  struct Case {
    Shape q, kv, mask;
  };
  for (const Case& c : {Case{{2, 5, 12}, {2, 7, 12}, {2, 1, 1, 7}}, Case{{1, 6, 8}, {1, 6, 8}, {}},
                        Case{{1, 3, 16}, {1, 4, 16}, {1, 4, 3, 4}}, Case{{2, 4, 8}, {2, 4, 8}, {4}}}) {
    auto g = make_graph();
    g->opset_imports["kiln"] = 1;
    std::vector<ir::Value*> ins = {g->add_input("q", {DType::f32, ir::PartialShape(c.q)}),
                                   g->add_input("k", {DType::f32, ir::PartialShape(c.kv)}),
                                   g->add_input("v", {DType::f32, ir::PartialShape(c.kv)})};
    std::vector<Tensor> feeds = {random_tensor(c.q, 1), random_tensor(c.kv, 2), random_tensor(c.kv, 3)};
    if (!c.mask.empty()) {
      ins.push_back(g->add_input("mask", {DType::f32, ir::PartialShape(c.mask)}));
      feeds.push_back(random_tensor(c.mask, 4, 3.0f));
    }
    ir::Node* n = g->add_node("MultiHeadAttention", ins, 1, "mha", "kiln");
    n->attrs["num_heads"] = ir::Attribute(int64_t{c.q[2] / 4});
    n->attrs["scale"] = ir::Attribute(0.5f);
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
    ASSERT_EQ(count_type(*cg, "Attention"), 1u) << cg->describe();
    expect_jit(*cg, "Attention");
  }
}

TEST(CpuAttention, ScoresLiveInTheGraphsArenaSharedByTheHeadsInTurn) {
  // two attention nodes one after the other: each one's scores [B, H, S, T] are working
  // memory in the arena (Node::scratch_bytes), not a buffer of the node's own per plan, and
  // the second reuses the first one's bytes
  const int64_t B = 2, S = 6, C = 16, H = 4;
  auto g = make_graph();
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{B, S, C})});
  ir::Value* y = x;
  for (const char* name : {"mha1", "mha2"}) {
    ir::Node* n = g->add_node("MultiHeadAttention", {y, y, y}, 1, name, "kiln");
    n->attrs["num_heads"] = ir::Attribute(H);
    n->attrs["scale"] = ir::Attribute(0.5f);
    y = n->output(0);
  }
  g->add_output(y);
  auto cg = compare_with_reference(g, {random_tensor({B, S, C}, 1)}, 1e-4, 1e-5);
  const size_t scores = static_cast<size_t>(B * H * S * S) * sizeof(float);
  std::vector<const cpu::Node*> heads;
  for (const auto& n : cg->nodes())
    if (std::string(n->type()) == "Attention") heads.push_back(n.get());
  ASSERT_EQ(heads.size(), 2u) << cg->describe();
  EXPECT_GE(heads[0]->scratch_bytes(), scores);
  EXPECT_NE(heads[0]->scratch, nullptr);
  EXPECT_EQ(heads[0]->scratch, heads[1]->scratch);  // not alive at once: the same bytes
  EXPECT_GE(cg->arena_bytes(), heads[0]->scratch_bytes());
}

// ---------------- hard-swish / hard-sigmoid chains ----------------

TEST(PatternHardSwish, ExporterChainsBecomeHardSwishAndHardSigmoid) {
  for (int form = 0; form < 3; ++form) {
    GraphBuilder b(13);
    ir::Value* x = b.input("x", {2, 3, 4});
    ir::Value* r6 = b.op("Clip", {b.op("Add", {x, b.scalar(3.0f)}), b.scalar(0.0f), b.scalar(6.0f)});
    ir::Value* y = nullptr;
    if (form == 0) y = b.op("Div", {b.op("Mul", {x, r6}), b.scalar(6.0f)});          // x * r6 / 6
    if (form == 1) y = b.op("Mul", {x, b.op("Mul", {r6, b.scalar(1.0f / 6.0f)})});  // x * (r6 * 1/6)
    if (form == 2) y = b.op("Div", {r6, b.scalar(6.0f)});                           // hard sigmoid
    b.output(y);
    auto want = b.run_on(b.g->clone());
    auto st = pattern::apply_transformer_fusions(*b.g);
    EXPECT_EQ(b.g->num_nodes(), 1u) << form;
    EXPECT_EQ(count_ops(*b.g, form == 2 ? "HardSigmoid" : "HardSwish"), 1u) << form;
    EXPECT_EQ(form == 2 ? st.hard_sigmoid : st.hard_swish, 1u) << form;
    expect_close(want, b.run(), 1e-5, 1e-6);
  }
}

TEST(PatternHardSwish, OtherConstantsAreLeftAlone) {
  GraphBuilder b(13);
  ir::Value* x = b.input("x", {2, 3, 4});
  ir::Value* r = b.op("Clip", {b.op("Add", {x, b.scalar(3.0f)}), b.scalar(0.0f), b.scalar(5.0f)});  // relu5
  b.output(b.op("Div", {b.op("Mul", {x, r}), b.scalar(6.0f)}));
  EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).total(), 0u);
  EXPECT_EQ(b.g->num_nodes(), 4u);
}

// ---------------- RMSNorm ----------------

TEST(PatternRmsNorm, DivAndReciprocalFormsBecomeRmsNormalization) {
  for (bool reciprocal : {false, true}) {
    GraphBuilder b(13);
    ir::Value* x = b.input("x", {2, 3, 8});
    ir::Value* ms = b.op("ReduceMean", {b.op("Pow", {x, b.scalar(2.0f)})}, "mean", {{"axes", ir::Attribute(std::vector<int64_t>{-1})}});
    ir::Value* rms = b.op("Sqrt", {b.op("Add", {ms, b.scalar(1e-6f)})});
    ir::Value* n = reciprocal ? b.op("Mul", {x, b.op("Reciprocal", {rms})}) : b.op("Div", {x, rms});
    b.output(b.op("Mul", {b.vec({8}), n}, "gamma_mul"));
    auto want = b.run_on(b.g->clone());
    auto st = pattern::apply_transformer_fusions(*b.g);
    EXPECT_EQ(st.rms_norm, 1u);
    ASSERT_EQ(b.g->num_nodes(), 1u);
    ir::Node* rn = b.g->nodes()[0];
    EXPECT_EQ(rn->op_type(), "RMSNormalization");
    EXPECT_NEAR(rn->attr_f("epsilon"), 1e-6f, 1e-12);
    expect_close(want, b.run(), 1e-5, 1e-6);
  }
}

TEST(PatternRmsNorm, NotOverAnotherAxisOrWithAVectorEpsilon) {
  GraphBuilder b(13);
  ir::Value* x = b.input("x", {2, 3, 8});
  ir::Value* ms = b.op("ReduceMean", {b.op("Pow", {x, b.scalar(2.0f)})}, "mean", {{"axes", ir::Attribute(std::vector<int64_t>{1})}});
  ir::Value* rms = b.op("Sqrt", {b.op("Add", {ms, b.scalar(1e-6f)})});
  b.output(b.op("Mul", {b.op("Div", {x, rms}), b.vec({8})}));
  EXPECT_EQ(pattern::apply_transformer_fusions(*b.g).rms_norm, 0u);
}

// ---------------- SkipLayerNorm ----------------

TEST(PatternSkipLayerNorm, ResidualAddAndLayerNormBecomeOneNode) {
  GraphBuilder b(13);
  ir::Value* x = b.input("x", {2, 3, 8});
  ir::Value* r = b.input("residual", {2, 3, 8});
  ir::Value* sum = b.op("Add", {x, r}, "residual_add");
  b.output(decomposed_layer_norm(b, sum, "ln", 8, 1e-5f));
  auto want = b.run_on(b.g->clone());
  auto st = pattern::apply_transformer_fusions(*b.g);
  EXPECT_EQ(st.layer_norm, 1u);
  EXPECT_EQ(st.skip_layer_norm, 1u);
  ASSERT_EQ(b.g->num_nodes(), 1u);
  ir::Node* n = b.g->nodes()[0];
  EXPECT_EQ(n->op_type(), "SkipLayerNormalization");
  EXPECT_EQ(n->domain(), "com.microsoft");
  EXPECT_NEAR(n->attr_f("epsilon"), 1e-5f, 1e-12);
  expect_close(want, b.run(), 1e-5, 1e-5);
}

TEST(PatternSkipLayerNorm, NotWhenTheAddBroadcastsOrItsSumIsReadElsewhere) {
  for (int k = 0; k < 2; ++k) {
    GraphBuilder b(13);
    ir::Value* x = b.input("x", {2, 3, 8});
    ir::Value* r = k == 0 ? b.input("residual", {1, 3, 8}) : b.input("residual", {2, 3, 8});
    ir::Value* sum = b.op("Add", {x, r}, "residual_add");
    b.output(decomposed_layer_norm(b, sum, "ln", 8, 1e-5f));
    if (k == 1) b.output(sum);
    auto st = pattern::apply_transformer_fusions(*b.g);
    EXPECT_EQ(st.layer_norm, 1u);
    EXPECT_EQ(st.skip_layer_norm, 0u) << k;
  }
}

TEST(CpuSkipLayerNorm, MatchesTheReferenceKernelWithAndWithoutBias) {
  for (bool bias : {false, true}) {
    auto g = make_graph();
    g->opset_imports["com.microsoft"] = 1;
    std::vector<ir::Value*> ins = {g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 5, 24})}),
                                   g->add_input("skip", {DType::f32, ir::PartialShape(Shape{2, 5, 24})}),
                                   g->add_constant("gamma", random_tensor({24}, 3, 0.5f, 1.5f)),
                                   g->add_constant("beta", random_tensor({24}, 4))};
    if (bias) ins.push_back(g->add_constant("bias", random_tensor({24}, 5)));
    ir::Node* n = g->add_node("SkipLayerNormalization", ins, 1, "sln", "com.microsoft");
    n->attrs["epsilon"] = ir::Attribute(1e-6f);
    g->add_output(n->output(0));
    auto cg = compare_with_reference(g, {random_tensor({2, 5, 24}, 1, 2.0f), random_tensor({2, 5, 24}, 2)}, 1e-4, 1e-5);
    EXPECT_EQ(count_type(*cg, "SkipLayerNorm"), 1u) << cg->describe();
    expect_jit(*cg, "SkipLayerNorm");
  }
}

}  // namespace test_pattern_attention
