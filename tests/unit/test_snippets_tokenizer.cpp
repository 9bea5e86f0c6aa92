// The snippets tokenizer (src/snippets/tokenizer.cpp), MarkSkipped and the kiln Subgraph op:
// every case checks the structure the tokenizer produced and that the tokenized graph
// computes what the original computed (reference executor, rtol 1e-5).
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/emitters/x64/target_machine.hpp"
#include "cpu/mark_skipped.hpp"
#include "snippets/subgraph_op.hpp"
#include "snippets/tokenizer.hpp"
#include "transforms_test_util.hpp"

namespace test_snippets_tokenizer {

using namespace kiln;
using namespace kiln::test;
using snippets::kTokenizationPass;
using transforms::PassLog;

namespace {

// What run_ir_passes does: MarkSkipped (the CPU layer's), then the tokenizer.
// The data-pointer budget the CPU layer gives the tokenizer: its code generator's.
const size_t kMaxDataPointers = static_cast<size_t>(cpu::x64::shared_target_machine()->max_data_pointers());

size_t tokenize_marked(ir::Graph& g, transforms::PassLog* log = nullptr) {
  return snippets::tokenize(g, cpu::mark_skipped(g, log), kMaxDataPointers, log);
}

}  // namespace

namespace {

ir::Node* add(const std::shared_ptr<ir::Graph>& g, const std::string& op, std::vector<ir::Value*> in,
              const std::string& name, const std::string& domain = "") {
  return g->add_node(op, in, 1, name, domain);
}

std::vector<ir::Node*> subgraphs(const ir::Graph& g) {
  std::vector<ir::Node*> out;
  for (ir::Node* n : g.topo_order())
    if (snippets::is_subgraph(*n)) out.push_back(n);
  return out;
}

std::vector<std::string> fused(const ir::Node* n) { return n->attr_strings(snippets::kFusedAttr); }

// Tokenizes a copy of `g` (types inferred), checks it validates, compares outputs.
std::shared_ptr<ir::Graph> tokenized(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& feeds,
                                     size_t expect_subgraphs, PassLog* log = nullptr) {
  ir::infer_shapes(*g);
  auto t = g->clone();
  PassLog local;
  EXPECT_EQ(tokenize_marked(*t, log ? log : &local), expect_subgraphs);
  EXPECT_EQ(output_names(*t), output_names(*g));
  expect_same_outputs(g, t, feeds, 1e-5, 1e-6);
  return t;
}

}  // namespace

TEST(SnippetsTokenizer, ChainBecomesOneSubgraph) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 3, 4, 5}));
  ir::Node* r = add(g, "Relu", {x}, "relu");
  ir::Node* s = add(g, "Sigmoid", {r->output(0)}, "sigmoid");
  ir::Node* m = add(g, "Mul", {s->output(0), g->add_constant("two", f32_filled({}, 2.0f))}, "mul");
  ir::Node* t = add(g, "Tanh", {m->output(0)}, "tanh");
  g->add_output(t->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({2, 3, 4, 5}, 1, -3, 3)}, 1, &log);
  ASSERT_EQ(tg->num_nodes(), 1u);
  ir::Node* sg = subgraphs(*tg).at(0);
  EXPECT_EQ(sg->name(), "relu/subgraph");
  EXPECT_EQ(fused(sg), (std::vector<std::string>{"relu", "sigmoid", "mul", "tanh"}));
  ASSERT_EQ(sg->num_inputs(), 1u);
  EXPECT_EQ(sg->input(0)->name(), "x");
  auto body = sg->attr_graph(snippets::kBodyAttr);
  EXPECT_EQ(body->inputs().size(), 1u);
  EXPECT_EQ(body->outputs().size(), 1u);
  EXPECT_EQ(body->num_nodes(), 4u);
  EXPECT_NE(body->find_value("two"), nullptr);  // the scalar lives in the body
  EXPECT_TRUE(body->find_value("two")->is_constant());
  EXPECT_EQ(log.count_applied(kTokenizationPass), 1u);
}

