// RemoveIdentityOps: Pow/Mul/Div by ones, Add/Sub of zeros, Identity, inference Dropout and
// Cast to the same type disappear; broadcasting that grows x, a read Dropout mask and graph
// outputs that cannot be renamed keep the node.
#include <gtest/gtest.h>

#include "transforms/remove_identity_ops.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_remove_identity {

using namespace kiln;
using namespace kiln::test;
using transforms::kRemoveIdentityOps;
using transforms::PassLog;
using transforms::remove_identity_ops;

namespace {

ir::Node* add(const std::shared_ptr<ir::Graph>& g, const std::string& op, std::vector<ir::Value*> in,
              const std::string& name, size_t nout = 1) {
  return g->add_node(op, in, nout, name);
}

}  // namespace

TEST(TransformsRemoveIdentity, EveryNeutralFormIsRemoved) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 3}));
  ir::Node* pw = add(g, "Pow", {x, g->add_constant("one_a", f32_filled({}, 1))}, "pow");
  ir::Node* mu = add(g, "Mul", {g->add_constant("one_b", f32_filled({1, 3}, 1)), pw->output(0)}, "mul");
  ir::Node* dv = add(g, "Div", {mu->output(0), g->add_constant("one_c", f32_filled({3}, 1))}, "div");
  ir::Node* ad = add(g, "Add", {g->add_constant("zero_a", f32_filled({2, 3}, 0)), dv->output(0)}, "add");
  ir::Node* sb = add(g, "Sub", {ad->output(0), g->add_constant("zero_b", f32_filled({1}, -0.0f))}, "sub");
  ir::Node* id = add(g, "Identity", {sb->output(0)}, "identity");
  ir::Node* dr = add(g, "Dropout", {id->output(0), g->add_constant("ratio", f32_filled({}, 0.5f)),
                                    g->add_constant("train", Tensor::scalar<bool>(false))},
                     "dropout");
  ir::Node* ca = add(g, "Cast", {dr->output(0)}, "cast");
  ca->attrs["to"] = ir::Attribute(int64_t{1});  // FLOAT
  ir::Node* relu = add(g, "Relu", {ca->output(0)}, "relu");
  g->add_output(relu->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();

  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 8u);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(relu->input(0), x);
  EXPECT_EQ(log.count_applied(kRemoveIdentityOps), 8u);
  for (auto& e : entries(log, kRemoveIdentityOps, false)) ADD_FAILURE() << e.where << ": " << e.message;
  EXPECT_EQ(log.entries[0].where, "pow");
  EXPECT_NE(log.entries[0].message.find("Pow removed"), std::string::npos) << log.entries[0].message;
  expect_same_outputs(before, g, {rand_f32({2, 3}, 1, -2, 2)});
}

TEST(TransformsRemoveIdentity, IntegerMulByOnesAndSameTypeCast) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", {DType::i32, ir::PartialShape(Shape{4})});
  ir::Node* mu = add(g, "Mul", {x, g->add_constant("ones", Tensor::from_vector<int32_t>({1, 1, 1, 1}, {4}))}, "mul");
  ir::Node* ca = add(g, "Cast", {mu->output(0)}, "cast");
  ca->attrs["to"] = ir::Attribute(int64_t{6});  // INT32
  ir::Node* other = add(g, "Cast", {ca->output(0)}, "to_float");
  other->attrs["to"] = ir::Attribute(int64_t{1});  // a real conversion: untouched
  g->add_output(other->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 2u);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(other->input(0), x);
  EXPECT_EQ(log.entries.size(), 2u);  // the converting Cast is not a candidate at all
  expect_same_outputs(before, g, {Tensor::from_vector<int32_t>({-3, 0, 7, 100}, {4})});
}

