// Snippets: the data-flow passes, the Linear IR and each control-flow pass alone.
#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <algorithm>

#include "snippets/lowered/linear_ir.hpp"
#include "snippets/lowered/pass/passes.hpp"
#include "snippets/pass/data_flow_passes.hpp"
#include "test_snippets_util.hpp"

namespace kiln::test::test_snippets_passes {
namespace {

using namespace snippets::lowered;
namespace lp = snippets::lowered::pass;

size_t count_type(const ir::Graph& g, const std::string& t) {
  size_t n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == t;
  return n;
}

std::vector<std::string> types(const LinearIR& lir) {
  std::vector<std::string> t;
  for (const auto& e : lir.expressions()) t.push_back(e->type());
  return t;
}

Expression* first_of(LinearIR& lir, const std::string& t) {
  for (auto& e : lir.expressions())
    if (e->type() == t) return e.get();
  return nullptr;
}

TEST(SnippetsDataFlow, ConstantsBecomeScalarsPowBecomesPowerStatic) {
  auto g = snippets_body({{4, 8}});
  ir::Value* x = g->inputs()[0];
  ir::Value* m = g->add_node("Mul", {x, scalar_const(*g, 2.0f)}, 1)->output(0);
  ir::Value* p = g->add_node("Pow", {m, scalar_const(*g, 3.0f)}, 1)->output(0);
  ir::Node* clip = g->add_node("Clip", {p, scalar_const(*g, -1.0f), scalar_const(*g, 1.0f)}, 1);
  g->add_output(clip->output(0));
  EXPECT_EQ(snippets::pass::convert_constants_to_scalars(*g), 4u);
  EXPECT_EQ(count_type(*g, "Scalar"), 2u);  // Mul's and Pow's; Clip's bounds became attributes
  ir::Node* c = g->outputs()[0]->producer();
  EXPECT_EQ(c->op_type(), "Clip");
  EXPECT_EQ(c->num_inputs(), 1u);
  EXPECT_FLOAT_EQ(c->attr_f("min"), -1.0f);
  EXPECT_FLOAT_EQ(c->attr_f("max"), 1.0f);
  EXPECT_EQ(snippets::pass::convert_pow_to_power_static(*g), 1u);
  EXPECT_EQ(count_type(*g, "Pow"), 0u);
  EXPECT_EQ(count_type(*g, "Scalar"), 1u);
  ir::Node* ps = c->input(0)->producer();
  EXPECT_EQ(ps->op_type(), "PowerStatic");
  EXPECT_FLOAT_EQ(ps->attr_f("power"), 3.0f);
}

TEST(SnippetsDataFlow, SigmoidTimesItsInputBecomesSwish) {
  auto g = snippets_body({{4, 8}, {4, 8}});
  ir::Value* x = g->inputs()[0];
  ir::Value* y = g->inputs()[1];
  ir::Value* s = g->add_node("Sigmoid", {x}, 1)->output(0);
  ir::Value* m = g->add_node("Mul", {s, x}, 1)->output(0);  // either operand order
  g->add_output(g->add_node("Add", {m, y}, 1)->output(0));
  EXPECT_EQ(snippets::pass::fuse_sigmoid_mul_to_swish(*g), 1u);
  EXPECT_EQ(count_type(*g, "Sigmoid"), 0u);
  EXPECT_EQ(count_type(*g, "Mul"), 0u);
  ir::Node* sw = g->outputs()[0]->producer()->input(0)->producer();
  ASSERT_EQ(sw->op_type(), "Swish");
  EXPECT_EQ(sw->domain(), snippets::kSnippetsDomain);
  ASSERT_EQ(sw->num_inputs(), 1u);
  EXPECT_EQ(sw->input(0), x);

  // left alone: the sigmoid of another value, a sigmoid read twice, a sigmoid that is an output
  auto g2 = snippets_body({{4, 8}, {4, 8}});
  ir::Value* a = g2->inputs()[0];
  ir::Value* b = g2->inputs()[1];
  ir::Value* sb = g2->add_node("Sigmoid", {b}, 1)->output(0);
  g2->add_output(g2->add_node("Mul", {a, sb}, 1)->output(0));
  ir::Value* sa = g2->add_node("Sigmoid", {a}, 1)->output(0);
  g2->add_output(g2->add_node("Mul", {a, sa}, 1)->output(0));
  g2->add_output(g2->add_node("Relu", {sa}, 1)->output(0));
  ir::Value* sc = g2->add_node("Sigmoid", {b}, 1)->output(0);
  g2->add_output(g2->add_node("Mul", {sc, b}, 1)->output(0));
  g2->add_output(sc);
  EXPECT_EQ(snippets::pass::fuse_sigmoid_mul_to_swish(*g2), 0u);
  EXPECT_EQ(count_type(*g2, "Sigmoid"), 3u);
}

TEST(SnippetsDataFlow, MulAddBecomesFmaOnlyWhenMulHasOneUse) {
  auto g = snippets_body({{4, 8}, {4, 8}});
  ir::Value* x = g->inputs()[0];
  ir::Value* y = g->inputs()[1];
  ir::Value* m = g->add_node("Mul", {x, y}, 1)->output(0);
  ir::Value* a = g->add_node("Add", {y, m}, 1)->output(0);
  g->add_output(a);
  EXPECT_EQ(snippets::pass::fuse_mul_add_to_fma(*g), 1u);
  EXPECT_EQ(count_type(*g, "FMA"), 1u);
  EXPECT_EQ(count_type(*g, "Mul"), 0u);
  ir::Node* f = g->outputs()[0]->producer();
  EXPECT_EQ(f->input(0), x);
  EXPECT_EQ(f->input(1), y);
  EXPECT_EQ(f->input(2), y);

  auto g2 = snippets_body({{4, 8}});
  ir::Value* m2 = g2->add_node("Mul", {g2->inputs()[0], g2->inputs()[0]}, 1)->output(0);
  ir::Value* a2 = g2->add_node("Add", {m2, g2->inputs()[0]}, 1)->output(0);
  g2->add_output(a2);
  g2->add_output(m2);  // the product is an output too: no fusion
  EXPECT_EQ(snippets::pass::fuse_mul_add_to_fma(*g2), 0u);
}

// Body: Mul(Relu(Add(x, y)), 2) with x [2, 20] and y [2, 1] (constant along the inner dim).
std::unique_ptr<LinearIR> small_lir(int64_t inner = 20) {
  auto g = snippets_body({{2, inner}, {2, 1}});
  ir::Value* a = g->add_node("Add", {g->inputs()[0], g->inputs()[1]}, 1)->output(0);
  ir::Value* r = g->add_node("Relu", {a}, 1)->output(0);
  ir::Value* m = g->add_node("Mul", {r, scalar_const(*g, 2.0f)}, 1)->output(0);
  g->add_output(m);
  snippets::pass::convert_constants_to_scalars(*g);
  return LinearIR::from_graph(*g, {{2, inner}, {2, 1}}, {2, inner});
}

TEST(SnippetsLinearIR, FromGraphConnectorsAndViews) {
  auto lir = small_lir();
  auto t = types(*lir);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t.front(), "Parameter");
  EXPECT_EQ(t.back(), "Result");
  Expression* add = first_of(*lir, "Add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->input_expr(0)->type(), "Parameter");
  EXPECT_EQ(add->get_input_port_descriptor(1).shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(add->get_output_port_connector(0)->get_consumers().size(), 1u);
  EXPECT_EQ(add->get_output_port_connector(0)->get_consumers()[0].get_expr()->type(), "Relu");
  EXPECT_NE(lir->debug_print().find("Add#"), std::string::npos);
  EXPECT_NE(lir->serialize_data_flow().find("Relu#"), std::string::npos);
}

TEST(SnippetsLinearIR, InsertAndReplaceHelpers) {
  auto lir = small_lir();
  Expression* relu = first_of(*lir, "Relu");
  // insert_node: an Abs between Relu and Mul.
  auto mul_it = lir->find(first_of(*lir, "Mul"));
  auto abs = lir->insert_node(mul_it, snippets::Op{"Abs", {}}, {relu->get_output_port(0)}, 1, {});
  Expression* mul = first_of(*lir, "Mul");
  size_t relu_to_mul = 0;
  for (size_t i = 0; i < 2; ++i) relu_to_mul += mul->input_expr(i) == relu;
  ASSERT_EQ(relu_to_mul, 1u);
  for (size_t i = 0; i < 2; ++i)
    if (mul->input_expr(i) == relu) LinearIR::connect(abs->get_output_port(0), mul->get_input_port(i));
  EXPECT_EQ(relu->get_output_port_connector(0)->get_consumers().size(), 1u);  // Abs only
  // replace_with_node: Relu -> Abs becomes one Neg.
  auto relu_ptr = *lir->find(relu);
  auto neg = lir->replace_with_node({relu_ptr, abs}, snippets::Op{"Neg", {}});
  EXPECT_EQ(neg->input_expr(0)->type(), "Add");
  EXPECT_EQ(first_of(*lir, "Relu"), nullptr);
  EXPECT_EQ(first_of(*lir, "Abs"), nullptr);
  mul = first_of(*lir, "Mul");
  bool reads_neg = mul->input_expr(0) == neg.get() || mul->input_expr(1) == neg.get();
  EXPECT_TRUE(reads_neg);
  auto t = types(*lir);
  EXPECT_EQ(std::find(t.begin(), t.end(), "Neg") < std::find(t.begin(), t.end(), "Mul"), true);
  // replace_with_expr with a prepared expression.
  auto sq = lir->make_expression(snippets::Op{"Sqrt", {}}, {}, 1);
  auto sqrt_holder = std::make_shared<Expression>(snippets::Op{"Sqrt", {}}, 1, 1);
  (void)sq;
  lir->replace_with_expr({neg}, sqrt_holder);
  EXPECT_EQ(first_of(*lir, "Neg"), nullptr);
  EXPECT_EQ(first_of(*lir, "Sqrt")->input_expr(0)->type(), "Add");
}

TEST(SnippetsControlFlow, MarkLoopsAndFuseLoops) {
  auto lir = small_lir();
  lp::mark_loops(*lir);
  ASSERT_EQ(lir->loops().size(), 2u);
  EXPECT_EQ(lir->loops()[0].work_amount, -1);
  EXPECT_EQ(lir->loops()[1].work_amount, 20);
  EXPECT_EQ(lir->loops()[1].increment, 16);
  EXPECT_EQ(first_of(*lir, "Add")->loop_ids, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(first_of(*lir, "Scalar")->loop_ids.empty());
  lp::fuse_loops(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "Add", "Relu", "Mul", "Result"}));
}

TEST(SnippetsControlFlow, InsertLoadStoreAndBroadcast) {
  auto lir = small_lir();
  lp::mark_loops(*lir);
  lp::fuse_loops(*lir);
  lp::insert_load_store(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "Load", "Load", "Add", "Relu",
                                                   "Mul", "Store", "Result"}));
  EXPECT_EQ(lir->loops()[1].entry_points.size(), 2u);
  EXPECT_EQ(lir->loops()[1].exit_points.size(), 1u);
  EXPECT_EQ(first_of(*lir, "Result")->input_expr(0)->type(), "Store");
  lp::insert_broadcast_move(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "Load", "Load", "BroadcastMove",
                                                   "Add", "Relu", "Mul", "Store", "Result"}));
  lp::load_move_broadcast_to_broadcast_load(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "Load", "BroadcastLoad", "Add",
                                                   "Relu", "Mul", "Store", "Result"}));
  Expression* bl = first_of(*lir, "BroadcastLoad");
  EXPECT_EQ(first_of(*lir, "Add")->input_expr(1), bl);
  EXPECT_EQ(lir->loops()[1].entry_points[1].expr, bl);
}