TEST(SnippetsTokenizer, TwoBranchesMerge) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({3, 7}));
  ir::Node* a = add(g, "Relu", {x}, "relu");
  ir::Node* a2 = add(g, "Neg", {a->output(0)}, "neg");
  ir::Node* b = add(g, "Exp", {x}, "exp");
  ir::Node* s = add(g, "Add", {a2->output(0), b->output(0)}, "add");
  g->add_output(s->output(0));
  auto tg = tokenized(g, {rand_f32({3, 7}, 2)}, 1);
  ASSERT_EQ(tg->num_nodes(), 1u);
  ir::Node* sg = subgraphs(*tg).at(0);
  EXPECT_EQ(sg->num_inputs(), 1u);  // x read by both branches is one input
  EXPECT_EQ(fused(sg).size(), 4u);
}

TEST(SnippetsTokenizer, MergeThatWouldCreateACycleIsRefused) {
  // relu -> sigmoid ---------------------------> add
  //              \-> Hardmax (unsupported) -> tanh -> exp -/
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({4, 6}));
  ir::Node* r = add(g, "Relu", {x}, "relu");
  ir::Node* s = add(g, "Sigmoid", {r->output(0)}, "sigmoid");
  ir::Node* sm = add(g, "Hardmax", {s->output(0)}, "hardmax");
  ir::Node* t = add(g, "Tanh", {sm->output(0)}, "tanh");
  ir::Node* e = add(g, "Exp", {t->output(0)}, "exp");
  ir::Node* a = add(g, "Add", {s->output(0), e->output(0)}, "add");
  g->add_output(a->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({4, 6}, 3)}, 2, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 2u);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"relu", "sigmoid"}));
  EXPECT_EQ(fused(sgs[1]), (std::vector<std::string>{"tanh", "exp", "add"}));
  bool cycle_logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    cycle_logged |= en.where == "add" && en.message.find("cycle") != std::string::npos;
  EXPECT_TRUE(cycle_logged);
}

TEST(SnippetsTokenizer, CycleBetweenTwoSubgraphsIsRefused) {
  // {a, d} and {b, e} would each be fine alone, but a -> Hardmax -> e and b -> Hardmax -> d
  // make the two Subgraph nodes depend on each other.
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 5}));
  ir::Value* y = g->add_input("y", f32_type({2, 5}));
  ir::Node* a = add(g, "Relu", {x}, "a");
  ir::Node* b = add(g, "Exp", {y}, "b");
  ir::Node* xa = add(g, "Hardmax", {a->output(0)}, "hardmax_a");
  ir::Node* xb = add(g, "Hardmax", {b->output(0)}, "hardmax_b");
  ir::Node* d = add(g, "Add", {a->output(0), xb->output(0)}, "d");
  ir::Node* e = add(g, "Mul", {b->output(0), xa->output(0)}, "e");
  ir::Node* e2 = add(g, "Neg", {e->output(0)}, "e2");
  ir::Node* out = add(g, "Hardmax", {d->output(0)}, "out_d");
  g->add_output(out->output(0));
  g->add_output(e2->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({2, 5}, 4), rand_f32({2, 5}, 5)}, 2, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 2u);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(fused(sgs[1]), (std::vector<std::string>{"e", "e2"}));
  EXPECT_NE(tg->find_node("b"), nullptr);  // left alone
  EXPECT_NO_THROW(tg->topo_order());
}