TEST(TransformsRemoveIdentity, BroadcastThatGrowsXIsKept) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({3}));
  ir::Value* xb = g->add_input("xb", f32_type({ir::Dim::sym("n"), 3}));
  // ones of a larger shape: the output is [2,3], not x's [3]
  ir::Node* big = add(g, "Mul", {x, g->add_constant("ones23", f32_filled({2, 3}, 1))}, "mul_big");
  // x [n,3] + zeros [4,1]: n may be 1 at run time, so the add may grow it
  ir::Node* sym = add(g, "Add", {xb, g->add_constant("zeros41", f32_filled({4, 1}, 0))}, "add_sym");
  // not neutral: no candidate, no log entry
  ir::Node* half = add(g, "Mul", {x, g->add_constant("half", f32_filled({}, 0.5f))}, "mul_half");
  // 0 - x and 1 / x are not identities
  ir::Node* rsub = add(g, "Sub", {g->add_constant("zero", f32_filled({}, 0)), x}, "rsub");
  ir::Node* rdiv = add(g, "Div", {g->add_constant("one", f32_filled({}, 1)), x}, "rdiv");
  for (ir::Node* n : {big, sym, half, rsub, rdiv}) g->add_output(n->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 0u);
  EXPECT_EQ(g->num_nodes(), 5u);
  auto skipped = entries(log, kRemoveIdentityOps, false);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].where, "mul_big");
  EXPECT_NE(skipped[0].message.find("Mul not removed: the constant of shape [2,3] has a higher rank"),
            std::string::npos)
      << skipped[0].message;
  EXPECT_EQ(skipped[1].where, "add_sym");
  EXPECT_NE(skipped[1].message.find("would broadcast the other operand [n,3] to a larger shape"), std::string::npos)
      << skipped[1].message;
  expect_same_outputs(before, g, {rand_f32({3}, 2), rand_f32({4, 3}, 3)});
}

TEST(TransformsRemoveIdentity, OnesOfSameRankButLargerDimAreKept) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({1, 3}));
  ir::Node* m = add(g, "Mul", {x, g->add_constant("ones", f32_filled({2, 3}, 1))}, "mul");
  g->add_output(m->output(0));
  ir::infer_shapes(*g);
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 0u);
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_NE(log.entries[0].message.find("would broadcast the other operand [1,3]"), std::string::npos);
}

TEST(TransformsRemoveIdentity, DropoutWithReadMaskOrTrainingIsKept) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2, 5}));
  ir::Node* d1 = add(g, "Dropout", {x}, "drop_mask", 2);
  ir::Node* cast = add(g, "Cast", {d1->output(1)}, "mask_to_float");
  cast->attrs["to"] = ir::Attribute(int64_t{1});
  ir::Node* d2 = add(g, "Dropout", {d1->output(0), g->add_constant("ratio", f32_filled({}, 0.0f)),
                                    g->add_constant("train", Tensor::scalar<bool>(true))},
                     "drop_train");
  ir::Node* d3 = add(g, "Dropout", {d2->output(0)}, "drop_unread_mask", 2);  // mask not read: removed
  ir::Node* relu = add(g, "Relu", {d3->output(0)}, "relu");
  g->add_output(relu->output(0));
  g->add_output(cast->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 1u);
  EXPECT_EQ(count_op(*g, "Dropout"), 2u);
  EXPECT_EQ(relu->input(0), d2->output(0));
  auto skipped = entries(log, kRemoveIdentityOps, false);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].where, "drop_mask");
  EXPECT_EQ(skipped[0].message, "Dropout not removed: its mask output '" + d1->output(1)->name() +
                                    "' is read by mask_to_float");
  EXPECT_EQ(skipped[1].message, "Dropout not removed: its training_mode input is true");
  expect_same_outputs(before, g, {rand_f32({2, 5}, 4)});
}

TEST(TransformsRemoveIdentity, IdentityFeedingAGraphOutputKeepsTheOutputName) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({4}));
  ir::Node* relu = g->add_node("Relu", {x}, std::vector<std::string>{"r"}, "relu");
  ir::Node* neg = g->add_node("Neg", {relu->output(0)}, std::vector<std::string>{"other"}, "neg");
  ir::Node* id = g->add_node("Identity", {relu->output(0)}, std::vector<std::string>{"out"}, "identity");
  g->add_output(id->output(0));
  g->add_output(neg->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 1u);
  EXPECT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"out", "other"}));
  // relu now produces "out" itself, and neg reads it
  ir::Node* r = g->outputs()[0]->producer();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op_type(), "Relu");
  EXPECT_EQ(r->name(), "relu");
  EXPECT_EQ(g->find_value("r"), nullptr);
  EXPECT_EQ(g->outputs()[1]->producer()->input(0), g->outputs()[0]);
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_EQ(log.entries[0].message, "Identity removed; 'r' is renamed to the graph output 'out'");
  expect_same_outputs(before, g, {Tensor::from_vector<float>({-1, 2, -3, 4}, {4})});
}

