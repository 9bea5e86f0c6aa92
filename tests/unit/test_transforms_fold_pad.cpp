// FoldPadIntoConvolution: a zero Pad on spatial dims goes into the pads of the Conv /
// AveragePool after it (one that pads itself only with count_include_pad = 1), a -inf Pad into
// a MaxPool; anything else stays.
#include <gtest/gtest.h>

#include <limits>

#include "transforms/fold_pad.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_fold_pad {

using namespace kiln;
using namespace kiln::test;
using transforms::fold_pad;
using transforms::kFoldPadIntoConvolution;
using transforms::PassLog;

namespace {

// x [1,2,5,6] -> Pad(pads, value) -> consumer -> output.
struct PadGraph {
  std::shared_ptr<ir::Graph> g = new_graph();
  ir::Node* pad = nullptr;
  ir::Node* consumer = nullptr;
  PadGraph(std::vector<int64_t> pads, const std::string& op, float value = 0, bool value_input = true) {
    ir::Value* x = g->add_input("x", f32_type({1, 2, 5, 6}));
    std::vector<ir::Value*> in{x, g->add_constant("pads", Tensor::from_vector<int64_t>(pads, {8}))};
    if (value_input) in.push_back(g->add_constant("value", f32_filled({}, value)));
    pad = g->add_node("Pad", in, 1, "pad");
    std::vector<ir::Value*> cin{pad->output(0)};
    if (op == "Conv") cin.push_back(g->add_constant("w", rand_f32({3, 2, 3, 3}, 7)));
    consumer = g->add_node(op, cin, 1, op == "Conv" ? "conv" : "pool");
    if (op != "Conv") consumer->attrs["kernel_shape"] = ir::Attribute(std::vector<int64_t>{3, 2});
    g->add_output(consumer->output(0));
  }
  // Runs the pass, expecting `n` folds, and compares with the unfolded graph.
  void run(size_t n, PassLog& log) {
    ir::infer_shapes(*g);
    auto before = g->clone();
    EXPECT_EQ(fold_pad(*g, &log), n);
    EXPECT_EQ(count_op(*g, "Pad"), 1u - n);
    expect_same_outputs(before, g, {rand_f32({1, 2, 5, 6}, 3, -2, 2)});
  }
};

}  // namespace

TEST(TransformsFoldPad, PadIntoConv) {
  PadGraph t({0, 0, 1, 2, 0, 0, 2, 1}, "Conv");
  t.consumer->attrs["pads"] = ir::Attribute(std::vector<int64_t>{1, 1, 1, 1});
  t.consumer->attrs["strides"] = ir::Attribute(std::vector<int64_t>{2, 1});
  PassLog log;
  t.run(1, log);
  EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{2, 3, 3, 2}));
  EXPECT_EQ(t.consumer->input(0)->name(), "x");
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_TRUE(log.entries[0].applied);
  EXPECT_EQ(log.entries[0].where, "pad -> conv");
  EXPECT_EQ(log.entries[0].message, "Pad folded into the Conv: pads [2,3,3,2]");
}

TEST(TransformsFoldPad, PadWithoutValueIntoConvWithoutPadsAndIntoValidConv) {
  {
    PadGraph t({0, 0, 1, 0, 0, 0, 0, 1}, "Conv", 0, false);
    PassLog log;
    t.run(1, log);
    EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{1, 0, 0, 1}));
  }
  {
    PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "Conv");
    t.consumer->attrs["auto_pad"] = ir::Attribute(std::string("VALID"));
    PassLog log;
    t.run(1, log);
    EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_FALSE(t.consumer->has_attr("auto_pad"));
  }
}

TEST(TransformsFoldPad, OldOpsetPadAttributes) {
  auto g = new_graph(9);
  ir::Value* x = g->add_input("x", f32_type({1, 2, 4, 4}));
  ir::Node* pad = g->add_node("Pad", {x}, 1, "pad");
  pad->attrs["pads"] = ir::Attribute(std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1});
  ir::Node* c = g->add_node("Conv", {pad->output(0), g->add_constant("w", rand_f32({2, 2, 3, 3}, 8))}, 1, "conv");
  g->add_output(c->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fold_pad(*g, &log), 1u);
  expect_same_outputs(before, g, {rand_f32({1, 2, 4, 4}, 9)});
}

TEST(TransformsFoldPad, NonZeroValueIsSkipped) {
  PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "Conv", 1.5f);
  PassLog log;
  t.run(0, log);
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_FALSE(log.entries[0].applied);
  EXPECT_EQ(log.entries[0].where, "pad -> conv");
  EXPECT_EQ(log.entries[0].message, "Pad not folded: Conv pads with 0 but the Pad's value is 1.5");
}

TEST(TransformsFoldPad, ZeroPadIntoMaxPoolIsSkipped) {
  PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "MaxPool");
  PassLog log;
  t.run(0, log);
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_EQ(log.entries[0].message, "Pad not folded: MaxPool pads with -inf but the Pad's value is 0");
}