TEST(SnippetsTokenizer, SecondResultConsumerStartsNewSubgraph) {
  // relu -> abs (graph output) -> sigmoid -> tanh (graph output) -> exp -> Softmax
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({5, 3}));
  ir::Node* r = add(g, "Relu", {x}, "relu");
  ir::Node* a = add(g, "Abs", {r->output(0)}, "abs");
  ir::Node* s = add(g, "Sigmoid", {a->output(0)}, "sigmoid");
  ir::Node* t = add(g, "Tanh", {s->output(0)}, "tanh");
  ir::Node* e = add(g, "Exp", {t->output(0)}, "exp");
  ir::Node* sm = add(g, "Softmax", {e->output(0)}, "softmax");
  g->add_output(a->output(0));
  g->add_output(t->output(0));
  g->add_output(sm->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({5, 3}, 6)}, 2, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 2u);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"relu", "abs", "sigmoid"}));
  EXPECT_EQ(fused(sgs[1]), (std::vector<std::string>{"tanh", "exp"}));
  ASSERT_EQ(sgs[0]->num_outputs(), 2u);  // abs (graph output) and sigmoid (read by tanh)
  EXPECT_EQ(sgs[0]->output(0)->name(), a->output(0)->name());
  EXPECT_EQ(sgs[1]->input(0), sgs[0]->output(1));
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    logged |= en.where == "tanh" && en.message.find("graph outputs") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(SnippetsTokenizer, ScalarConstantsInsideNonScalarAsInputs) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 3, 4}));
  ir::Value* half = g->add_constant("half", f32_filled({}, 0.5f));
  ir::Value* one111 = g->add_constant("one111", f32_filled({1, 1, 1}, 1.5f));
  ir::Value* vec = g->add_constant("vec", rand_f32({4}, 7));
  ir::Node* m = add(g, "Mul", {x, half}, "mul");
  ir::Node* a = add(g, "Add", {m->output(0), vec}, "add");
  ir::Node* s = add(g, "Sub", {one111, a->output(0)}, "sub");
  ir::Node* c = add(g, "Clip", {s->output(0), g->add_constant("lo", f32_filled({}, -1.0f)),
                                g->add_constant("hi", f32_filled({}, 1.0f))},
                    "clip");
  g->add_output(c->output(0));
  auto tg = tokenized(g, {rand_f32({2, 3, 4}, 8, -3, 3)}, 1);
  ir::Node* sg = subgraphs(*tg).at(0);
  ASSERT_EQ(sg->num_inputs(), 2u);
  EXPECT_EQ(sg->input(0)->name(), "x");
  EXPECT_EQ(sg->input(1)->name(), "vec");
  EXPECT_TRUE(sg->input(1)->is_constant());
  auto body = sg->attr_graph(snippets::kBodyAttr);
  for (const char* k : {"half", "one111", "lo", "hi"}) {
    ir::Value* v = body->find_value(k);
    ASSERT_NE(v, nullptr) << k;
    EXPECT_TRUE(v->is_constant()) << k;
  }
  EXPECT_EQ(body->find_value("one111")->constant().shape(), (Shape{1, 1, 1}));  // broadcasting kept
  EXPECT_FALSE(body->find_value("vec")->is_constant());  // a body parameter
}

TEST(SnippetsTokenizer, RegisterBudgetSplitsAWideSubgraph) {
  auto g = new_graph();
  std::vector<ir::Value*> xs;
  std::vector<Tensor> feeds;
  for (int i = 0; i < 12; ++i) {
    xs.push_back(g->add_input(cat("x", i), f32_type({8})));
    feeds.push_back(rand_f32({8}, 10 + static_cast<uint32_t>(i)));
  }
  ir::Value* s = xs[0];
  for (int i = 1; i < 12; ++i) s = add(g, "Add", {s, xs[static_cast<size_t>(i)]}, cat("add", i))->output(0);
  g->add_output(add(g, "Relu", {s}, "relu")->output(0));
  PassLog log;
  auto tg = tokenized(g, feeds, 2, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 2u);
  for (ir::Node* n : sgs) EXPECT_LE(n->num_inputs() + n->num_outputs(), kMaxDataPointers) << n->name();
  EXPECT_EQ(sgs[0]->num_inputs() + sgs[0]->num_outputs(), kMaxDataPointers);  // filled up first
  EXPECT_EQ(fused(sgs[1]).back(), "relu");
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false)) logged |= en.message.find("data pointers") != std::string::npos;
  EXPECT_TRUE(logged);
  // a tighter budget splits more
  auto t2 = g->clone();
  EXPECT_EQ(snippets::tokenize(*t2, {}, 4), 6u);
  expect_same_outputs(g, t2, feeds, 1e-5, 1e-6);
}