TEST(SnippetsControlFlow, InitLoopsInsertLoopsAndTail) {
  auto lir = small_lir();
  for (auto p : {lp::mark_loops, lp::fuse_loops, lp::insert_load_store, lp::insert_broadcast_move,
                 lp::load_move_broadcast_to_broadcast_load, lp::init_loops})
    p(*lir);
  const LoopInfo& inner = lir->loops()[1];
  EXPECT_EQ(inner.entry_points[0].ptr_increment, 1);   // x
  EXPECT_EQ(inner.entry_points[0].finalization_offset, -20);
  EXPECT_EQ(inner.entry_points[1].ptr_increment, 0);   // y broadcast along the inner dim
  EXPECT_EQ(inner.exit_points[0].ptr_increment, 1);
  const LoopInfo& rows = lir->loops()[0];
  EXPECT_EQ(rows.entry_points[0].ptr_increment, 20);
  EXPECT_EQ(rows.entry_points[1].ptr_increment, 1);
  EXPECT_EQ(rows.exit_points[0].ptr_increment, 20);

  lp::insert_loops(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "LoopBegin", "LoopBegin", "Load",
                                                   "BroadcastLoad", "Add", "Relu", "Mul", "Store", "LoopEnd", "LoopEnd",
                                                   "Result"}));
  lp::insert_specific_iterations(*lir);
  EXPECT_EQ(types(*lir), (std::vector<std::string>{"Parameter", "Parameter", "Scalar", "LoopBegin", "LoopBegin", "Load",
                                                   "BroadcastLoad", "Add", "Relu", "Mul", "Store", "LoopEnd", "LoopBegin",
                                                   "Load", "BroadcastLoad", "Add", "Relu", "Mul", "Store", "LoopEnd",
                                                   "LoopEnd", "Result"}));
  ASSERT_EQ(lir->loops().size(), 3u);
  EXPECT_EQ(lir->loops()[1].work_amount, 16);
  EXPECT_EQ(lir->loops()[1].entry_points[0].finalization_offset, 0);
  EXPECT_TRUE(lir->loops()[2].is_tail);
  EXPECT_EQ(lir->loops()[2].work_amount, 4);
  EXPECT_EQ(lir->loops()[2].entry_points[0].finalization_offset, -20);
  int masked = 0;
  for (auto& e : lir->expressions()) masked += e->op().attr("count", 16) == 4;
  EXPECT_EQ(masked, 2);  // the tail's Load and Store
  EXPECT_EQ(lir->loops()[0].entry_points.size(), 4u);  // main and tail ports seen from the rows loop

  lp::clean_repeated_data_pointer_shifts(*lir);
  int incremented = 0;
  for (const auto& p : lir->loops()[0].entry_points) incremented += p.is_incremented;
  for (const auto& p : lir->loops()[0].exit_points) incremented += p.is_incremented;
  EXPECT_EQ(incremented, 3);  // x, y, output: once each
  EXPECT_NE(lir->serialize_control_flow().find("tail"), std::string::npos);
}

