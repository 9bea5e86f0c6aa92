// FuseConcatAndBatchNorm (src/cpu/passes/fuse_concat_and_batch_norm.cpp): a BatchNormalization
// (with the ReLU it took) that alone reads a Concat's output is computed by the Concat while it
// copies, in every layout the Concat may write: channels-last rows (convolutions on AVX-512),
// plain rows (cut into pieces inside a channel when few and long), channel blocks with padding
// (convolutions below AVX-512: then after oneDNN's concat, in place). Each graph is checked
// against the reference executor with every pass on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu_test_util.hpp"

namespace test_cpu_fuse_concat_and_batch_norm {

using namespace kiln;
using namespace kiln::test;

namespace {

ir::Value* concat(ir::Graph& g, std::vector<ir::Value*> xs, int64_t axis, const std::string& name) {
  auto* c = g.add_node("Concat", std::move(xs), 1, name);
  c->attrs["axis"] = axis;
  return c->output(0);
}

// BatchNormalization over `c` channels with random statistics (seeded), then a ReLU when `relu`.
ir::Value* batch_norm(ir::Graph& g, ir::Value* x, int64_t c, uint32_t seed, const std::string& name, bool relu) {
  auto* bn = g.add_node("BatchNormalization",
                        {x, g.add_constant(name + "_s", random_tensor({c}, seed, 0.5f, 1.5f)),
                         g.add_constant(name + "_b", random_tensor({c}, seed + 1)),
                         g.add_constant(name + "_m", random_tensor({c}, seed + 2)),
                         g.add_constant(name + "_v", random_tensor({c}, seed + 3, 0.5f, 2.0f))},
                        1, name);
  ir::Value* y = bn->output(0);
  return relu ? g.add_node("Relu", {y}, 1, name + "_relu")->output(0) : y;
}

}  // namespace

// DenseNet's dense layers: each concatenates all features so far and normalises them. 24 and
// 40 channels: not whole blocks of 16 (or 8) where the convolutions write channel blocks.
TEST(CpuFuseConcatAndBatchNorm, DenseBlockNormalisesWhileConcatenating) {
  auto g = make_graph();
  const Shape xs{1, 8, 9, 11};
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
  ir::Value* f0 = conv3x3(*g, x, 8, 16, 3, "c0", 0.4f);
  ir::Value* f1 = conv3x3(*g, f0, 16, 8, 5, "c1", 0.4f);
  ir::Value* n1 = batch_norm(*g, concat(*g, {f0, f1}, 1, "cat1"), 24, 7, "bn1", true);
  ir::Value* f2 = conv3x3(*g, n1, 24, 16, 11, "c2", 0.3f);
  ir::Value* n2 = batch_norm(*g, concat(*g, {f0, f1, f2}, -3, "cat2"), 40, 13, "bn2", false);
  g->add_output(conv3x3(*g, n2, 40, 8, 17, "c3", 0.3f));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor(xs, 19)}, fusing(&log));

  EXPECT_EQ(log.count_applied("FuseConcatAndBatchNorm"), 2u) << explain(log);
  for (const char* gone : {"bn1", "bn1_relu", "bn2"}) EXPECT_EQ(find(*cg, gone), nullptr) << gone << "\n" << cg->describe();
  const cpu::Node* cat1 = find(*cg, "cat1");
  const cpu::Node* cat2 = find(*cg, "cat2");
  ASSERT_TRUE(cat1 && cat2) << cg->describe();
  EXPECT_EQ(cat1->fused, (std::vector<std::string>{"bn1", "bn1_relu"}));
  EXPECT_EQ(cat2->fused, std::vector<std::string>{"bn2"});
  for (const cpu::Node* c : {cat1, cat2}) {
    // channels-last rows (AVX-512) or whole channel blocks of 8 (below): copied with the affine
    EXPECT_EQ(c->impl, "rows_affine") << c->name << ": " << c->inputs[0]->layout_name() << "\n" << cg->describe();
    // the sources keep their own buffers: the next Concat reads them again
    EXPECT_NE(c->impl, "in_place");
  }
  EXPECT_EQ(count_type(*cg, "BatchNorm"), 0u) << cg->describe();
}

