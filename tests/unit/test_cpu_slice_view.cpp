// SliceView: a Slice / Split / Gather of one index whose outputs are contiguous runs of the
// input's bytes runs as views (no copy, no kernel); SliceCopy: the others copy their runs (steps
// other than 1 and index tensors keep the reference kernel). Structure asserted, numerics
// against the reference executor.
#include <gtest/gtest.h>

#include "cpu/graph.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_slice_view {

using namespace kiln;
using namespace kiln::test;

namespace {

ir::Value* ints(ir::Graph& g, const std::string& name, std::vector<int64_t> v) {
  const Shape s{static_cast<int64_t>(v.size())};
  return g.add_constant(name, Tensor::from_vector<int64_t>(v, s));
}

ir::Value* input(ir::Graph& g, const Shape& s) {
  ir::ValueType t;
  t.dtype = DType::f32;
  t.shape = ir::PartialShape(s);
  return g.add_input("x", t);
}

// x -> Slice(starts, ends, axes[, steps]) -> Relu -> output
std::shared_ptr<ir::Graph> slice_then_relu(const Shape& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                                           std::vector<int64_t> axes, std::vector<int64_t> steps = {}) {
  auto g = make_graph(13);
  std::vector<ir::Value*> in = {input(*g, x), ints(*g, "starts", starts), ints(*g, "ends", ends), ints(*g, "axes", axes)};
  if (!steps.empty()) in.push_back(ints(*g, "steps", steps));
  auto* s = g->add_node("Slice", in, 1, "slice");
  auto* r = g->add_node("Relu", {s->output(0)}, 1, "relu");
  g->add_output(r->output(0));
  return g;
}

bool is_view(const cpu::Graph& g, const std::string& name) {
  const cpu::Node* n = find(g, name);
  return n && n->kind() == cpu::NodeKind::SliceView;
}

cpu::NodeKind kind_of(const cpu::Graph& g, const std::string& name) {
  const cpu::Node* n = find(g, name);
  EXPECT_NE(n, nullptr) << name;
  return n ? n->kind() : cpu::NodeKind::Reference;
}

// x -> Gather(one constant index, axis) -> Neg -> output
std::shared_ptr<ir::Graph> gather_then_neg(const Shape& x, const Tensor& index, int64_t axis) {
  auto g = make_graph(13);
  auto* gather = g->add_node("Gather", {input(*g, x), g->add_constant("index", index)}, 1, "gather");
  gather->attrs["axis"] = axis;
  g->add_output(g->add_node("Neg", {gather->output(0)}, 1, "neg")->output(0));
  return g;
}

}  // namespace

TEST(CpuSliceView, ContiguousSlicesAreViews) {
  struct Case {
    Shape x;
    std::vector<int64_t> starts, ends, axes;
    bool view;
  };
  const std::vector<Case> cases = {
      {{1, 116, 7, 5}, {58}, {116}, {1}, true},            // the second half of the channels (ShuffleNet)
      {{1, 116, 7, 5}, {0}, {58}, {1}, true},              // the first half
      {{1, 10, 7, 5}, {-4}, {1000}, {-3}, true},           // negative start, end past the dim
      {{1, 1, 9, 5}, {2}, {7}, {2}, true},                 // rows of one channel
      {{6, 4}, {1}, {5}, {0}, true},                       // rows of a matrix
      {{4, 8, 8}, {2}, {3}, {0}, true},                    // one of four images: a run past two
      {{4, 8, 8}, {2, 3}, {3, 5}, {0, 1}, true},           // rows 3-4 of image 2: one run still
      {{2, 16, 3, 3}, {0}, {8}, {1}, false},               // N = 2: two runs
      {{1, 16, 3, 3}, {0, 1}, {8, 3}, {1, 2}, false},      // two axes cut
      {{1, 16, 3, 3}, {0}, {2}, {3}, false},               // the innermost axis: strided
  };
  for (const Case& c : cases) {
    auto g = slice_then_relu(c.x, c.starts, c.ends, c.axes);
    auto cg = compare_with_reference(g, {random_tensor(c.x, 3)});
    EXPECT_EQ(is_view(*cg, "slice"), c.view) << shape_to_string(c.x) << " axes " << c.axes.at(0);
  }
}

