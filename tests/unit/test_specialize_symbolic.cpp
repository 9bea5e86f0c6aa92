// transforms::specialize_symbolic (stage 1 on symbolic shapes) alone on small built graphs:
// what it folds, which computed Reshape targets become constants and which stay computed, the
// symbols it gives unnamed dims, what it refuses; then the template through cpu::Executor,
// against the reference executor and against plans made from the model for each shape.
#include <gtest/gtest.h>

#include <random>

#include "cpu/emitters/x64/target_machine.hpp"
#include "cpu/executor.hpp"
#include "cpu/graph_optimizer.hpp"
#include "snippets/subgraph_op.hpp"
#include "transforms/specialize_symbolic.hpp"

#include "cpu_test_util.hpp"

namespace test_specialize_symbolic {

using namespace kiln;
using namespace kiln::test;

namespace {

using ir::Dim;

ir::ValueType f32_type(std::vector<Dim> d) { return {DType::f32, ir::PartialShape(std::move(d))}; }

size_t count_op(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

bool logged(const transforms::PassLog& log, const std::string& pass) {
  for (const auto& e : log.entries)
    if (e.pass == pass && e.applied) return true;
  return false;
}

ir::Value* i64(ir::Graph& g, const std::string& name, std::vector<int64_t> v, bool scalar = false) {
  const Shape s = scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())};
  return g.add_constant(name, Tensor::from_vector<int64_t>(v, s));
}

// Gather(Shape(x), k) unsqueezed to [1]: how exporters read one dim.
ir::Value* dim_of(ir::Graph& g, ir::Value* x, int64_t k, const std::string& name) {
  auto* shape = g.add_node("Shape", {x}, 1, name + "/shape");
  auto* gather = g.add_node("Gather", {shape->output(0), i64(g, name + "/k", {k}, true)}, 1, name + "/gather");
  auto* unsq = g.add_node("Unsqueeze", {gather->output(0), i64(g, name + "/axes", {0})}, 1, name + "/unsqueeze");
  return unsq->output(0);
}

// x [batch, seq, 8] split into 2 heads of 4 by a Reshape whose target is computed from x's
// shape ([batch, seq, 2, 4]), then merged back by Reshape(x', [batch * seq, 8]).
std::shared_ptr<ir::Graph> head_split_graph() {
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("batch"), Dim::sym("seq"), 8}));
  auto* relu = g->add_node("Relu", {x}, 1, "relu");
  auto* target = g->add_node("Concat", {dim_of(*g, relu->output(0), 0, "b"), dim_of(*g, relu->output(0), 1, "s"),
                                        i64(*g, "heads", {2, 4})},
                             1, "target");
  target->attrs["axis"] = ir::Attribute(int64_t{0});
  auto* split = g->add_node("Reshape", {relu->output(0), target->output(0)}, 1, "split");
  auto* t = g->add_node("Transpose", {split->output(0)}, 1, "t");
  t->attrs["perm"] = ir::Attribute(std::vector<int64_t>{0, 2, 1, 3});
  auto* back = g->add_node("Transpose", {t->output(0)}, 1, "back");
  back->attrs["perm"] = ir::Attribute(std::vector<int64_t>{0, 2, 1, 3});
  // rows = batch * seq: no 0 can say that, but -1 can
  auto* rows = g->add_node("Mul", {dim_of(*g, x, 0, "b2"), dim_of(*g, x, 1, "s2")}, 1, "rows");
  auto* flat_target = g->add_node("Concat", {rows->output(0), i64(*g, "width", {8})}, 1, "flat_target");
  flat_target->attrs["axis"] = ir::Attribute(int64_t{0});
  auto* flat = g->add_node("Reshape", {back->output(0), flat_target->output(0)}, 1, "flat");
  g->add_output(flat->output(0));
  ir::infer_shapes(*g);
  return g;
}

}  // namespace