TEST(SnippetsTokenizer, ALongChainIsSplitIntoBoundedSubgraphs) {
  // 600 elementwise ops in a row: subgraphs of at most 256 ops (the bound that keeps
  // tokenizing and lowering linear in the graph), in order, computing what the chain computes
  auto g = new_graph();
  ir::Value* v = g->add_input("x", f32_type({4, 16}));
  const char* ops[] = {"Relu", "Tanh", "Abs"};
  for (int i = 0; i < 600; ++i) v = add(g, ops[i % 3], {v}, cat("op", i))->output(0);
  g->add_output(v);
  PassLog log;
  auto tg = tokenized(g, {rand_f32({4, 16}, 7, -3, 3)}, 3, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 3u);
  EXPECT_EQ(fused(sgs[0]).size(), 256u);
  EXPECT_EQ(fused(sgs[1]).size(), 256u);
  EXPECT_EQ(fused(sgs[2]).size(), 88u);
  EXPECT_EQ(fused(sgs[0]).front(), "op0");
  EXPECT_EQ(fused(sgs[2]).back(), "op599");
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    logged |= en.message.find("257 ops, more than 256") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(SnippetsTokenizer, NodesFusedAfterConvolutionAreSkipped) {
  // conv1 -> relu -> add(conv2): relu is a post-op, add the conv's sum; the add's output
  // has two readers, so the CPU chain stops there and the rest is tokenized.
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 2, 5, 5}));
  ir::Value* y = g->add_input("y", f32_type({1, 4, 5, 5}));
  std::map<std::string, ir::Attribute> pads = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  ir::Node* c1 = add(g, "Conv", {x, g->add_constant("w1", rand_f32({4, 2, 3, 3}, 20))}, "conv1");
  ir::Node* c2 = add(g, "Conv", {x, g->add_constant("w2", rand_f32({4, 2, 3, 3}, 21))}, "conv2");
  c1->attrs = pads;
  c2->attrs = pads;
  ir::Node* r = add(g, "Relu", {c1->output(0)}, "relu");
  ir::Node* s = add(g, "Add", {r->output(0), c2->output(0)}, "sum");
  ir::Node* sig = add(g, "Sigmoid", {s->output(0)}, "sigmoid");
  ir::Node* mul = add(g, "Mul", {sig->output(0), y}, "mul");
  ir::Node* th = add(g, "Tanh", {s->output(0)}, "tanh");
  ir::Node* out = add(g, "Add", {mul->output(0), th->output(0)}, "out");
  g->add_output(out->output(0));
  ir::infer_shapes(*g);

  PassLog mlog;
  auto skipped = cpu::mark_skipped(*g, &mlog);
  EXPECT_EQ(skipped, (snippets::SkippedNodes{r, s}));
  EXPECT_EQ(mlog.count_applied(cpu::kMarkSkippedPass), 2u);

  PassLog log;
  auto tg = tokenized(g, {rand_f32({1, 2, 5, 5}, 22), rand_f32({1, 4, 5, 5}, 23)}, 1, &log);
  EXPECT_NE(tg->find_node("relu"), nullptr);
  EXPECT_NE(tg->find_node("sum"), nullptr);
  ir::Node* sg = subgraphs(*tg).at(0);
  EXPECT_EQ(fused(sg), (std::vector<std::string>{"sigmoid", "mul", "tanh", "out"}));
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    logged |= en.where == "relu" && en.message.find("MarkSkipped") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(SnippetsTokenizer, MarkSkippedFollowsMatMulBiasAndStopsAtNonPostOps) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({3, 8}));
  ir::Node* mm = add(g, "MatMul", {x, g->add_constant("w", rand_f32({8, 6}, 30))}, "matmul");
  ir::Node* bias = add(g, "Add", {g->add_constant("b", rand_f32({6}, 31)), mm->output(0)}, "bias");
  ir::Node* erf = add(g, "Erf", {bias->output(0)}, "erf");  // no oneDNN eltwise: chain stops
  ir::Node* mul = add(g, "Mul", {erf->output(0), g->add_constant("k", f32_filled({}, 0.5f))}, "mul");
  ir::Node* mm2 = add(g, "MatMul", {mul->output(0), g->add_constant("w2", rand_f32({6, 6}, 32))}, "matmul2");
  // [3,6] is not one value per output column: not a post-op
  ir::Node* full = add(g, "Add", {mm2->output(0), g->add_constant("full", rand_f32({3, 6}, 33))}, "add_full");
  ir::Node* ex = add(g, "Exp", {full->output(0)}, "exp");
  g->add_output(ex->output(0));
  ir::infer_shapes(*g);
  EXPECT_EQ(cpu::mark_skipped(*g), (snippets::SkippedNodes{bias}));
  auto tg = tokenized(g, {rand_f32({3, 8}, 34)}, 2);
  auto sgs = subgraphs(*tg);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"erf", "mul"}));
  EXPECT_EQ(fused(sgs[1]), (std::vector<std::string>{"add_full", "exp"}));
}

