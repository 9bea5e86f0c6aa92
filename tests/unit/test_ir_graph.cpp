// ir::Graph: construction, topological order, the mutation API passes use, the
// printer, and static shape inference with symbolic dims.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <utility>

#include "core/pointer_map.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"
#include "ir/printer.hpp"
#include "runtime/reference_executor.hpp"

namespace test_ir_graph {

using namespace kiln;

namespace {

ir::ValueType f32(std::vector<ir::Dim> dims) { return {DType::f32, ir::PartialShape(std::move(dims))}; }

std::vector<std::string> op_order(const ir::Graph& g) {
  std::vector<std::string> out;
  for (ir::Node* n : g.topo_order()) out.push_back(n->name());
  return out;
}

std::vector<float> run1(const std::shared_ptr<ir::Graph>& g, const std::vector<Tensor>& in) {
  runtime::ReferenceExecutor ex(g);
  Tensor y = ex.run(in).at(0);
  return std::vector<float>(y.data<float>(), y.data<float>() + y.size());
}

}  // namespace

TEST(IrGraph, TopologicalOrderIgnoresInsertionOrder) {
  ir::Graph g;
  auto* x = g.add_input("x", f32({2}));
  // create the consumer first, then its producer, then wire them
  auto* relu = g.add_node("Relu", {}, 1, "relu");
  auto* neg = g.add_node("Neg", {x}, 1, "neg");
  g.append_node_input(relu, neg->output(0));
  g.add_output(relu->output(0));
  EXPECT_EQ(op_order(g), (std::vector<std::string>{"neg", "relu"}));
  EXPECT_EQ(neg->output(0)->uses().size(), 1u);
  EXPECT_EQ(neg->output(0)->uses()[0].node, relu);
}

TEST(IrGraph, CycleIsAnError) {
  ir::Graph g;
  auto* a = g.add_node("Relu", {}, 1, "a");
  auto* b = g.add_node("Relu", {a->output(0)}, 1, "b");
  g.append_node_input(a, b->output(0));
  g.add_output(b->output(0));
  EXPECT_THROW(g.topo_order(), Error);
}

TEST(IrGraph, DuplicateValueNameIsAnError) {
  ir::Graph g;
  g.add_input("x", f32({1}));
  EXPECT_THROW(g.add_input("x", f32({1})), Error);
}

TEST(IrGraph, RewireReplaceAllUsesAndErase) {
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", f32({3}));
  auto* neg = g->add_node("Neg", {x}, 1, "neg");
  auto* relu = g->add_node("Relu", {neg->output(0)}, 1, "relu");
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  Tensor in = Tensor::from_vector<float>({-1, 2, -3}, {3});
  EXPECT_EQ(run1(g, {in}), (std::vector<float>{1, 0, 3}));

  // rewire one consumer: relu now reads x directly; neg becomes dead and can be erased
  g->set_node_input(relu, 0, x);
  EXPECT_TRUE(neg->output(0)->uses().empty());
  EXPECT_EQ(x->uses().size(), 2u);
  g->erase_node(neg);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(run1(g, {in}), (std::vector<float>{0, 2, 0}));

  // insert a node between x and relu, then route every use of x through it
  auto* abs = g->add_node("Abs", {x}, 1, "abs");
  g->replace_all_uses(x, abs->output(0));
  g->set_node_input(abs, 0, x);  // replace_all_uses also rewired abs itself
  ir::infer_shapes(*g);
  EXPECT_EQ(op_order(*g), (std::vector<std::string>{"abs", "relu"}));
  EXPECT_EQ(run1(g, {in}), (std::vector<float>{1, 2, 3}));
}

TEST(IrGraph, EraseRefusesANodeWhoseOutputIsUsed) {
  ir::Graph g;
  auto* x = g.add_input("x", f32({1}));
  auto* a = g.add_node("Relu", {x}, 1, "a");
  g.add_output(a->output(0));
  EXPECT_THROW(g.erase_node(a), Error);
}

TEST(IrGraph, ReplaceNodeKeepsNameAndMovesUses) {
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", f32({2}));
  auto* a = g->add_node("Relu", {x}, 1, "act");
  auto* b = g->add_node("Neg", {a->output(0)}, 1, "neg");
  g->add_output(b->output(0));
  ir::Node* s = g->replace_node(a, "Sigmoid", {x});
  EXPECT_EQ(s->name(), "act");
  EXPECT_EQ(b->input(0), s->output(0));
  EXPECT_EQ(g->num_nodes(), 2u);
  ir::infer_shapes(*g);
  auto y = run1(g, {Tensor::from_vector<float>({0, 0}, {2})});
  EXPECT_FLOAT_EQ(y[0], -0.5f);
}

TEST(IrGraph, RemoveDeadDropsUnusedNodesAndConstants) {
  ir::Graph g;
  auto* x = g.add_input("x", f32({2}));
  auto* c = g.add_constant("c", Tensor::from_vector<float>({1, 2}, {2}));
  auto* dead = g.add_node("Add", {x, c}, 1, "dead");
  auto* live = g.add_node("Relu", {x}, 1, "live");
  g.add_node("Neg", {dead->output(0)}, 1, "dead2");
  g.add_output(live->output(0));
  g.remove_dead();
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.find_node("live"), live);
  EXPECT_EQ(g.find_value("c"), nullptr);
  (void)c;
}