TEST(SpecializeSymbolic, ComputedReshapeTargetsBecomeConstantsThatHoldForEveryShape) {
  auto g = head_split_graph();
  auto s = g->clone();
  const auto r = transforms::specialize_symbolic(*s);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.static_reshapes, 2u);
  EXPECT_EQ(count_op(*s, "Shape"), 0u);  // the shape computations are gone with their readers
  EXPECT_EQ(count_op(*s, "Concat"), 0u);
  const ir::Node* split = s->find_node("split");
  const ir::Node* flat = s->find_node("flat");
  ASSERT_TRUE(split && flat && split->input(1)->is_constant() && flat->input(1)->is_constant());
  EXPECT_EQ(split->input(1)->constant().to_i64(), (std::vector<int64_t>{0, 0, 2, 4}));  // batch, seq copied
  EXPECT_EQ(flat->input(1)->constant().to_i64(), (std::vector<int64_t>{-1, 8}));        // batch * seq inferred
  EXPECT_EQ(split->output(0)->type.shape.to_string(), "[batch,seq,2,4]");
  // the same graph computes what the original does, for shapes where seq equals a constant of
  // the target (2 heads, 4 per head) as well as others
  for (const Shape& shape : {Shape{1, 2, 8}, Shape{3, 4, 8}, Shape{2, 7, 8}}) {
    SCOPED_TRACE(shape_to_string(shape));
    const Tensor in = random_tensor(shape, 1);
    expect_close(runtime::ReferenceExecutor(g).run({in})[0], runtime::ReferenceExecutor(s).run({in})[0], 0, 0);
  }
}

TEST(SpecializeSymbolic, ATargetWithTwoUnknownElementsStaysComputed) {
  // [seq, batch, 8] from x [batch, seq, 8] (a swap, not a copy): neither element is the input's
  // dim at its place, and only one may be -1
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("batch"), Dim::sym("seq"), 8}));
  auto* target = g->add_node("Concat", {dim_of(*g, x, 1, "s"), dim_of(*g, x, 0, "b"), i64(*g, "w", {8})}, 1, "target");
  target->attrs["axis"] = ir::Attribute(int64_t{0});
  g->add_output(g->add_node("Reshape", {x, target->output(0)}, 1, "swap")->output(0));
  ir::infer_shapes(*g);
  auto s = g->clone();
  const auto r = transforms::specialize_symbolic(*s);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.static_reshapes, 0u);
  EXPECT_FALSE(s->find_node("swap")->input(1)->is_constant());
  EXPECT_EQ(count_op(*s, "Shape"), 2u);  // left for each shape's specialisation to fold
}

TEST(SpecializeSymbolic, ShapeElementsThatDoNotDependOnASymbolFold) {
  // Gather(Shape(x), 2) of x [batch, seq, 8] is 8 for every shape
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("batch"), Dim::sym("seq"), 8}));
  auto* width = dim_of(*g, x, 2, "w");
  auto* target = g->add_node("Concat", {i64(*g, "minus_one", {-1}), width}, 1, "target");
  target->attrs["axis"] = ir::Attribute(int64_t{0});
  g->add_output(g->add_node("Reshape", {x, target->output(0)}, 1, "r")->output(0));
  ir::infer_shapes(*g);
  const auto r = transforms::specialize_symbolic(*g);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_GE(r.folded_nodes, 1u);
  EXPECT_EQ(count_op(*g, "Shape"), 0u);
  EXPECT_EQ(g->find_node("r")->input(1)->constant().to_i64(), (std::vector<int64_t>{-1, 8}));
}