TEST(SnippetsTokenizer, HardSwishAndErfGeluPrimitivesCollapse) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 16}));
  auto c = [&](const char* n, float v) { return g->add_constant(n, f32_filled({}, v)); };
  // x * clip(x + 3, 0, 6) / 6
  ir::Node* a3 = add(g, "Add", {x, c("three", 3)}, "hs_add");
  ir::Node* cl = add(g, "Clip", {a3->output(0), c("zero", 0), c("six", 6)}, "hs_clip");
  ir::Node* mu = add(g, "Mul", {x, cl->output(0)}, "hs_mul");
  ir::Node* dv = add(g, "Div", {mu->output(0), c("six_b", 6)}, "hs_div");
  g->add_output(dv->output(0));
  ir::Value* z = g->add_input("z", f32_type({2, 16}));
  // z * 0.5 * (1 + erf(z / sqrt 2))
  ir::Node* d = add(g, "Div", {z, c("sqrt2", 1.4142135f)}, "gelu_div");
  ir::Node* e = add(g, "Erf", {d->output(0)}, "gelu_erf");
  ir::Node* p = add(g, "Add", {e->output(0), c("one", 1)}, "gelu_add");
  ir::Node* m1 = add(g, "Mul", {z, p->output(0)}, "gelu_mul");
  ir::Node* m2 = add(g, "Mul", {m1->output(0), c("half", 0.5f)}, "gelu_mul2");
  g->add_output(m2->output(0));
  auto tg = tokenized(g, {rand_f32({2, 16}, 40, -5, 5), rand_f32({2, 16}, 41, -3, 3)}, 2);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(tg->num_nodes(), 2u);
  EXPECT_EQ(fused(sgs[0]).size(), 4u);
  EXPECT_EQ(fused(sgs[1]).size(), 5u);
  for (ir::Node* n : sgs) EXPECT_EQ(n->num_inputs(), 1u);
}

TEST(SnippetsTokenizer, UnsupportedDtypesAndOpsAreLeftAlone) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", {DType::i32, ir::PartialShape(Shape{4})});
  ir::Node* a = add(g, "Abs", {x}, "abs_i");
  ir::Node* n = add(g, "Neg", {a->output(0)}, "neg_i");
  g->add_output(n->output(0));
  ir::infer_shapes(*g);
  EXPECT_FALSE(snippets::tokenizable(*a));
  EXPECT_EQ(tokenize_marked(*g), 0u);
  EXPECT_EQ(g->num_nodes(), 2u);

  auto h = new_graph();
  ir::Value* y = h->add_input("y", f32_type({4}));
  ir::Value* lo = h->add_input("lo", f32_type({}));
  ir::Node* clip = add(h, "Clip", {y, lo}, "clip_dyn");  // bound not constant
  ir::Node* relu = add(h, "Relu", {y}, "relu");
  ir::Node* mx = add(h, "Max", {y, relu->output(0), clip->output(0)}, "max3");  // three inputs
  h->add_output(mx->output(0));
  ir::infer_shapes(*h);
  EXPECT_FALSE(snippets::tokenizable(*clip));
  EXPECT_FALSE(snippets::tokenizable(*mx));
  EXPECT_TRUE(snippets::tokenizable(*relu));
  EXPECT_EQ(tokenize_marked(*h), 0u);
}

TEST(SnippetsTokenizer, DynamicShapesKeepSymbolicDims) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({ir::Dim::sym("batch"), 3}));
  ir::Value* b = g->add_input("b", f32_type({3}));
  ir::Node* a = add(g, "Add", {x, b}, "add");
  ir::Node* s = add(g, "Sigmoid", {a->output(0)}, "sigmoid");
  ir::Node* p = add(g, "Mul", {s->output(0), g->add_constant("slope", rand_f32({3}, 50))}, "scale");
  g->add_output(p->output(0));
  ir::infer_shapes(*g);
  auto tg = g->clone();
  ASSERT_EQ(tokenize_marked(*tg), 1u);
  ir::infer_shapes(*tg);
  EXPECT_EQ(tg->outputs()[0]->type.shape.to_string(), "[batch,3]");
  for (int64_t n : {1, 5}) expect_same_outputs(g, tg, {rand_f32({n, 3}, 51), rand_f32({3}, 52)}, 1e-5, 1e-6);
}