// A clone builds its name indexes on first use: edits made before any lookup (a node replaced,
// dead ones removed, nodes added) must show in the lookups after, and leave the original's alone.
TEST(IrGraph, ACloneFindsNamesAfterEditsMadeBeforeAnyLookup) {
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", f32({2}));
  auto* c = g->add_constant("c", Tensor::from_vector<float>({1, 2}, {2}));
  auto* act = g->add_node("Relu", {x}, 1, "act");
  auto* dead = g->add_node("Add", {x, c}, std::vector<std::string>{"dead_out"}, "dead");
  auto* neg = g->add_node("Neg", {act->output(0)}, 1, "neg");
  g->add_output(neg->output(0));
  (void)dead;

  std::shared_ptr<ir::Graph> k = g->clone();
  ir::Node* kact = nullptr;
  for (ir::Node* n : k->nodes())
    if (n->name() == "act") kact = n;
  ASSERT_NE(kact, nullptr);
  ir::Node* sig = k->replace_node(kact, "Sigmoid", {k->inputs()[0]});  // before any lookup
  k->remove_dead();                                                    // drops "dead" and "c"
  ir::Node* extra = k->add_node("Relu", {k->outputs()[0]}, 1);        // a generated name
  EXPECT_EQ(k->find_node("act"), sig);
  EXPECT_EQ(k->find_node("dead"), nullptr);
  EXPECT_EQ(k->find_value("dead_out"), nullptr);
  EXPECT_EQ(k->find_value("c"), nullptr);
  EXPECT_EQ(k->find_node(extra->name()), extra);
  EXPECT_EQ(k->find_value(extra->output(0)->name()), extra->output(0));
  EXPECT_EQ(k->find_value("x"), k->inputs()[0]);
  EXPECT_NE(k->unique_name("act"), "act");
  EXPECT_THROW(k->add_input("x", f32({2})), Error);  // the name is taken in the copy too

  // the original: its own nodes and values under the same names
  EXPECT_EQ(g->find_node("act"), act);
  EXPECT_EQ(g->find_node("dead"), dead);
  EXPECT_EQ(g->find_value("c"), c);
  EXPECT_EQ(g->find_node(extra->name()), nullptr);
  EXPECT_EQ(act->op_type(), "Relu");
  EXPECT_EQ(g->num_nodes(), 3u);
}

// A clone checks new names against the names it was made with and those added since, without
// building its name indexes (a new input shape's plan folds constants into a copy of the
// template); the answers are the indexed graph's.
TEST(IrGraph, ACloneNamesNewValuesWithoutItsIndexesAsWithThem) {
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", f32({2}));
  auto* c = g->add_constant("c", Tensor::from_vector<float>({1, 2}, {2}));
  auto* add = g->add_node("Add", {x, c}, std::vector<std::string>{"sum_0"}, "add");
  auto* unused = g->add_constant("unused", Tensor::from_vector<float>({3}, {1}));
  g->add_output(add->output(0));
  (void)unused;

  std::shared_ptr<ir::Graph> k = g->clone();
  k->remove_dead();  // drops "unused"
  std::set<std::string> given;
  for (int i = 0; i < 4; ++i) {
    const std::string n = k->unique_name("sum");  // "sum_0" is the template's: never handed out
    EXPECT_NE(n, "sum_0");
    EXPECT_TRUE(given.insert(n).second) << n;
    k->add_constant(n, Tensor::from_vector<float>({float(i)}, {1}));
  }
  EXPECT_THROW(k->add_constant("x", Tensor::from_vector<float>({1}, {1})), Error);  // the copy's own
  EXPECT_THROW(k->add_constant(*given.begin(), Tensor::from_vector<float>({1}, {1})), Error);  // added since
  ir::Value* again = k->add_constant("unused", Tensor::from_vector<float>({4}, {1}));  // gone from the copy: free
  ir::Node* n = k->add_node("Neg", {k->outputs()[0]}, 1);
  EXPECT_EQ(k->find_value("unused"), again);
  EXPECT_EQ(k->find_node(n->name()), n);
  for (const std::string& name : given) EXPECT_NE(k->find_value(name), nullptr) << name;
  EXPECT_NE(k->find_value("sum_0"), nullptr);

  // a copy of the copy takes its names, added ones included
  std::shared_ptr<ir::Graph> kk = k->clone();
  EXPECT_THROW(kk->add_constant(*given.rbegin(), Tensor::from_vector<float>({1}, {1})), Error);
  EXPECT_EQ(given.count(kk->unique_name("sum")), 0u);

  // a name the original gains after a first copy is taken in the next copy
  g->add_constant("late", Tensor::from_vector<float>({5}, {1}));
  std::shared_ptr<ir::Graph> k2 = g->clone();
  EXPECT_THROW(k2->add_constant("late", Tensor::from_vector<float>({1}, {1})), Error);
  EXPECT_EQ(g->find_value("c"), c);
}