TEST(SpecializeSymbolic, DimsInferenceCannotNameGetSymbolsOfTheirOwn) {
  // a strided convolution's output width is a function of w no one named: it gets a symbol, which
  // the Relu after it shares (the same dim for every width), and the passes' own inference keeps
  // naming such dims
  auto g = make_graph();
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<Dim>{1, 2, 6, Dim::unknown()})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({4, 2, 3, 3}, 1))}, 1, "conv");
  c->attrs["strides"] = ir::Attribute(std::vector<int64_t>{2, 2});
  auto* relu = g->add_node("Relu", {c->output(0)}, 1, "relu");
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  const auto r = transforms::specialize_symbolic(*g);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.named_dims, 2u);  // the input's width, the convolution's
  const Dim in_w = g->inputs()[0]->type.shape.dims[3];
  const Dim conv_w = c->output(0)->type.shape.dims[3];
  EXPECT_TRUE(in_w.is_symbolic());
  EXPECT_TRUE(conv_w.is_symbolic());
  EXPECT_FALSE(in_w == conv_w);
  EXPECT_TRUE(relu->output(0)->type.shape.dims[3] == conv_w);
  EXPECT_TRUE(g->names_unknown_dims);
  ir::infer_shapes(*g);  // as a pass would
  EXPECT_TRUE(relu->output(0)->type.shape.dims[3].is_symbolic());
}

TEST(SpecializeSymbolic, ControlFlowIsRefusedWithTheReason) {
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("n")}));
  auto* cond = g->add_input("c", {DType::boolean, ir::PartialShape(Shape{})});
  auto branch = [&](const char* op) {
    auto b = std::make_shared<ir::Graph>();
    b->opset_imports[""] = 13;
    auto* bx = b->add_input("x", f32_type({Dim::sym("n")}));
    b->add_output(b->add_node(op, {bx}, 1, op)->output(0));
    return b;
  };
  auto* n = g->add_node("If", {cond, x}, 1, "if");
  n->attrs["then_branch"] = ir::Attribute(branch("Relu"));
  n->attrs["else_branch"] = ir::Attribute(branch("Neg"));
  n->attrs["kiln_captures"] = ir::Attribute(std::vector<std::string>{"x"});
  g->add_output(n->output(0));
  const auto r = transforms::specialize_symbolic(*g);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("'if'"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("control flow"), std::string::npos) << r.reason;
}

TEST(SpecializeSymbolic, ExecutorPlansEveryShapeFromOneTemplate) {
  // the template's plans compute what the reference does and fuse what per-shape plans fuse
  auto g = head_split_graph();
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  cpu::GraphOptions per_shape_options;
  per_shape_options.disabled_passes.insert(transforms::kSymbolicShapes);
  cpu::Executor per_shape(g, per_shape_options);
  for (const Shape& shape : {Shape{1, 2, 8}, Shape{1, 9, 8}, Shape{4, 3, 8}, Shape{1, 2, 8}}) {
    SCOPED_TRACE(shape_to_string(shape));
    const Tensor in = random_tensor(shape, 2);
    expect_close(ref.run({in})[0], ex.run({in})[0], 1e-6, 1e-6);
    const auto& a = ex.plan_for({shape});
    const auto& b = per_shape.plan_for({shape});
    ASSERT_TRUE(a.cpu && b.cpu);
    EXPECT_EQ(a.cpu->nodes().size(), b.cpu->nodes().size()) << a.cpu->describe() << "\n" << b.cpu->describe();
    EXPECT_TRUE(logged(a.log, transforms::kSymbolicShapes));
    EXPECT_FALSE(logged(b.log, transforms::kSymbolicShapes));
  }
  EXPECT_TRUE(ex.uses_ir_template());
  EXPECT_FALSE(per_shape.uses_ir_template());
  EXPECT_NE(per_shape.ir_template_reason().find("disabled"), std::string::npos) << per_shape.ir_template_reason();
  EXPECT_EQ(ex.cached_plans(), 3u);
}

TEST(SpecializeSymbolic, AnEmptyBatchGetsTheShapeTheModelComputes) {
  // batch 0: the template's -1 meets a tensor of 0 elements (rows = 0 * 3 whatever -1 infers
  // elsewhere); the output has the shape the model's own computed target gives, [0, 8]
  auto g = head_split_graph();
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  for (const Shape& shape : {Shape{2, 3, 8}, Shape{0, 3, 8}}) {
    SCOPED_TRACE(shape_to_string(shape));
    const Tensor in = random_tensor(shape, 3);
    const auto want = ref.run({in});
    const auto got = ex.run({in});
    ASSERT_EQ(want[0].shape(), got[0].shape());
    expect_close(want[0], got[0], 1e-6, 1e-6);
  }
  EXPECT_TRUE(ex.uses_ir_template());
}