TEST(SnippetsTokenizerSubgraphOp, ShapeInferenceWithSymbolicDims) {
  auto body = std::make_shared<ir::Graph>();
  body->opset_imports[""] = 17;
  ir::Value* a = body->add_input("a", f32_type({ir::Dim::sym("n"), 4}));
  ir::Value* b = body->add_input("b", f32_type({4}));
  ir::Node* s = body->add_node("Add", {a, b}, 1, "add");
  ir::Node* r = body->add_node("Relu", {s->output(0)}, 1, "relu");
  ir::Node* m = body->add_node("Mul", {r->output(0), body->add_constant("two", f32_filled({}, 2))}, 1, "mul");
  body->add_output(r->output(0));
  body->add_output(m->output(0));

  auto g = new_graph();
  g->opset_imports["kiln"] = 1;
  ir::Value* x = g->add_input("x", f32_type({ir::Dim::sym("batch"), ir::Dim::sym("seq"), 4}));
  ir::Value* y = g->add_input("y", f32_type({1, 4}));
  ir::Node* sg = g->add_node("Subgraph", {x, y}, 2, "sg", "kiln");
  sg->attrs["body"] = ir::Attribute(body);
  g->add_output(sg->output(0));
  g->add_output(sg->output(1));
  ir::infer_shapes(*g);
  EXPECT_EQ(sg->output(0)->type.dtype, DType::f32);
  EXPECT_EQ(sg->output(0)->type.shape.to_string(), "[batch,seq,4]");
  EXPECT_EQ(sg->output(1)->type.shape.to_string(), "[batch,seq,4]");
  EXPECT_EQ(a->type.shape.to_string(), "[n,4]");  // inferred on a copy: the body is untouched

  // again at other shapes, of another rank (the copy is kept per body between inferences:
  // nothing of the first shapes may stay), then with an input whose last dim does not broadcast
  x->type = f32_type({5, 4});
  y->type = f32_type({4});
  ir::infer_shapes(*g);
  EXPECT_EQ(sg->output(0)->type.shape.to_string(), "[5,4]");
  EXPECT_EQ(sg->output(1)->type.shape.to_string(), "[5,4]");
  x->type = f32_type({2, 7, 3, 4});
  ir::infer_shapes(*g);
  EXPECT_EQ(sg->output(1)->type.shape.to_string(), "[2,7,3,4]");
  x->type = f32_type({2, 3});
  EXPECT_THROW(ir::infer_shapes(*g), Error);
  x->type = f32_type({ir::Dim::sym("batch"), ir::Dim::sym("seq"), 4});
  y->type = f32_type({1, 4});
  ir::infer_shapes(*g);
  EXPECT_EQ(sg->output(1)->type.shape.to_string(), "[batch,seq,4]");
  EXPECT_EQ(a->type.shape.to_string(), "[n,4]");

  // the reference kernel runs the body
  runtime::ReferenceExecutor ex(g);
  Tensor tx = rand_f32({2, 3, 4}, 60), ty = rand_f32({1, 4}, 61);
  auto outs = ex.run({tx, ty});
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_EQ(outs[1].shape(), (Shape{2, 3, 4}));
  const float* px = tx.data<float>();
  const float* py = ty.data<float>();
  for (int64_t i = 0; i < 24; ++i) {
    const float want = std::max(0.0f, px[i] + py[i % 4]);
    EXPECT_FLOAT_EQ(outs[0].data<float>()[i], want);
    EXPECT_FLOAT_EQ(outs[1].data<float>()[i], 2 * want);
  }
}