TEST(TransformsFoldPad, MinusInfPadIntoMaxPool) {
  PadGraph t({0, 0, 2, 1, 0, 0, 0, 1}, "MaxPool", -std::numeric_limits<float>::infinity());
  PassLog log;
  t.run(1, log);
  EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{2, 1, 0, 1}));
}

TEST(TransformsFoldPad, AveragePoolCountsThePadsZeros) {
  {  // count_include_pad = 1: its own padding and the Pad's both count
    PadGraph t({0, 0, 1, 0, 0, 0, 1, 2}, "AveragePool");
    t.consumer->attrs["count_include_pad"] = ir::Attribute(int64_t{1});
    t.consumer->attrs["pads"] = ir::Attribute(std::vector<int64_t>{0, 1, 0, 1});
    PassLog log;
    t.run(1, log);
    EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 3}));
  }
  {  // count_include_pad = 0 and no padding of its own (torchvision's Inception-v3): every window
     // is whole, so the folded pool counts the Pad's zeros (count_include_pad becomes 1)
    for (const char* explicit_pads : {"absent", "zeros", "VALID"}) {
      PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "AveragePool");
      if (std::string(explicit_pads) == "zeros") t.consumer->attrs["pads"] = ir::Attribute(std::vector<int64_t>{0, 0, 0, 0});
      if (std::string(explicit_pads) == "VALID") t.consumer->attrs["auto_pad"] = ir::Attribute(std::string("VALID"));
      PassLog log;
      t.run(1, log);  // (compares the outputs with the unfolded graph's)
      EXPECT_EQ(t.consumer->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1})) << explicit_pads;
      EXPECT_EQ(t.consumer->attr_i("count_include_pad"), 1) << explicit_pads;
    }
  }
  {  // count_include_pad = 0 with padding of its own: its padding must not count, the Pad's must
    PadGraph t({0, 0, 1, 0, 0, 0, 1, 2}, "AveragePool");
    t.consumer->attrs["pads"] = ir::Attribute(std::vector<int64_t>{0, 1, 0, 1});
    PassLog log;
    t.run(0, log);
    ASSERT_EQ(log.entries.size(), 1u);
    EXPECT_EQ(log.entries[0].message,
              "Pad not folded: the AveragePool pads itself with count_include_pad = 0 (its padding would not count in "
              "the average, the Pad's would)");
  }
}

TEST(TransformsFoldPad, OtherSkipReasons) {
  struct Case {
    std::vector<int64_t> pads;
    std::string message;
  };
  for (const Case& c : {Case{{0, 1, 1, 1, 0, 0, 1, 1}, "Pad not folded: it pads the batch or channel dim (pads [0,1,1,1,0,0,1,1])"},
                        Case{{0, 0, -1, 1, 0, 0, 1, 1}, "Pad not folded: it has negative pads [0,0,-1,1,0,0,1,1] (a crop)"}}) {
    PadGraph t(c.pads, "AveragePool");  // (a Conv would not take the padded channels)
    t.consumer->attrs["count_include_pad"] = ir::Attribute(int64_t{1});
    PassLog log;
    t.run(0, log);
    ASSERT_EQ(log.entries.size(), 1u);
    EXPECT_EQ(log.entries[0].message, c.message);
  }
  {
    PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "Conv");
    t.pad->attrs["mode"] = ir::Attribute(std::string("reflect"));
    PassLog log;
    t.run(0, log);
    EXPECT_EQ(log.entries.at(0).message, "Pad not folded: its mode is reflect, not constant");
  }
  {
    PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "Conv");
    ir::Node* relu = t.g->add_node("Relu", {t.pad->output(0)}, 1, "relu");
    t.g->add_output(relu->output(0));
    PassLog log;
    t.run(0, log);
    EXPECT_EQ(log.entries.at(0).where, "pad");
    EXPECT_EQ(log.entries.at(0).message, "Pad not folded: its output is read by 2 nodes");
  }
  {
    PadGraph t({0, 0, 1, 1, 0, 0, 1, 1}, "Conv");
    t.consumer->attrs["auto_pad"] = ir::Attribute(std::string("SAME_UPPER"));
    PassLog log;
    t.run(0, log);
    EXPECT_EQ(log.entries.at(0).message, "Pad not folded: the Conv has auto_pad = SAME_UPPER");
  }
}

TEST(TransformsFoldPad, PadWithAxesInput) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 2, 4, 5}));
  ir::Node* pad = g->add_node("Pad",
                              {x, g->add_constant("pads", Tensor::from_vector<int64_t>({1, 0, 0, 2}, {4})), nullptr,
                               g->add_constant("axes", Tensor::from_vector<int64_t>({-2, -1}, {2}))},
                              1, "pad");
  ir::Node* c = g->add_node("Conv", {pad->output(0), g->add_constant("w", rand_f32({3, 2, 2, 2}, 4))}, 1, "conv");
  g->add_output(c->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(fold_pad(*g, &log), 1u);
  EXPECT_EQ(c->attr_ints("pads"), (std::vector<int64_t>{1, 0, 0, 2}));
  expect_same_outputs(before, g, {rand_f32({1, 2, 4, 5}, 5)});
}

}  // namespace test_transforms_fold_pad