// Plain sources (graph inputs): rows of whole channels. Long channels with few rows are cut
// into 64 KiB pieces, which here end inside a channel; NaN stays NaN through the ReLU.
TEST(CpuFuseConcatAndBatchNorm, PlainRowsCutInsideAChannel) {
  for (const Shape& as : {Shape{2, 3, 4, 5}, Shape{1, 3, 150, 150}}) {
    SCOPED_TRACE(shape_to_string(as));
    Shape bs = as;
    bs[1] = 2;
    auto g = make_graph();
    auto* a = g->add_input("a", {DType::f32, ir::PartialShape(as)});
    auto* b = g->add_input("b", {DType::f32, ir::PartialShape(bs)});
    g->add_output(batch_norm(*g, concat(*g, {a, b}, 1, "cat"), 5, 23, "bn", true));
    Tensor ta = random_tensor(as, 29), tb = random_tensor(bs, 31);
    ta.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
    transforms::PassLog log;
    CompareOptions opt = fusing(&log);
    opt.match_nonfinite = true;
    auto cg = compare_with_reference(g, {ta, tb}, opt);
    EXPECT_EQ(log.count_applied("FuseConcatAndBatchNorm"), 1u) << explain(log);
    EXPECT_EQ(find(*cg, "cat")->impl, "rows_affine") << cg->describe();
    EXPECT_EQ(find(*cg, "cat")->fused, (std::vector<std::string>{"bn", "bn_relu"}));
  }
}

// Where the un-normalised tensor is needed, or the Concat is no copy along the channels, the
// BatchNormalization stays a node of its own, and the log says why.
TEST(CpuFuseConcatAndBatchNorm, LeftAloneWhereTheConcatOutputIsNeededOrNotAlongChannels) {
  const Shape xs{1, 4, 6, 6};
  auto g = make_graph();
  auto* a = g->add_input("a", {DType::f32, ir::PartialShape(xs)});
  auto* b = g->add_input("b", {DType::f32, ir::PartialShape(xs)});
  ir::Value* shared = concat(*g, {a, b}, 1, "shared");  // also a graph output
  g->add_output(batch_norm(*g, shared, 8, 37, "bn_shared", true));
  g->add_output(shared);
  ir::Value* read_twice = concat(*g, {b, a}, 1, "read_twice");
  g->add_output(batch_norm(*g, read_twice, 8, 41, "bn_twice", false));
  g->add_output(g->add_node("Neg", {read_twice}, 1, "neg")->output(0));
  g->add_output(batch_norm(*g, concat(*g, {a, b}, 2, "rows"), 4, 43, "bn_rows", true));  // along H
  g->add_output(batch_norm(*g, concat(*g, {a}, 1, "single"), 4, 47, "bn_single", false));
  transforms::PassLog log;
  auto cg = compare_with_reference(g, {random_tensor(xs, 53), random_tensor(xs, 59)}, fusing(&log));
  EXPECT_EQ(log.count_applied("FuseConcatAndBatchNorm"), 0u) << explain(log);
  for (const char* bn : {"bn_shared", "bn_twice", "bn_rows", "bn_single"}) EXPECT_NE(find(*cg, bn), nullptr) << bn;
  EXPECT_TRUE(log_has(log, false, "shared -> bn_shared: BatchNormalization not fused: shared's output is read by 2 nodes") ||
              log_has(log, false, "shared -> bn_shared: BatchNormalization not fused: shared's output is a graph output"))
      << explain(log);
  EXPECT_TRUE(log_has(log, false, "read_twice -> bn_twice: BatchNormalization not fused: read_twice's output is read by 2 nodes"))
      << explain(log);
  EXPECT_TRUE(log_has(log, false, "rows -> bn_rows: BatchNormalization not fused: the Concat does not join the channels"))
      << explain(log);
  EXPECT_TRUE(log_has(log, false, "single -> bn_single: BatchNormalization not fused: a Concat of one input is a view"))
      << explain(log);
}