TEST(SnippetsTokenizerSubgraphOp, BodyArityIsValidated) {
  auto body = std::make_shared<ir::Graph>();
  body->opset_imports[""] = 17;
  ir::Value* a = body->add_input("a", f32_type({4}));
  body->add_output(body->add_node("Relu", {a}, 1, "relu")->output(0));
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({4}));
  ir::Value* y = g->add_input("y", f32_type({4}));
  ir::Node* sg = g->add_node("Subgraph", {x, y}, 1, "sg", "kiln");
  sg->attrs["body"] = ir::Attribute(body);
  g->add_output(sg->output(0));
  try {
    ir::infer_shapes(*g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the body has 1 inputs, the node 2"), std::string::npos) << e.what();
  }
}

TEST(SnippetsTokenizer, BoolsStayInsideASubgraph) {
  // Less -> Where joins the chain; a comparison whose bool leaves the graph is not tokenized.
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 8}));
  ir::Node* e = add(g, "Exp", {x}, "exp");
  ir::Node* lt = add(g, "Less", {e->output(0), g->add_constant("one", f32_filled({}, 1.0f))}, "less");
  ir::Node* w = add(g, "Where", {lt->output(0), e->output(0), x}, "where");
  ir::Node* n = add(g, "Neg", {w->output(0)}, "neg");
  g->add_output(n->output(0));
  auto tg = tokenized(g, {rand_f32({2, 8}, 3, -2, 2)}, 1);
  ASSERT_EQ(tg->num_nodes(), 1u);
  EXPECT_EQ(fused(subgraphs(*tg).at(0)), (std::vector<std::string>{"exp", "less", "where", "neg"}));

  auto g2 = new_graph();
  ir::Value* y = g2->add_input("y", f32_type({2, 8}));
  ir::Node* e2 = add(g2, "Exp", {y}, "exp");
  ir::Node* gt = add(g2, "Greater", {e2->output(0), y}, "greater");
  g2->add_output(gt->output(0));
  ir::infer_shapes(*g2);
  EXPECT_FALSE(snippets::tokenizable(*gt));
  PassLog log;
  EXPECT_EQ(tokenize_marked(*g2, &log), 0u);
}

TEST(SnippetsMarkSkipped, SwishAfterAConvolutionIsLeftToTheCpuOptimizer) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 4, 8, 8}));
  ir::Node* c = add(g, "Conv", {x, g->add_constant("w", rand_f32({8, 4, 1, 1}, 1, -1, 1))}, "conv");
  ir::Node* s = add(g, "Sigmoid", {c->output(0)}, "sig");
  ir::Node* m = add(g, "Mul", {c->output(0), s->output(0)}, "silu");
  ir::Node* t = add(g, "Tanh", {m->output(0)}, "tanh");
  ir::Node* e = add(g, "Exp", {t->output(0)}, "exp");
  g->add_output(e->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  auto skipped = cpu::mark_skipped(*g, &log);
  EXPECT_TRUE(skipped.count(s) && skipped.count(m));  // swish, then tanh and exp as eltwise post-ops
  EXPECT_TRUE(skipped.count(t) && skipped.count(e));
  EXPECT_EQ(tokenize_marked(*g, &log), 0u);
}

TEST(SnippetsTokenizer, ALoneBroadcastingBinaryGetsAKernel) {
  // x * s with s [1, 8, 1, 1] computed elsewhere (an SE block's scale): a Subgraph of its own;
  // the same Mul of two full tensors, or by a constant, stays a lone op
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 8, 4, 4}));
  ir::Value* s = g->add_input("s", f32_type({1, 8, 1, 1}));
  g->add_output(add(g, "Mul", {x, s}, "se_mul")->output(0));
  auto tg = tokenized(g, {rand_f32({1, 8, 4, 4}, 1, -2, 2), rand_f32({1, 8, 1, 1}, 2, -2, 2)}, 1);
  EXPECT_EQ(fused(subgraphs(*tg).at(0)), (std::vector<std::string>{"se_mul"}));

  auto g2 = new_graph();
  ir::Value* a = g2->add_input("a", f32_type({1, 8, 4, 4}));
  ir::Value* b = g2->add_input("b", f32_type({1, 8, 4, 4}));
  g2->add_output(add(g2, "Mul", {a, b}, "full_mul")->output(0));
  g2->add_output(add(g2, "Mul", {a, g2->add_constant("k", rand_f32({1, 8, 1, 1}, 3, -1, 1))}, "const_mul")->output(0));
  tokenized(g2, {rand_f32({1, 8, 4, 4}, 4, -2, 2), rand_f32({1, 8, 4, 4}, 5, -2, 2)}, 0);
}