TEST(SnippetsControlFlow, ShortInnerDimKeepsOnlyTheTail) {
  auto lir = small_lir(5);
  lp::PassPipeline::control_flow().run(*lir);
  auto t = types(*lir);
  EXPECT_EQ(std::count(t.begin(), t.end(), "LoopBegin"), 2);
  EXPECT_EQ(lir->loops()[1].entry_points.size(), 0u);  // the emptied main loop
  Expression* store = first_of(*lir, "Store");
  EXPECT_EQ(store->op().attr("count"), 5);
  EXPECT_EQ(first_of(*lir, "Result")->input_expr(0), store);
}

TEST(SnippetsControlFlow, CleanRepeatedDataPointerShifts) {
  auto g = snippets_body({{2, 32}});
  ir::Value* x = g->inputs()[0];
  ir::Value* m = g->add_node("Mul", {x, x}, 1)->output(0);
  ir::Value* a = g->add_node("Add", {x, m}, 1)->output(0);
  g->add_output(a);
  auto lir = LinearIR::from_graph(*g, {{2, 32}}, {2, 32});
  for (auto p : {lp::mark_loops, lp::fuse_loops, lp::insert_load_store, lp::init_loops}) p(*lir);
  ASSERT_EQ(lir->loops()[1].entry_points.size(), 3u);  // one Load per consumer of x
  lp::clean_repeated_data_pointer_shifts(*lir);
  int incremented = 0;
  for (const auto& p : lir->loops()[1].entry_points) incremented += p.is_incremented;
  EXPECT_EQ(incremented, 1);
}