TEST(SpecializeSymbolic, AModelWithDimsFixedInsideKeepsThePerShapeStages) {
  // inputs declared [batch, seq, 8], but a Reshape to the constant [1, 4, 8] inside: on symbols
  // the residual Add's operands differ ([batch, seq, 8] and [1, 4, 8]) and SkipLayerNormalization
  // does not fuse; at [1, 4, 8] they are equal and it does. The template fuses less, so the
  // executor drops it (once, on the first shapes) and says why.
  auto g = make_graph(17);
  auto* x = g->add_input("x", f32_type({Dim::sym("batch"), Dim::sym("seq"), 8}));
  auto* relu = g->add_node("Relu", {x}, 1, "relu");
  auto* fixed = g->add_node("Reshape", {relu->output(0), i64(*g, "fixed_shape", {1, 4, 8})}, 1, "fixed");
  auto* add = g->add_node("Add", {x, fixed->output(0)}, 1, "residual");
  auto* ln = g->add_node("LayerNormalization",
                         {add->output(0), g->add_constant("gamma", random_tensor({8}, 1)),
                          g->add_constant("beta", random_tensor({8}, 2))},
                         1, "ln");
  ln->attrs["axis"] = ir::Attribute(int64_t{-1});
  g->add_output(ln->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  const Tensor in = random_tensor({1, 4, 8}, 3);
  expect_close(ref.run({in})[0], ex.run({in})[0], 1e-5, 1e-5);
  EXPECT_FALSE(ex.uses_ir_template());
  EXPECT_NE(ex.ir_template_reason().find("fuses less"), std::string::npos) << ex.ir_template_reason();
  const auto& plan = ex.plan_for({{1, 4, 8}});
  ASSERT_TRUE(plan.cpu);
  EXPECT_EQ(count_type(*plan.cpu, "SkipLayerNorm"), 1u) << plan.cpu->describe();
}

TEST(SpecializeSymbolic, SliceSqueezeAndCastOfShapesAreFollowed) {
  // target = Concat(Cast(Slice(Shape(x), 0, 1)), Unsqueeze(Squeeze(Gather(Shape(x), [1]))), [2, 4])
  // of x [batch, seq, 8]: [batch, seq, 2, 4] again, reached through other ops
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("batch"), Dim::sym("seq"), 8}));
  auto* shape = g->add_node("Shape", {x}, 1, "shape");
  auto* head = g->add_node("Slice", {shape->output(0), i64(*g, "starts", {0}), i64(*g, "ends", {1})}, 1, "head");
  auto* cast = g->add_node("Cast", {head->output(0)}, 1, "cast");
  cast->attrs["to"] = ir::Attribute(int64_t{7});  // int64
  auto* second = g->add_node("Gather", {shape->output(0), i64(*g, "one", {1})}, 1, "second");
  auto* squeezed = g->add_node("Squeeze", {second->output(0), i64(*g, "sq_axes", {0})}, 1, "squeeze");
  auto* unsq = g->add_node("Unsqueeze", {squeezed->output(0), i64(*g, "unsq_axes", {0})}, 1, "unsqueeze");
  auto* target = g->add_node("Concat", {cast->output(0), unsq->output(0), i64(*g, "heads", {2, 4})}, 1, "target");
  target->attrs["axis"] = ir::Attribute(int64_t{0});
  g->add_output(g->add_node("Reshape", {x, target->output(0)}, 1, "split")->output(0));
  ir::infer_shapes(*g);
  auto s = g->clone();
  const auto r = transforms::specialize_symbolic(*s);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.static_reshapes, 1u);
  EXPECT_EQ(s->find_node("split")->input(1)->constant().to_i64(), (std::vector<int64_t>{0, 0, 2, 4}));
  EXPECT_EQ(count_op(*s, "Shape"), 0u);
  const Tensor in = random_tensor({3, 5, 8}, 4);
  expect_close(runtime::ReferenceExecutor(g).run({in})[0], runtime::ReferenceExecutor(s).run({in})[0], 0, 0);
}