TEST(SnippetsTokenizer, SoftmaxJoinsOnlyWhereItsDimsCanBeTheInnerBlock) {
  // x [2, 3, 4] * s [1, 3, 1] -> Softmax(opset 11, axis 1: over 3 x 4) -> Exp: s broadcasts over
  // part of the reduced dims, so Softmax cannot join the Mul's subgraph: it starts one with the Exp
  auto g = new_graph();
  g->opset_imports[""] = 11;
  ir::Value* x = g->add_input("x", f32_type({2, 3, 4}));
  ir::Value* s = g->add_input("s", f32_type({1, 3, 1}));
  ir::Node* m = add(g, "Mul", {x, s}, "mul");
  ir::Node* r = add(g, "Relu", {m->output(0)}, "relu");
  ir::Node* sm = add(g, "Softmax", {r->output(0)}, "softmax");
  sm->set_opset(11);
  sm->attrs["axis"] = ir::Attribute(int64_t{1});
  ir::Node* e = add(g, "Exp", {sm->output(0)}, "exp");
  g->add_output(e->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({2, 3, 4}, 8), rand_f32({1, 3, 1}, 9)}, 2, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 2u);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"mul", "relu"}));
  EXPECT_EQ(fused(sgs[1]), (std::vector<std::string>{"softmax", "exp"}));
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    logged |= en.where == "softmax" && en.message.find("broadcasts over part of the reduced dims") != std::string::npos;
  EXPECT_TRUE(logged);

  // the same with a per-row s [2, 1, 1]: one subgraph with the Softmax and the Exp
  auto g2 = new_graph();
  g2->opset_imports[""] = 11;
  ir::Value* x2 = g2->add_input("x", f32_type({2, 3, 4}));
  ir::Value* s2 = g2->add_input("s", f32_type({2, 1, 1}));
  ir::Node* m2 = add(g2, "Mul", {x2, s2}, "mul");
  ir::Node* sm2 = add(g2, "Softmax", {m2->output(0)}, "softmax");
  sm2->set_opset(11);
  sm2->attrs["axis"] = ir::Attribute(int64_t{1});
  g2->add_output(add(g2, "Exp", {sm2->output(0)}, "exp")->output(0));
  auto tg2 = tokenized(g2, {rand_f32({2, 3, 4}, 8), rand_f32({2, 1, 1}, 9)}, 1);
  EXPECT_EQ(fused(subgraphs(*tg2).at(0)), (std::vector<std::string>{"mul", "softmax", "exp"}));
}

TEST(SnippetsTokenizer, ATransposeJoinsOnlyAsTheWayAnInputIsRead) {
  // x -> Relu -> Transpose -> Add(., y): the Transpose reads a value the Relu computes, so it
  // starts its own subgraph with the Add; the Relu is left alone
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 3, 8}));
  ir::Value* y = g->add_input("y", f32_type({3, 2, 8}));
  ir::Node* r = add(g, "Relu", {x}, "relu");
  ir::Node* t = add(g, "Transpose", {r->output(0)}, "transpose");
  t->attrs["perm"] = std::vector<int64_t>{1, 0, 2};
  ir::Node* a = add(g, "Add", {t->output(0), y}, "add");
  g->add_output(add(g, "Neg", {a->output(0)}, "neg")->output(0));
  PassLog log;
  auto tg = tokenized(g, {rand_f32({2, 3, 8}, 10), rand_f32({3, 2, 8}, 11)}, 1, &log);
  auto sgs = subgraphs(*tg);
  ASSERT_EQ(sgs.size(), 1u);
  EXPECT_EQ(fused(sgs[0]), (std::vector<std::string>{"transpose", "add", "neg"}));
  EXPECT_NE(tg->find_node("relu"), nullptr);
  bool logged = false;
  for (auto& en : entries(log, kTokenizationPass, false))
    logged |= en.where == "transpose" && en.message.find("computed inside the subgraph") != std::string::npos;
  EXPECT_TRUE(logged);
}

}  // namespace test_snippets_tokenizer