// A clone shares its nodes' attribute maps with the original until either writes.
TEST(IrGraph, ACloneAndItsOriginalWriteAttributesApart) {
  auto g = std::make_shared<ir::Graph>();
  auto* x = g->add_input("x", f32({1, 1, 4, 4}));
  ir::Node* pool = g->add_node("MaxPool", {x}, 1, "pool");
  pool->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  g->add_output(pool->output(0));
  std::shared_ptr<ir::Graph> k = g->clone();
  ir::Node* kpool = k->find_node("pool");
  ASSERT_NE(kpool, nullptr);
  EXPECT_EQ(std::as_const(*kpool).attr_ints("kernel_shape"), (std::vector<int64_t>{2, 2}));

  kpool->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};  // the copy writes
  kpool->attrs["strides"] = std::vector<int64_t>{2, 2};
  EXPECT_EQ(pool->attr_ints("kernel_shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(pool->has_attr("strides"));

  std::shared_ptr<ir::Graph> k2 = g->clone();
  pool->attrs.erase("kernel_shape");  // the original writes
  EXPECT_EQ(k2->find_node("pool")->attr_ints("kernel_shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(kpool->attr_ints("kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(kpool->attrs.size(), 2u);

  // erasing by an iterator taken while the map was shared leaves the other owner's whole
  std::shared_ptr<ir::Graph> k3 = k->clone();
  ir::Node* k3pool = k3->find_node("pool");
  const ir::AttrMap& shared = k3pool->attrs;
  k3pool->attrs.erase(shared.find("strides"));
  EXPECT_FALSE(k3pool->has_attr("strides"));
  EXPECT_TRUE(kpool->has_attr("strides"));
}

TEST(PointerMap, FindsEveryKeyAcrossGrowthAndReplacesValues) {
  std::vector<std::unique_ptr<int>> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back(std::make_unique<int>(i));
  PointerMap<int, int> m(2);  // grows many times
  for (auto& k : keys) m.set(k.get(), *k);
  EXPECT_EQ(m.size(), 1000u);
  for (auto& k : keys) {
    const int* v = m.find(k.get());
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, *k);
  }
  m.set(keys[7].get(), -7);
  EXPECT_EQ(*m.find(keys[7].get()), -7);
  EXPECT_EQ(m.size(), 1000u);
  int other = 0;
  EXPECT_EQ(m.find(&other), nullptr);
}

TEST(IrGraph, SymbolicDimsPropagateThroughInference) {
  ir::Graph g;
  auto* x = g.add_input("x", f32({ir::Dim::sym("batch"), 8}));
  auto* w = g.add_constant("w", Tensor(DType::f32, {8, 4}));
  auto* mm = g.add_node("MatMul", {x, w}, 1, "mm");
  auto* r = g.add_node("Relu", {mm->output(0)}, 1, "relu");
  g.add_output(r->output(0));
  ir::infer_shapes(g);
  EXPECT_EQ(r->output(0)->type.to_string(), "f32[batch,4]");
}

TEST(IrGraph, ValidationNamesTheNode) {
  ir::Graph g;
  auto* x = g.add_input("x", f32({2}));
  auto* n = g.add_node("Relu", {x, x}, 1, "two_inputs");
  g.add_output(n->output(0));
  try {
    ir::infer_shapes(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two_inputs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inputs"), std::string::npos) << e.what();
  }
}

TEST(IrGraph, PrinterShowsTypesAttributesAndConstants) {
  ir::Graph g;
  g.name = "demo";
  g.opset_imports[""] = 13;
  auto* x = g.add_input("x", f32({ir::Dim::sym("n"), 3}));
  auto* c = g.add_constant("alpha_c", Tensor::from_vector<float>({0.5f}, {1}));
  auto* m = g.add_node("Mul", {x, c}, std::vector<std::string>{"y"}, "mul_1");
  auto* l = g.add_node("LeakyRelu", {m->output(0)}, std::vector<std::string>{"z"}, "lrelu_1");
  l->attrs["alpha"] = 0.25f;
  g.add_output(l->output(0));
  ir::infer_shapes(g);
  std::string s = ir::graph_to_string(g);
  EXPECT_NE(s.find("graph demo (ai.onnx v13)"), std::string::npos) << s;
  EXPECT_NE(s.find("input  %x: f32[n,3]"), std::string::npos) << s;
  EXPECT_NE(s.find("%y: f32[n,3] = Mul[mul_1](%x, %alpha_c=const f32[1] {0.5})"), std::string::npos) << s;
  EXPECT_NE(s.find("LeakyRelu[lrelu_1, alpha=0.25]"), std::string::npos) << s;
  EXPECT_NE(s.find("output %z: f32[n,3]"), std::string::npos) << s;
}

TEST(IrGraph, ExecutorBindsSymbolsConsistently) {
  auto g = std::make_shared<ir::Graph>();
  auto* a = g->add_input("a", f32({ir::Dim::sym("n")}));
  auto* b = g->add_input("b", f32({ir::Dim::sym("n")}));
  auto* s = g->add_node("Add", {a, b}, 1, "add");
  g->add_output(s->output(0));
  ir::infer_shapes(*g);
  runtime::ReferenceExecutor ex(g);
  EXPECT_NO_THROW(ex.run({Tensor(DType::f32, {4}), Tensor(DType::f32, {4})}));
  EXPECT_NO_THROW(ex.run({Tensor(DType::f32, {7}), Tensor(DType::f32, {7})}));
  EXPECT_THROW(ex.run({Tensor(DType::f32, {4}), Tensor(DType::f32, {5})}), Error);
}

TEST(Tensor, WrapDoesNotCopyAndReshapedAliases) {
  std::vector<float> buf = {1, 2, 3, 4};
  Tensor t = Tensor::wrap(DType::f32, {2, 2}, buf.data());
  buf[0] = 9;
  EXPECT_FLOAT_EQ(t.data<float>()[0], 9);
  Tensor r = t.reshaped({4});
  EXPECT_EQ(r.raw(), t.raw());
  EXPECT_THROW(t.reshaped({3}), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
  EXPECT_THROW(Tensor(DType::f32, {-1}), Error);
}

TEST(DType, HalfAndBfloatRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(static_cast<float>(float16(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(static_cast<float>(float16(1e6f))));
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f)), 1.0f);
  EXPECT_EQ(bfloat16::from_float(1.00390625f), 0x3f80);  // tie rounds to even
  EXPECT_EQ(std::string(dtype_name(DType::boolean)), "bool");
  EXPECT_EQ(dtype_from_name("f16"), DType::f16);
  EXPECT_THROW(dtype_from_name("complex64"), Error);
}

// PartialShape::elements() is shape_size(to_shape()) without the Shape: the same count, the same
// error past 2^58 elements (a zero dim does not hide the others' overflow), and a throw when
// the shape is not static.
TEST(PartialShape, ElementsCountsAsShapeSize) {
  const int64_t big = int64_t(1) << 40;
  for (const Shape& s : std::vector<Shape>{{}, {7}, {2, 3, 4}, {0}, {3, 0, 5}, {1, big}}) {
    SCOPED_TRACE(shape_to_string(s));
    EXPECT_EQ(ir::PartialShape(s).elements(), shape_size(s));
  }
  for (const Shape& s : std::vector<Shape>{{big, big}, {0, big, big}, {big, big, 0}}) {
    SCOPED_TRACE(shape_to_string(s));
    EXPECT_THROW(shape_size(s), Error);
    EXPECT_THROW(ir::PartialShape(s).elements(), Error);
  }
  EXPECT_THROW(ir::PartialShape({ir::Dim(2), ir::Dim::sym("n")}).elements(), Error);
}

}  // namespace test_ir_graph