TEST(SnippetsControlFlow, PipelineRegistersBackendPassesByName) {
  auto p = lp::PassPipeline::control_flow();
  std::vector<std::string> ran;
  p.register_after("InsertLoadStore", "BackendAfter", [&](LinearIR&) { ran.push_back("after"); });
  p.register_before("DecomposeReductions", "BackendFirst", [&](LinearIR&) { ran.push_back("first"); });
  auto names = p.names();
  EXPECT_EQ(names.front(), "BackendFirst");
  EXPECT_EQ(*(std::find(names.begin(), names.end(), "InsertLoadStore") + 1), "BackendAfter");
  EXPECT_THROW(p.register_after("NoSuchPass", "x", [](LinearIR&) {}), Error);
  auto lir = small_lir();
  std::vector<std::string> seen;
  p.run(*lir, [&](const std::string& name, const LinearIR&) { seen.push_back(name); });
  EXPECT_EQ(ran, (std::vector<std::string>{"first", "after"}));
  EXPECT_EQ(seen, names);
}

TEST(SnippetsControlFlow, UnrollLoopsInterleavesCopiesAndKeepsARemainderLoop) {
  auto lir = small_lir(100);  // 6 full vectors + a tail of 4
  lir->set_unroll_factor(4);
  for (auto p : {lp::mark_loops, lp::fuse_loops, lp::insert_load_store, lp::insert_broadcast_move,
                 lp::load_move_broadcast_to_broadcast_load, lp::init_loops, lp::insert_loops,
                 lp::insert_specific_iterations, lp::unroll_loops})
    p(*lir);
  ASSERT_EQ(lir->loops().size(), 4u);  // rows, unrolled main, tail, remainder
  const LoopInfo& main = lir->loops()[1];
  EXPECT_EQ(main.work_amount, 64);
  EXPECT_EQ(main.increment, 64);
  EXPECT_EQ(lir->loops()[3].work_amount, 32);
  EXPECT_EQ(lir->loops()[3].increment, 16);
  EXPECT_EQ(lir->loops()[2].work_amount, 4);  // the tail, still last
  EXPECT_EQ(lir->loops()[2].entry_points[0].finalization_offset, -100);
  // main body: each op four times in a row; the copies' Loads read 16, 32, 48 further,
  // the broadcast input's copies read the same element
  std::vector<std::string> body;
  std::vector<double> load_offsets, bcast_offsets;
  bool in_main = false;
  for (auto& e : lir->expressions()) {
    if (e->type() == "LoopBegin" && e->op().attr("loop") == 1) in_main = true;
    else if (e->type() == "LoopEnd" && e->op().attr("loop") == 1) in_main = false;
    else if (in_main) {
      body.push_back(e->type());
      if (e->type() == "Load") load_offsets.push_back(e->op().attr("offset", 0));
      if (e->type() == "BroadcastLoad") bcast_offsets.push_back(e->op().attr("offset", 0));
    }
  }
  EXPECT_EQ(body, (std::vector<std::string>{"Load", "Load", "Load", "Load", "BroadcastLoad", "BroadcastLoad", "BroadcastLoad",
                                            "BroadcastLoad", "Add", "Add", "Add", "Add", "Relu", "Relu", "Relu", "Relu",
                                            "Mul", "Mul", "Mul", "Mul", "Store", "Store", "Store", "Store"}));
  EXPECT_EQ(load_offsets, (std::vector<double>{0, 16, 32, 48}));
  EXPECT_EQ(bcast_offsets, (std::vector<double>{0, 0, 0, 0}));
  // only the original memory expressions are loop ports (they shift the pointers)
  EXPECT_EQ(main.entry_points.size(), 2u);
  EXPECT_EQ(main.exit_points.size(), 1u);
}

