// Snippets layouts: a Transpose of a body input that keeps the last dim last becomes that
// input's layout (FuseTransposesIntoParameters), the schedule steps through its memory in the
// permuted order, PropagateLayout gives its Loads the strides and InitLoops the row steps.
#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include "snippets/lowered/linear_ir.hpp"
#include "snippets/lowered/pass/passes.hpp"
#include "snippets/pass/data_flow_passes.hpp"
#include "snippets/target_machine.hpp"
#include "tensor_test_util.hpp"
#include "test_snippets_util.hpp"

namespace kiln::test::test_snippets_layout {
namespace {

using namespace snippets::lowered;
namespace lp = snippets::lowered::pass;

ir::Node* transpose(ir::Graph& g, ir::Value* v, std::vector<int64_t> perm) {
  ir::Node* t = g.add_node("Transpose", {v}, 1);
  t->attrs["perm"] = perm;
  return t;
}

TEST(SnippetsLayout, ScheduleStepsThroughATransposedInput) {
  // out [2, 4, 3, 5]; input 0 is [2, 3, 4, 5] read as perm [0, 2, 1, 3], input 1 plain
  auto sc = snippets::make_schedule({{{2, 3, 4, 5}, {2, 4, 3, 5}}, {2, 4, 3, 5}}, -1, {{0, 2, 1, 3}, {}});
  EXPECT_EQ(sc.inner, 5);  // only the last dim is contiguous in both
  EXPECT_EQ(sc.outer, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(sc.in_strides[0], (std::vector<int64_t>{60, 5, 20}));
  EXPECT_EQ(sc.in_strides[1], (std::vector<int64_t>{60, 15, 5}));
  EXPECT_EQ(sc.lir_in_row_strides, (std::vector<int64_t>{20, 5}));
  // dims that stay adjacent in memory still merge: [6, 4, 5] read as [4, 6, 5] -> rows 4 x 6
  auto m = snippets::make_schedule({{{2, 3, 4, 5}}, {4, 2, 3, 5}}, -1, {{2, 0, 1, 3}});
  EXPECT_EQ(m.outer, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(m.in_strides[0], (std::vector<int64_t>{5, 20}));
  // an input not contiguous along the last dim: one element per row (the tokenizer only
  // takes Transposes that keep the last dim last; this is a last dim of 1)
  auto one = snippets::make_schedule({{{3, 5}}, {5, 3}}, -1, {{1, 0}});
  EXPECT_EQ(one.inner, 1);
  EXPECT_EQ(one.outer, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(one.in_strides[0], (std::vector<int64_t>{1, 5}));
  // ... which a reduction cannot take; a perm must be a permutation
  EXPECT_THROW(snippets::make_schedule({{{3, 5}}, {5, 3}}, 1, {{1, 0}}), Error);
  EXPECT_THROW(snippets::make_schedule({{{3, 5}}, {3, 5}}, -1, {{0, 0}}), Error);
}

TEST(SnippetsLayout, TransposesOfInputsBecomeLayouts) {
  auto g = snippets_body({{2, 3, 8}, {3, 2, 8}, {2, 3, 8}});
  ir::Value* a = transpose(*g, g->inputs()[0], {1, 0, 2})->output(0);
  ir::Value* s = g->add_node("Add", {a, g->inputs()[1]}, 1)->output(0);
  // input 2 is read both transposed and as it is: it keeps its Transpose
  ir::Value* c = transpose(*g, g->inputs()[2], {1, 0, 2})->output(0);
  ir::Value* d = g->add_node("Mul", {s, c}, 1)->output(0);
  g->add_output(g->add_node("Add", {d, g->inputs()[2]}, 1)->output(0));
  const auto perms = snippets::pass::fuse_transposes_into_parameters(*g);
  EXPECT_EQ(perms, (std::vector<std::vector<int64_t>>{{1, 0, 2}, {}, {}}));
  size_t transposes = 0;
  for (const ir::Node* n : g->nodes()) transposes += n->op_type() == "Transpose";
  EXPECT_EQ(transposes, 1u);
  EXPECT_EQ(g->nodes().front()->op_type(), "Add");
  EXPECT_EQ(g->nodes().front()->input(0), g->inputs()[0]);
}

TEST(SnippetsLayout, PropagateLayoutGivesLoadsTheirInputsStrides) {
  auto g = snippets_body({{4, 8}, {4, 8}});
  g->add_output(g->add_node("Add", {g->inputs()[0], g->inputs()[1]}, 1)->output(0));
  auto lir = LinearIR::from_graph(*g, {{4, 8}, {4, 8}}, {4, 8}, {{20, 1}, {8, 1}});
  lir->set_vector_length(8);
  lp::mark_loops(*lir);
  lp::fuse_loops(*lir);
  lp::insert_load_store(*lir);
  for (auto& e : *lir) {
    if (e->type() == "Load") {
      EXPECT_TRUE(e->get_input_port_descriptor(0).strides.empty());  // not there before the pass
    }
  }
  EXPECT_EQ(lp::propagate_layout(*lir), 3u);  // two Loads, one Store
  for (auto& e : *lir) {
    if (e->type() == "Load") {
      EXPECT_EQ(e->get_input_port_descriptor(0).strides, (std::vector<int64_t>{e->op().attr("param") == 0 ? 20 : 8, 1}));
    }
    if (e->type() == "Store") {
      EXPECT_TRUE(e->get_output_port_descriptor(0).strides.empty());
    }
  }
  lp::init_loops(*lir);
  const LoopInfo& rows = lir->loops()[0];
  for (const auto& p : rows.entry_points) EXPECT_EQ(p.ptr_increment, p.expr->op().attr("param") == 0 ? 20 : 8);
  EXPECT_EQ(rows.exit_points.at(0).ptr_increment, 8);

  // lanes that are not contiguous cannot be a vector Load
  auto bad = LinearIR::from_graph(*g, {{4, 8}, {4, 8}}, {4, 8}, {{20, 3}, {8, 1}});
  bad->set_vector_length(8);
  lp::mark_loops(*bad);
  lp::fuse_loops(*bad);
  lp::insert_load_store(*bad);
  EXPECT_THROW(lp::propagate_layout(*bad), Error);
}

class SnippetsTransposed : public SnippetsIsaTest {
 protected:
  snippets::CompileOptions opt() const {  // no FMA: bit-exact against the reference's two roundings
    snippets::CompileOptions o = isa_options();
    o.fuse_fma = false;
    return o;
  }
};

// Relu(Transpose(x, [0, 2, 1, 3]) * y + 1) for head-split shapes and every tail of the last dim.
TEST_P(SnippetsTransposed, TransposedInputsMatchTheReference) {
  for (int64_t d : {1, 7, 16, 17, 40}) {
    SCOPED_TRACE("last dim " + std::to_string(d));
    const Shape xs = {2, 5, 3, d}, ys = {2, 3, 5, d};
    auto g = snippets_body({xs, ys});
    ir::Value* t = transpose(*g, g->inputs()[0], {0, 2, 1, 3})->output(0);
    ir::Value* m = g->add_node("Mul", {t, g->inputs()[1]}, 1)->output(0);
    ir::Value* a = g->add_node("Add", {m, scalar_const(*g, 1.0f)}, 1)->output(0);
    g->add_output(g->add_node("Relu", {a}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {random_tensor(xs, 1, 2.0f), random_tensor(ys, 2, 2.0f)}, 0.0f, 0.0f, opt()), 0);
  }
  // a transposed input broadcast against a larger output, and a transposed output
  auto g = snippets_body({{3, 1, 16}, {4, 1, 3, 16}});
  ir::Value* t = transpose(*g, g->inputs()[0], {1, 0, 2})->output(0);  // [1, 3, 16]
  g->add_output(g->add_node("Sub", {g->inputs()[1], t}, 1)->output(0));
  EXPECT_EQ(compare_with_reference(g, {random_tensor({3, 1, 16}, 3), random_tensor({4, 1, 3, 16}, 4)}, 0.0f, 0.0f, opt()), 0);
}

// Softmax over a transposed input's rows (attention scores read head-major).
TEST_P(SnippetsTransposed, SoftmaxOfATransposedInput) {
  const Shape xs = {2, 24, 3, 24};
  auto g = snippets_body({xs});
  ir::Value* t = transpose(*g, g->inputs()[0], {0, 2, 1, 3})->output(0);
  g->add_output(g->add_node("Softmax", {t}, 1)->output(0));
  EXPECT_EQ(compare_with_reference(g, {random_tensor(xs, 5, 4.0f)}, 1e-5f, 1e-6f, opt()), 0);
}

KILN_SNIPPETS_BOTH_ISAS(SnippetsTransposed);

}  // namespace
}  // namespace kiln::test::test_snippets_layout