// The Subgraph nodes of `g` and the bodies they run.
std::vector<const ir::Graph*> subgraph_bodies(const ir::Graph& g) {
  std::vector<const ir::Graph*> bodies;
  for (const ir::Node* n : g.nodes())
    if (snippets::is_subgraph(*n)) bodies.push_back(n->attr_graph(snippets::kBodyAttr).get());
  return bodies;
}

// A Subgraph node of x [N, 8, H, W] and a per-image scale s [N, 8, 1, 1] whose body,
// Sigmoid(x * s) and Relu(x), is typed `body_x`, `body_s` (as the tokenizer leaves it: the
// template's symbols, or one shape's numbers), with `out0` declared for its first output.
std::shared_ptr<ir::Graph> scaled_subgraph(std::vector<Dim> body_x, std::vector<Dim> body_s, std::vector<Dim> out0) {
  auto body = make_graph(13);
  auto* bx = body->add_input("bx", f32_type(std::move(body_x)));
  auto* bs = body->add_input("bs", f32_type(std::move(body_s)));
  auto* m = body->add_node("Mul", {bx, bs}, 1, "mul")->output(0);
  auto* y = body->add_node("Sigmoid", {m}, 1, "sig")->output(0);
  y->type = f32_type(std::move(out0));
  body->add_output(y);
  auto* r = body->add_node("Relu", {bx}, 1, "relu")->output(0);
  r->type = bx->type;
  body->add_output(r);
  auto g = make_graph(13);
  g->opset_imports["kiln"] = 1;
  auto* x = g->add_input("x", f32_type({Dim::sym("N"), 8, Dim::sym("H"), Dim::sym("W")}));
  auto* s = g->add_input("s", f32_type({Dim::sym("N"), 8, 1, 1}));
  ir::Node* n = g->add_node(snippets::kSubgraphOp, {x, s}, 2, "sub", snippets::kSubgraphDomain);
  n->attrs[snippets::kBodyAttr] = ir::Attribute(body);
  g->add_output(n->output(0));
  g->add_output(n->output(1));
  return g;
}

// The output types `g`'s inference gives for inputs x and s of these shapes.
std::vector<std::string> subgraph_output_types(const std::shared_ptr<ir::Graph>& g, const Shape& x, const Shape& s) {
  auto c = g->clone();
  c->inputs()[0]->type = {DType::f32, ir::PartialShape(x)};
  c->inputs()[1]->type = {DType::f32, ir::PartialShape(s)};
  ir::infer_shapes(*c);
  return {c->outputs()[0]->type.to_string(), c->outputs()[1]->type.to_string()};
}

