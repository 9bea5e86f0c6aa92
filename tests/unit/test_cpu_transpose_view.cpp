// Transpose as a view (src/cpu/nodes/transpose.cpp): where the input's bytes, read in the
// permuted dim order, are plain or channels-last, the output shares them and nothing is copied;
// elsewhere the data is copied once. Each graph is checked against the reference executor.
// Whether a convolution writes channels-last depends on the instruction set (channel blocks
// below AVX-512), so the expectations are read from the layouts the graph chose.
#include <gtest/gtest.h>

#include "cpu/dnnl_util.hpp"
#include "cpu/graph.hpp"
#include "cpu_test_util.hpp"

namespace test_cpu_transpose_view {

using namespace kiln;
using namespace kiln::test;

namespace {

ir::Value* transpose(ir::Graph& g, ir::Value* x, std::vector<int64_t> perm, const std::string& name) {
  auto* t = g.add_node("Transpose", {x}, 1, name);
  t->attrs["perm"] = std::move(perm);
  return t->output(0);
}

bool channels_last(const cpu::Edge& e) {
  const auto cl = cpu::channels_last_desc(e.shape, e.dtype);
  return cl && cpu::same_element_offsets(e.desc(), *cl);
}

// The reader of `n`'s output 0 reads the very edge `n` wrote: no Reorder between them.
bool reads_directly(const cpu::Node& reader, const cpu::Node& producer) {
  for (const cpu::Edge* e : reader.inputs)
    if (e == producer.outputs[0]) return true;
  return false;
}

}  // namespace

// ConvNeXt's block: convolution -> NHWC -> a per-pixel layer over the channels -> NCHW -> the
// residual sum and the next convolution. From a channels-last convolution output the first
// Transpose is a view (plain NHWC); the second always is (channels-last NCHW), and the Add
// and the next convolution read it where it is. A view as a graph output comes out plain.
TEST(CpuTransposeView, ConvNeXtBlockMovesNoBytesBetweenTheLayouts) {
  auto g = make_graph();
  const Shape xs{1, 8, 10, 12};
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
  ir::Value* y = conv3x3(*g, x, 8, 16, 3, "c1", 0.3f);
  ir::Value* nhwc = transpose(*g, y, {0, 2, 3, 1}, "to_nhwc");
  auto* w = g->add_constant("w", random_tensor({16, 16}, 5, 0.3f));
  ir::Value* fc = g->add_node("MatMul", {nhwc, w}, 1, "fc")->output(0);
  ir::Value* nchw = transpose(*g, fc, {0, 3, 1, 2}, "to_nchw");
  ir::Value* sum = g->add_node("Add", {nchw, y}, 1, "residual")->output(0);
  g->add_output(conv3x3(*g, sum, 16, 8, 7, "c2", 0.3f));
  g->add_output(nhwc);  // a view as a graph output
  auto cg = compare_with_reference(g, {random_tensor(xs, 9)});

  const cpu::Node* c1 = find(*cg, "c1");
  const cpu::Node* t1 = find(*cg, "to_nhwc");
  const cpu::Node* t2 = find(*cg, "to_nchw");
  ASSERT_TRUE(c1 && t1 && t2) << cg->describe();
  if (channels_last(*c1->outputs[0])) {
    EXPECT_EQ(t1->impl, "view") << cg->describe();
    EXPECT_TRUE(reads_directly(*t1, *c1)) << cg->describe();
    EXPECT_TRUE(t1->outputs[0]->is_plain());
  } else {
    EXPECT_NE(t1->impl, "view") << "a " << c1->outputs[0]->layout_name() << " input\n" << cg->describe();
  }
  // the MatMul writes plain NHWC: NCHW is then channels-last, a view again
  ASSERT_TRUE(t2->inputs[0]->is_plain()) << cg->describe();
  EXPECT_EQ(t2->impl, "view") << cg->describe();
  EXPECT_TRUE(channels_last(*t2->outputs[0])) << t2->outputs[0]->layout_name();
  if (channels_last(*c1->outputs[0])) {
    // the whole block in one layout: no Reorder but those of the graph's input and output
    const cpu::Edge* last = find(*cg, "c2")->outputs[0];
    for (auto& n : cg->nodes())
      if (std::string(n->type()) == "Reorder") {
        const bool at_the_boundary = n->inputs[0]->name == "x" || n->inputs[0] == last;
        EXPECT_TRUE(at_the_boundary) << n->name << "\n" << cg->describe();
      }
  }
}

// A view shares its input's bytes: a node after it may not write over them in place while
// the input is still read (here by the residual Add); where nothing reads them later, it may.
TEST(CpuTransposeView, InPlaceWritesRespectTheViewsSource) {
  for (bool read_later : {true, false}) {
    SCOPED_TRACE(read_later ? "source read later" : "source read once");
    auto g = make_graph();
    const Shape xs{1, 4, 6, 5};
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    ir::Value* y = conv3x3(*g, x, 4, 8, 11, "c1", 0.5f);
    ir::Value* t = transpose(*g, y, {0, 2, 3, 1}, "to_nhwc");
    ir::Value* r = g->add_node("Exp", {t}, 1, "exp")->output(0);
    ir::Value* back = transpose(*g, r, {0, 3, 1, 2}, "to_nchw");
    ir::Value* out = read_later ? g->add_node("Add", {back, y}, 1, "residual")->output(0) : back;
    g->add_output(conv3x3(*g, out, 8, 4, 13, "c2", 0.5f));
    compare_with_reference(g, {random_tensor(xs, 15)});
  }
}

// Permutations whose result is neither plain nor channels-last are copied; so is a Transpose
// of a blocked input. A graph input's channels-last view as a graph output, and a plain view
// of a graph input (moving a dim of size 1), come out plain and right.
TEST(CpuTransposeView, OtherPermutationsAreCopiedAndGraphInputsViewed) {
  auto g = make_graph();
  auto* a = g->add_input("a", {DType::f32, ir::PartialShape(Shape{2, 3, 4, 5})});
  auto* b = g->add_input("b", {DType::f32, ir::PartialShape(Shape{1, 1, 4, 5})});
  g->add_output(transpose(*g, a, {0, 2, 1, 3}, "heads"));  // BERT's head split: copied
  g->add_output(transpose(*g, a, {0, 3, 1, 2}, "cl"));     // channels-last view, output plain
  g->add_output(transpose(*g, b, {1, 0, 2, 3}, "unit"));   // plain view of a graph input
  g->add_output(transpose(*g, a, {3, 2, 1, 0}, "reverse"));
  auto cg = compare_with_reference(g, {random_tensor({2, 3, 4, 5}, 21), random_tensor({1, 1, 4, 5}, 22)});
  EXPECT_NE(find(*cg, "heads")->impl, "view");
  EXPECT_NE(find(*cg, "reverse")->impl, "view");
  EXPECT_EQ(find(*cg, "cl")->impl, "view");
  EXPECT_EQ(find(*cg, "unit")->impl, "view");

  // a channel-blocked convolution output (where the convolution chose one) is copied, once
  auto h = make_graph();
  auto* x = h->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 7, 7})});
  ir::Value* y = conv3x3(*h, x, 16, 32, 23, "conv", 0.2f);
  h->add_output(transpose(*h, y, {0, 2, 3, 1}, "t"));
  auto ch = compare_with_reference(h, {random_tensor({1, 16, 7, 7}, 24)});
  const cpu::Edge* conv_out = find(*ch, "conv")->outputs[0];
  EXPECT_EQ(find(*ch, "t")->impl == "view", conv_out->is_plain() || channels_last(*conv_out)) << ch->describe();
}

// 8-bit tensors (a quantized model's, between QuantizeLinear and its readers) are viewed alike:
// the channels-last view of a u8 input comes out plain and right, a copied permutation too.
TEST(CpuTransposeView, EightBitTensorsAreViewedAlike) {
  auto g = make_graph();
  const Shape xs{1, 4, 3, 5};
  auto* x = g->add_input("x", {DType::u8, ir::PartialShape(xs)});
  g->add_output(transpose(*g, x, {0, 3, 1, 2}, "cl"));
  g->add_output(transpose(*g, x, {0, 2, 1, 3}, "copied"));
  Tensor in(DType::u8, xs);
  for (int64_t i = 0; i < in.size(); ++i) in.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 + 3);
  auto cg = compare_with_reference(g, {in}, 0, 0);
  EXPECT_EQ(find(*cg, "cl")->impl, "view");
  EXPECT_NE(find(*cg, "copied")->impl, "view");
}

}  // namespace test_cpu_transpose_view