TEST(SnippetsControlFlow, CleanupLoopOffsetsFoldsTheRewindIntoTheRowStep) {
  auto lir = small_lir(32);  // no tail: the inner loop rewinds x and the output by 32
  for (auto p : {lp::mark_loops, lp::fuse_loops, lp::insert_load_store, lp::insert_broadcast_move,
                 lp::load_move_broadcast_to_broadcast_load, lp::init_loops, lp::insert_loops,
                 lp::insert_specific_iterations, lp::clean_repeated_data_pointer_shifts})
    p(*lir);
  EXPECT_EQ(lir->loops()[1].entry_points[0].finalization_offset, -32);
  EXPECT_EQ(lir->loops()[0].entry_points[0].ptr_increment, 32);
  lp::cleanup_loop_offsets(*lir);
  for (const auto* ports : {&lir->loops()[1].entry_points, &lir->loops()[1].exit_points})
    for (const auto& p : *ports) EXPECT_EQ(p.finalization_offset, 0);
  EXPECT_EQ(lir->loops()[0].entry_points[0].ptr_increment, 0);  // x: +32 - 32
  EXPECT_EQ(lir->loops()[0].entry_points[1].ptr_increment, 1);   // y [2, 1]: one element per row, untouched
  EXPECT_EQ(lir->loops()[0].exit_points[0].ptr_increment, 0);
}