TEST(CpuSliceView, StepsOtherThanOneStayOnTheReferenceKernel) {
  auto g = slice_then_relu({1, 16, 3, 3}, {0}, {16}, {1}, {2});
  auto cg = compare_with_reference(g, {random_tensor({1, 16, 3, 3}, 4)});
  EXPECT_EQ(kind_of(*cg, "slice"), cpu::NodeKind::Reference);
}

TEST(CpuSliceCopy, SlicesThatAreNoRunCopyTheirRuns) {
  struct Case {
    Shape x;
    std::vector<int64_t> starts, ends, axes;
  };
  const std::vector<Case> cases = {
      {{197, 2, 2304}, {768}, {1536}, {2}},        // the key third of a fused projection [L, N, 3E]
      {{197, 2, 2304}, {1536}, {INT64_MAX}, {-1}},  // the value third, to the end
      {{2, 16, 3, 3}, {0}, {8}, {1}},              // N = 2: two runs
      {{1, 16, 3, 3}, {0, 1}, {8, 3}, {1, 2}},     // two axes cut: runs of a row's last two
      {{1, 16, 3, 3}, {0}, {2}, {3}},              // the innermost axis: runs of 2
      {{3, 5, 7}, {-4, 1, 2}, {1000, 4, 6}, {0, 1, 2}},  // every axis cut, a negative start
      {{64, 4, 3072}, {100}, {2148}, {2}},         // 1.6 MiB: the runs shared by the team
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.x));
    auto g = slice_then_relu(c.x, c.starts, c.ends, c.axes);
    auto cg = compare_with_reference(g, {random_tensor(c.x, 3)});
    EXPECT_EQ(kind_of(*cg, "slice"), cpu::NodeKind::SliceCopy);
  }
}

TEST(CpuSliceCopy, SplitsAlongAnInnerAxisCopyEachPart) {
  // q, k, v of [L, N, 3E] split along the last axis, unevenly; int64 and uint8 elements as well
  for (DType t : {DType::f32, DType::i64, DType::u8}) {
    SCOPED_TRACE(dtype_name(t));
    auto g = make_graph(13);
    const Shape xs{9, 3, 20};
    auto* x = g->add_input("x", {t, ir::PartialShape(xs)});
    auto* split = g->add_node("Split", {x, ints(*g, "split", {8, 8, 4})}, 3, "split");
    split->attrs["axis"] = int64_t(-1);
    for (size_t i = 0; i < 3; ++i) g->add_output(split->output(i));
    Tensor in = t == DType::f32 ? random_tensor(xs, 9) : Tensor(t, xs);
    if (t != DType::f32)
      for (int64_t i = 0; i < in.size(); ++i) {
        if (t == DType::i64) static_cast<int64_t*>(in.raw())[i] = i * 7 - 300;
        else static_cast<uint8_t*>(in.raw())[i] = static_cast<uint8_t>(i * 13);
      }
    auto cg = compare_with_reference(g, {in});
    EXPECT_EQ(kind_of(*cg, "split"), cpu::NodeKind::SliceCopy);
  }
}

TEST(CpuSliceCopy, AGatherOfOneIndexIsAViewOrACopy) {
  // a ViT's class token: row 0 of [tokens, N, C], one run (a view); a column of every row (a
  // copy); a negative index; a one-element index tensor keeps the axis
  auto cg = compare_with_reference(gather_then_neg({197, 2, 16}, Tensor::scalar<int64_t>(0), 0), {random_tensor({197, 2, 16}, 1)});
  EXPECT_EQ(kind_of(*cg, "gather"), cpu::NodeKind::SliceView);
  cg = compare_with_reference(gather_then_neg({5, 6, 7}, Tensor::scalar<int64_t>(-2), 1), {random_tensor({5, 6, 7}, 2)});
  EXPECT_EQ(kind_of(*cg, "gather"), cpu::NodeKind::SliceCopy);
  cg = compare_with_reference(gather_then_neg({5, 6, 7}, Tensor::from_vector<int32_t>({3}, {1}), 2), {random_tensor({5, 6, 7}, 3)});
  EXPECT_EQ(kind_of(*cg, "gather"), cpu::NodeKind::SliceCopy);
  // several indices: the reference kernel
  cg = compare_with_reference(gather_then_neg({5, 6, 7}, Tensor::from_vector<int64_t>({3, 1}, {2}), 1), {random_tensor({5, 6, 7}, 4)});
  EXPECT_EQ(kind_of(*cg, "gather"), cpu::NodeKind::Reference);
}