TEST(TransformsRemoveIdentity, GraphOutputThatCannotTakeXIsKept) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({3}));
  // Identity of a graph input straight to a graph output
  ir::Node* id_in = g->add_node("Identity", {x}, std::vector<std::string>{"copy"}, "id_input");
  // Identity of a value that is already a graph output
  ir::Node* relu = g->add_node("Relu", {x}, std::vector<std::string>{"r"}, "relu");
  ir::Node* id_out = g->add_node("Identity", {relu->output(0)}, std::vector<std::string>{"r2"}, "id_output");
  // Identity of a constant to a graph output
  ir::Node* id_c = g->add_node("Identity", {g->add_constant("c", f32_filled({3}, 2))},
                               std::vector<std::string>{"c_out"}, "id_const");
  g->add_output(id_in->output(0));
  g->add_output(relu->output(0));
  g->add_output(id_out->output(0));
  g->add_output(id_c->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 0u);
  EXPECT_EQ(count_op(*g, "Identity"), 3u);
  auto skipped = entries(log, kRemoveIdentityOps, false);
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[0].message, "Identity not removed: its output 'copy' is a graph output and 'x' is a graph input");
  EXPECT_EQ(skipped[1].message, "Identity not removed: its output 'r2' is a graph output and 'r' is already a graph output");
  EXPECT_EQ(skipped[2].message, "Identity not removed: its output 'c_out' is a graph output and 'c' is a constant");
  expect_same_outputs(before, g, {rand_f32({3}, 5)});
}

TEST(TransformsRemoveIdentity, ChainOfIdentitiesToAnOutputCollapses) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({2}));
  ir::Node* s = g->add_node("Sigmoid", {x}, std::vector<std::string>{"s"}, "sig");
  ir::Node* a = g->add_node("Identity", {s->output(0)}, std::vector<std::string>{"a"}, "id_a");
  ir::Node* b = g->add_node("Mul", {a->output(0), g->add_constant("one", f32_filled({1}, 1))},
                            std::vector<std::string>{"y"}, "mul_b");
  g->add_output(b->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 2u);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y"}));
  EXPECT_EQ(g->outputs()[0]->producer()->op_type(), "Sigmoid");
  expect_same_outputs(before, g, {rand_f32({2}, 6)});
}

TEST(TransformsRemoveIdentity, MultiOutputProducerKeepsItsOtherOutputNames) {
  auto g = new_graph();
  ir::Value* x = g->add_input("x", f32_type({4, 3}));
  ir::Node* split = g->add_node("Split", {x}, std::vector<std::string>{"a", "b"}, "split");
  ir::Node* id = g->add_node("Identity", {split->output(0)}, std::vector<std::string>{"out"}, "identity");
  ir::Node* neg = g->add_node("Neg", {split->output(1)}, std::vector<std::string>{"nb"}, "neg");
  g->add_output(id->output(0));
  g->add_output(neg->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 1u);
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"out", "nb"}));
  ir::Node* s = g->outputs()[0]->producer();
  ASSERT_EQ(s->op_type(), "Split");
  EXPECT_EQ(s->name(), "split");
  EXPECT_EQ(s->output(1)->name(), "b");
  EXPECT_EQ(g->outputs()[1]->producer()->input(0), s->output(1));
  EXPECT_EQ(g->num_nodes(), 2u);
  expect_same_outputs(before, g, {rand_f32({4, 3}, 11)});
}

TEST(TransformsRemoveIdentity, PadOfZerosAndIdentityTransposeGo) {
  auto g = new_graph(13);
  ir::Value* x = g->add_input("x", f32_type({1, 4, 6, 6}));
  ir::Node* pad = add(g, "Pad", {x, g->add_constant("pads", Tensor::from_vector<int64_t>(std::vector<int64_t>(8, 0), {8}))},
                      "pad");
  pad->attrs["mode"] = ir::Attribute(std::string("reflect"));
  ir::Node* tr = add(g, "Transpose", {pad->output(0)}, "transpose");
  tr->attrs["perm"] = std::vector<int64_t>{0, 1, 2, 3};
  // kept: real padding, a real permutation
  ir::Node* pad2 = add(g, "Pad", {tr->output(0), g->add_constant("pads2", Tensor::from_vector<int64_t>({0, 0, 1, 0, 0, 0, 0, 1}, {8}))},
                       "pad2");
  ir::Node* tr2 = add(g, "Transpose", {pad2->output(0)}, "transpose2");
  tr2->attrs["perm"] = std::vector<int64_t>{0, 1, 3, 2};
  g->add_output(tr2->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(remove_identity_ops(*g, &log), 2u);
  EXPECT_EQ(g->num_nodes(), 2u);
  EXPECT_EQ(pad2->input(0), x);
  expect_same_outputs(before, g, {rand_f32({1, 4, 6, 6}, 2, -2, 2)});
}

}  // namespace test_transforms_remove_identity