TEST(SpecializeSymbolic, ASubgraphsOutputTypesAreRightForEveryShape) {
  // A new input shape's plan reads a template Subgraph's output shapes off its body's symbols;
  // where they do not say (another broadcast, a body of one static shape, a dim inference could
  // not name) the body is inferred: the types are the same either way.
  const Dim N = Dim::sym("N"), H = Dim::sym("H"), W = Dim::sym("W");
  auto symbolic = scaled_subgraph({N, 8, H, W}, {N, 8, 1, 1}, {N, 8, H, W});
  using V = std::vector<std::string>;
  EXPECT_EQ(subgraph_output_types(symbolic, {2, 8, 5, 7}, {2, 8, 1, 1}), (V{"f32[2,8,5,7]", "f32[2,8,5,7]"}));
  EXPECT_EQ(subgraph_output_types(symbolic, {1, 8, 30, 3}, {1, 8, 1, 1}), (V{"f32[1,8,30,3]", "f32[1,8,30,3]"}));
  // N broadcast from 1 in s: the body's N no longer one value
  EXPECT_EQ(subgraph_output_types(symbolic, {3, 8, 4, 4}, {1, 8, 1, 1}), (V{"f32[3,8,4,4]", "f32[3,8,4,4]"}));
  // a body typed for [1, 8, 4, 4] (one shape's tokenization), given [1, 8, 6, 6] and its own shape
  auto fixed = scaled_subgraph({1, 8, 4, 4}, {1, 8, 1, 1}, {1, 8, 4, 4});
  EXPECT_EQ(subgraph_output_types(fixed, {1, 8, 6, 6}, {1, 8, 1, 1}), (V{"f32[1,8,6,6]", "f32[1,8,6,6]"}));
  EXPECT_EQ(subgraph_output_types(fixed, {1, 8, 4, 4}, {1, 8, 1, 1}), (V{"f32[1,8,4,4]", "f32[1,8,4,4]"}));
  // an output dim of a symbol no input has (a dim inference could not compute)
  auto unnamed = scaled_subgraph({N, 8, H, W}, {N, 8, 1, 1}, {N, 8, Dim::sym("?1"), W});
  EXPECT_EQ(subgraph_output_types(unnamed, {2, 8, 9, 5}, {2, 8, 1, 1}), (V{"f32[2,8,9,5]", "f32[2,8,9,5]"}));
  // the template itself (symbolic inputs) is inferred as before
  auto t = symbolic->clone();
  ir::infer_shapes(*t);
  EXPECT_EQ(t->outputs()[0]->type.to_string(), "f32[N,8,H,W]");
}

TEST(SpecializeSymbolic, TheTemplateIsTokenizedOnceForEveryShape) {
  // Tanh(Sigmoid(x + y)) is a Subgraph; the MatMul's bias Add and Relu are its post-ops, which
  // MarkSkipped keeps out of Subgraphs (answered at the first shapes, where shapes are static).
  // From the second plan on, every plan runs the template's Subgraph: the same body object
  // (the first plan, made before the template was tokenized, keeps its own).
  auto g = make_graph(13);
  auto* x = g->add_input("x", f32_type({Dim::sym("n"), 8}));
  auto* y = g->add_input("y", f32_type({Dim::sym("n"), 8}));
  auto* add = g->add_node("Add", {x, y}, 1, "add");
  auto* sig = g->add_node("Sigmoid", {add->output(0)}, 1, "sig");
  auto* tanh = g->add_node("Tanh", {sig->output(0)}, 1, "tanh");
  auto* mm = g->add_node("MatMul", {tanh->output(0), g->add_constant("w", random_tensor({8, 16}, 1))}, 1, "mm");
  auto* bias = g->add_node("Add", {mm->output(0), g->add_constant("b", random_tensor({16}, 2))}, 1, "bias");
  auto* relu = g->add_node("Relu", {bias->output(0)}, 1, "relu");
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  cpu::GraphOptions per_shape_options;
  per_shape_options.disabled_passes.insert(cpu::kTemplateTokenization);
  cpu::Executor per_shape(g, per_shape_options);
  const size_t subgraphs = cpu::x64::best_isa() ? 1 : 0;  // no snippets target: nothing is tokenized
  const ir::Graph* shared_body = nullptr;
  int k = 0;
  for (const Shape& shape : {Shape{2, 8}, Shape{5, 8}, Shape{1, 8}, Shape{2, 8}}) {
    SCOPED_TRACE(shape_to_string(shape));
    const std::vector<Tensor> in = {random_tensor(shape, 3), random_tensor(shape, 4)};
    expect_close(ref.run(in)[0], ex.run(in)[0], 1e-5, 1e-5);
    expect_close(ref.run(in)[0], per_shape.run(in)[0], 1e-5, 1e-5);
    const auto& a = ex.plan_for({shape, shape});
    const auto& b = per_shape.plan_for({shape, shape});
    ASSERT_TRUE(a.cpu && b.cpu);
    EXPECT_EQ(a.cpu->nodes().size(), b.cpu->nodes().size()) << a.cpu->describe() << "\n" << b.cpu->describe();
    EXPECT_TRUE(a.graph->find_node("bias") && a.graph->find_node("relu"));  // left to the CPU optimizer
    const auto bodies = subgraph_bodies(*a.graph);
    ASSERT_EQ(bodies.size(), subgraphs);
    EXPECT_EQ(subgraph_bodies(*b.graph).size(), subgraphs);
    if (k++ == 0 || shape == Shape{2, 8}) continue;  // the first plan tokenized its own shapes
    EXPECT_TRUE(logged(a.log, cpu::kTemplateTokenization));
    if (!subgraphs) continue;
    if (!shared_body) shared_body = bodies[0];
    EXPECT_EQ(bodies[0], shared_body) << "a plan tokenized its own shapes";
    EXPECT_NE(subgraph_bodies(*b.graph)[0], shared_body);
  }
  EXPECT_TRUE(ex.tokenizes_once()) << ex.tokenize_once_reason();
  EXPECT_FALSE(per_shape.tokenizes_once());
  EXPECT_NE(per_shape.tokenize_once_reason().find("disabled"), std::string::npos) << per_shape.tokenize_once_reason();
}