// Channel-blocked sources of whole blocks (the convolutions' layout below AVX-512) are copied
// as one run per source and image, as channels-last rows are; a source of a part of a block
// leaves the copy to oneDNN. Without a BatchNormalization too.
TEST(CpuFuseConcatAndBatchNorm, WholeChannelBlocksAreCopiedAsRuns) {
  for (int64_t c2 : {16, 4}) {
    SCOPED_TRACE(c2);
    auto g = make_graph();
    const Shape xs{2, 8, 7, 9};
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    ir::Value* a = conv3x3(*g, x, 8, 16, 61, "ca", 0.4f);
    ir::Value* b = conv3x3(*g, x, 8, c2, 67, "cb", 0.4f);
    g->add_output(conv3x3(*g, concat(*g, {a, b}, 1, "cat"), 16 + c2, 8, 71, "cc", 0.3f));
    transforms::PassLog log;
    auto cg = compare_with_reference(g, {random_tensor(xs, 73)}, fusing(&log));
    const cpu::Node* cat = find(*cg, "cat");
    ASSERT_NE(cat, nullptr);
    const cpu::Edge* out = cat->outputs[0];
    const bool blocked = !out->is_plain() && out->desc().data.format_desc.blocking.inner_nblks == 1;
    if (c2 == 16) {  // whole blocks of 16, 8 or 4, or channels-last rows
      EXPECT_EQ(cat->impl, "rows") << out->layout_name() << "\n" << cg->describe();
    } else if (blocked && c2 % out->desc().data.format_desc.blocking.inner_blks[0] != 0) {  // part of a block
      EXPECT_NE(cat->impl.rfind("rows", 0), 0u) << out->layout_name() << "\n" << cg->describe();
    }
  }
}

// Where the row copy does not run, the Concat concatenates first and applies the affine over its
// output in place, in its layout: a source of part of a channel block (below AVX-512: blocks of
// 8 with padding lanes, which must stay zero for the next convolution) or a source in another
// layout than the rest (a plain graph input beside convolution outputs).
TEST(CpuFuseConcatAndBatchNorm, AppliedInPlaceWhereTheRowsAreNotCopied) {
  for (bool graph_input : {false, true}) {
    SCOPED_TRACE(graph_input ? "a graph input beside a convolution" : "4 channels beside 16");
    auto g = make_graph();
    const Shape xs{1, 4, 10, 7};
    auto* x = g->add_input("x", {DType::f32, ir::PartialShape(xs)});
    ir::Value* a = conv3x3(*g, x, 4, 16, 79, "ca", 0.4f);
    ir::Value* b = graph_input ? x : conv3x3(*g, x, 4, 4, 83, "cb", 0.4f);
    ir::Value* n = batch_norm(*g, concat(*g, {a, b}, 1, "cat"), 20, 89, "bn", true);
    g->add_output(conv3x3(*g, n, 20, 8, 97, "cc", 0.3f));
    transforms::PassLog log;
    auto cg = compare_with_reference(g, {random_tensor(xs, 101)}, fusing(&log));
    EXPECT_EQ(log.count_applied("FuseConcatAndBatchNorm"), 1u) << explain(log);
    const cpu::Node* cat = find(*cg, "cat");
    ASSERT_NE(cat, nullptr);
    EXPECT_NE(cat->impl.find("affine"), std::string::npos) << cat->impl;
    EXPECT_EQ(find(*cg, "bn"), nullptr);
  }
}

}  // namespace test_cpu_fuse_concat_and_batch_norm