TEST(SnippetsControlFlow, OptimizeLoopSingleEvaluationFoldsTheStepIntoTheRewind) {
  auto lir = small_lir(20);  // a main loop of 16 and a tail of 4
  for (auto p : {lp::mark_loops, lp::fuse_loops, lp::insert_load_store, lp::insert_broadcast_move,
                 lp::load_move_broadcast_to_broadcast_load, lp::init_loops, lp::insert_loops,
                 lp::insert_specific_iterations})
    p(*lir);
  const LoopPort before = lir->loops()[2].entry_points[0];  // the tail's x
  lp::optimize_loop_single_evaluation(*lir);
  EXPECT_TRUE(lir->loops()[1].evaluate_once);  // 16 of 16: once as well
  EXPECT_TRUE(lir->loops()[2].evaluate_once);
  EXPECT_FALSE(lir->loops()[0].evaluate_once);  // rows: given per call
  const LoopPort after = lir->loops()[2].entry_points[0];
  EXPECT_EQ(after.ptr_increment, 0);
  EXPECT_EQ(after.finalization_offset, before.finalization_offset + before.ptr_increment * 4);
}

TEST(SnippetsRegisters, InsertRegSpillsFitsTheBudget) {
  // six values live at once (five Exps and the Load feeding the next), then summed
  auto g = snippets_body({{1, 32}});
  std::vector<ir::Value*> exps;
  for (int i = 0; i < 6; ++i)
    exps.push_back(g->add_node("Exp", {g->add_node("Mul", {g->inputs()[0], scalar_const(*g, 0.1f * (i + 1))}, 1)->output(0)}, 1)->output(0));
  ir::Value* sum = exps[0];
  for (int i = 1; i < 6; ++i) sum = g->add_node("Add", {sum, exps[static_cast<size_t>(i)]}, 1)->output(0);
  g->add_output(sum);
  snippets::pass::convert_constants_to_scalars(*g);
  auto lir = LinearIR::from_graph(*g, {{1, 32}}, {1, 32});
  lp::PassPipeline::control_flow().run(*lir);
  lp::init_live_ranges(*lir);
  EXPECT_THROW(lp::assign_registers(*lir, 4), Error);
  lp::init_live_ranges(*lir);
  const size_t spills = lp::insert_reg_spills(*lir, 4);
  EXPECT_GT(spills, 0u);
  auto t = types(*lir);
  EXPECT_GT(std::count(t.begin(), t.end(), "RegSpillBegin") + std::count(t.begin(), t.end(), "Scalar"), 6);
  lp::init_live_ranges(*lir);
  EXPECT_NO_THROW(lp::assign_registers(*lir, 4));
}

TEST(SnippetsRegisters, LiveRangesAndReuse) {
  // A chain of 10 unary ops needs two registers at a time, not ten.
  auto g = snippets_body({{1, 64}});
  ir::Value* v = g->inputs()[0];
  for (int i = 0; i < 10; ++i) v = g->add_node(i % 2 ? "Abs" : "Neg", {v}, 1)->output(0);
  g->add_output(v);
  auto lir = LinearIR::from_graph(*g, {{1, 64}}, {1, 64});
  lp::PassPipeline::control_flow().run(*lir);
  lp::init_live_ranges(*lir);
  int abstract = 0;
  for (auto& e : lir->expressions())
    if (e->live_begin >= 0) abstract = std::max(abstract, e->get_output_port_descriptor(0).reg + 1);
  EXPECT_EQ(abstract, 11);  // Load + 10 ops
  lp::assign_registers(*lir, 26);
  int used = 0;
  for (auto& e : lir->expressions())
    if (e->live_begin >= 0) used = std::max(used, e->get_output_port_descriptor(0).reg + 1);
  EXPECT_LE(used, 2);
}

TEST(SnippetsRegisters, ScalarsStayLiveAcrossTheLoopAndTooFewRegistersThrow) {
  auto lir = small_lir();
  lp::PassPipeline::control_flow().run(*lir);
  lp::init_live_ranges(*lir);
  Expression* scalar = first_of(*lir, "Scalar");
  int64_t last_loop_end = 0, i = 0;
  for (auto& e : lir->expressions()) {
    if (e->type() == "LoopEnd") last_loop_end = i;
    ++i;
  }
  EXPECT_EQ(scalar->live_end, last_loop_end);  // the rows loop's end
  EXPECT_THROW(lp::assign_registers(*lir, 2), Error);
}

}  // namespace
}  // namespace kiln::test::test_snippets_passes