TEST(SpecializeSymbolic, ATemplateTokenizedOtherwiseThanTheFirstShapesLeavesStage3PerShape) {
  // a [n, 8] + b [m, 8] alone: a kernel of its own when it broadcasts. On symbols n and m differ,
  // so the template's tokenizer makes it a Subgraph; at the first shapes (3 and 3) it is a plain
  // Add. The template's tokenization is dropped (with the difference named), and each shape
  // tokenizes its own: at n = 1, m = 4 the Add broadcasts and is a Subgraph.
  if (!cpu::x64::best_isa()) GTEST_SKIP() << "no snippets target for the ISA in use: nothing is tokenized at any shape";
  auto g = make_graph(13);
  auto* a = g->add_input("a", f32_type({Dim::sym("n"), 8}));
  auto* b = g->add_input("b", f32_type({Dim::sym("m"), 8}));
  auto* add = g->add_node("Add", {a, b}, 1, "add");
  g->add_output(add->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ref(g);
  cpu::Executor ex(g);
  for (const auto& [sa, sb, subgraphs] : {std::tuple{Shape{3, 8}, Shape{3, 8}, 0u}, std::tuple{Shape{1, 8}, Shape{4, 8}, 1u}}) {
    SCOPED_TRACE(shape_to_string(sa) + " + " + shape_to_string(sb));
    const std::vector<Tensor> in = {random_tensor(sa, 5), random_tensor(sb, 6)};
    expect_close(ref.run(in)[0], ex.run(in)[0], 1e-6, 1e-6);
    EXPECT_EQ(subgraph_bodies(*ex.plan_for({sa, sb}).graph).size(), subgraphs);
  }
  EXPECT_TRUE(ex.uses_ir_template()) << ex.ir_template_reason();
  EXPECT_FALSE(ex.tokenizes_once());
  EXPECT_NE(ex.tokenize_once_reason().find("differ"), std::string::npos) << ex.tokenize_once_reason();
  EXPECT_NE(ex.tokenize_once_reason().find("'add"), std::string::npos) << ex.tokenize_once_reason();
}

TEST(SpecializeSymbolic, RandomElementwiseGraphsTokenizedOnceMatchTheReferenceAtEveryShape) {
  // Random DAGs of elementwise ops over x, y [n, 8], a row r [1, 8] and constants ([8] and one
  // value), some through a MatMul whose bias Add and activation may become its post-ops: at
  // every n the executor (template tokenized once, or per shape where it says why not) computes
  // what the reference does, and agrees with an executor that tokenizes every shape.
  std::mt19937 rng(7);
  size_t once = 0;
  for (int seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE(seed);
    auto g = make_graph(13);
    std::vector<ir::Value*> vals = {g->add_input("x", f32_type({Dim::sym("n"), 8})),
                                    g->add_input("y", f32_type({Dim::sym("n"), 8})),
                                    g->add_input("r", f32_type({1, 8}))};
    int k = 0;
    auto name = [&](const char* op) { return std::string(op) + "_" + std::to_string(k++); };
    auto pick = [&](size_t from = 0) { return vals[from + rng() % (vals.size() - from)]; };
    const char* unary[] = {"Sigmoid", "Tanh", "Relu", "Abs", "Neg"};
    const char* binary[] = {"Add", "Mul", "Sub", "Max", "Min"};
    const int ops = 3 + static_cast<int>(rng() % 6);
    for (int i = 0; i < ops; ++i) {
      switch (rng() % 5) {
        case 0: {
          const char* op = unary[rng() % 5];
          vals.push_back(g->add_node(op, {pick()}, 1, name(op))->output(0));
          break;
        }
        case 1: {  // a per-column or a one-value constant
          const char* op = binary[rng() % 5];
          ir::Value* c = rng() % 2 ? g->add_constant(name("c"), random_tensor({8}, static_cast<uint32_t>(k)))
                                   : g->add_constant(name("s"), Tensor::scalar<float>(0.5f));
          vals.push_back(g->add_node(op, {pick(), c}, 1, name(op))->output(0));
          break;
        }
        case 2: {  // a MatMul, its bias and maybe an activation (post-ops where the CPU passes take them)
          ir::Value* mm = g->add_node("MatMul", {pick(), g->add_constant(name("w"), random_tensor({8, 8}, static_cast<uint32_t>(k), 0.3f))},
                                      1, name("MatMul"))->output(0);
          ir::Value* b = g->add_node("Add", {mm, g->add_constant(name("b"), random_tensor({8}, static_cast<uint32_t>(k)))},
                                     1, name("Add"))->output(0);
          vals.push_back(rng() % 2 ? g->add_node("Relu", {b}, 1, name("Relu"))->output(0) : b);
          break;
        }
        default: {  // two computed tensors (one may be the [1, 8] row: broadcasting)
          const char* op = binary[rng() % 5];
          vals.push_back(g->add_node(op, {pick(), pick()}, 1, name(op))->output(0));
          break;
        }
      }
    }
    g->add_output(vals.back());
    if (vals.size() > 4) g->add_output(vals[vals.size() - 2]);
    ir::infer_shapes(*g);
    runtime::ReferenceExecutor ref(g);
    cpu::GraphOptions per_shape_options;
    per_shape_options.disabled_passes.insert(cpu::kTemplateTokenization);
    cpu::Executor ex(g), per_shape(g, per_shape_options);
    for (int64_t n : {3, 1, 6, 3}) {
      SCOPED_TRACE(n);
      const std::vector<Tensor> in = {random_tensor({n, 8}, static_cast<uint32_t>(seed * 10 + 1)),
                                      random_tensor({n, 8}, static_cast<uint32_t>(seed * 10 + 2)),
                                      random_tensor({1, 8}, static_cast<uint32_t>(seed * 10 + 3))};
      const auto want = ref.run(in), got = ex.run(in), alone = per_shape.run(in);
      ASSERT_EQ(want.size(), got.size());
      for (size_t o = 0; o < want.size(); ++o) {
        expect_close(want[o], got[o], 1e-5, 1e-5);
        expect_close(alone[o], got[o], 1e-6, 1e-6);
      }
    }
    ASSERT_TRUE(ex.uses_ir_template()) << ex.ir_template_reason();
    if (ex.tokenizes_once()) ++once;
    else EXPECT_FALSE(ex.tokenize_once_reason().empty());
  }
  EXPECT_GT(once, 0u) << "no graph was tokenized once";
}

}  // namespace test_specialize_symbolic