// x -> Split(axis 1) into three; each part through its own op; Concat of them in another
// order: the parts alias x, and an op writing in place over x's buffer must wait until every
// part has been read.
TEST(CpuSliceView, SplitPartsAliasTheInputAndStayAliveWhileRead) {
  auto g = make_graph(13);
  const Shape xs{1, 48, 5, 4};
  ir::Value* x = input(*g, xs);
  auto* relu0 = g->add_node("Relu", {x}, 1, "relu0");  // a buffer of its own, in place candidate later
  auto* split = g->add_node("Split", {relu0->output(0), ints(*g, "split", {16, 8, 24})}, 3, "split");
  split->attrs["axis"] = int64_t(1);
  auto* a = g->add_node("Sigmoid", {split->output(0)}, 1, "a");
  auto* b = g->add_node("Neg", {split->output(1)}, 1, "b");
  auto* c = g->add_node("Abs", {split->output(2)}, 1, "c");
  auto* cat = g->add_node("Concat", {c->output(0), a->output(0), split->output(1), b->output(0)}, 1, "cat");
  cat->attrs["axis"] = int64_t(1);
  g->add_output(cat->output(0));
  g->add_output(split->output(2));  // a view that is a graph output
  auto cg = compare_with_reference(g, {random_tensor(xs, 5)});
  EXPECT_TRUE(is_view(*cg, "split"));
  EXPECT_EQ(find(*cg, "split")->type(), std::string("View"));
}

TEST(CpuSliceView, SplitOfAGraphInputAndUnevenBatchSplit) {
  {  // the parts view the caller's tensor
    auto g = make_graph(13);
    const Shape xs{1, 6, 4};
    auto* split = g->add_node("Split", {input(*g, xs), ints(*g, "split", {2, 4})}, 2, "split");
    split->attrs["axis"] = int64_t(1);
    auto* m = g->add_node("Mul", {split->output(0), split->output(0)}, 1, "m");
    g->add_output(m->output(0));
    g->add_output(split->output(1));
    auto cg = compare_with_reference(g, {random_tensor(xs, 6)});
    EXPECT_TRUE(is_view(*cg, "split"));
  }
  {  // along axis 0 every part is contiguous whatever the rest
    auto g = make_graph(13);
    const Shape xs{5, 3, 2};
    auto* split = g->add_node("Split", {input(*g, xs), ints(*g, "split", {1, 4})}, 2, "split");
    split->attrs["axis"] = int64_t(0);
    auto* e0 = g->add_node("Exp", {split->output(0)}, 1, "e0");
    auto* e1 = g->add_node("Exp", {split->output(1)}, 1, "e1");
    g->add_output(e0->output(0));
    g->add_output(e1->output(0));
    auto cg = compare_with_reference(g, {random_tensor(xs, 7)});
    EXPECT_TRUE(is_view(*cg, "split"));
  }
}

// x -> Relu (an arena buffer) -> Slice (a view at an offset) -> Relu, the last reader of
// the buffer: written in place, it writes over the slice's own bytes, not the buffer's start.
TEST(CpuSliceView, InPlaceConsumerWritesOverTheSlicesBytes) {
  auto g = make_graph(13);
  const Shape xs{1, 32, 64, 64};  // large enough for every thread to take a part
  auto* r0 = g->add_node("Relu", {input(*g, xs)}, 1, "r0");
  // channels [8, 24): in place at the buffer's start it would write over what another thread still reads
  auto* s = g->add_node("Slice", {r0->output(0), ints(*g, "starts", {8}), ints(*g, "ends", {24}), ints(*g, "axes", {1})},
                        1, "slice");
  auto* e = g->add_node("Exp", {s->output(0)}, 1, "exp");
  auto* n = g->add_node("Neg", {e->output(0)}, 1, "neg");
  g->add_output(n->output(0));
  auto cg = compare_with_reference(g, {random_tensor(xs, 8)});
  EXPECT_TRUE(is_view(*cg, "slice"));
  EXPECT_GE(cg->in_place_nodes(), 1u) << cg->describe();
  // written in place over exactly the slice's bytes
  EXPECT_EQ(find(*cg, "exp")->outputs[0]->data, find(*cg, "slice")->outputs[0]->data);
}

}  // namespace test_cpu_slice_view
