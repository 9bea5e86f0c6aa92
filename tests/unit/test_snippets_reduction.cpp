// Snippets reductions: Softmax / LogSoftmax along the inner dim. Each pass alone on a small
// Linear IR (DecomposeReductions, MarkLoops' stages, FuseLoops' order, InsertBuffers,
// AllocateBuffers in both modes), then whole kernels against the reference executor on
// both x64 targets.
#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <omp.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "snippets/lowered/linear_ir.hpp"
#include "snippets/lowered/pass/passes.hpp"
#include "snippets/pass/data_flow_passes.hpp"
#include "snippets/target_machine.hpp"
#include "tensor_test_util.hpp"
#include "test_snippets_util.hpp"

namespace kiln::test::test_snippets_reduction {
namespace {

using namespace snippets::lowered;
namespace lp = snippets::lowered::pass;

std::vector<Expression*> of_type(LinearIR& lir, const std::string& t) {
  std::vector<Expression*> r;
  for (auto& e : lir.expressions())
    if (e->type() == t) r.push_back(e.get());
  return r;
}

size_t position(LinearIR& lir, const Expression* e) {
  return static_cast<size_t>(std::distance(lir.begin(), lir.find(e)));
}

size_t inner_loop(const Expression* e) { return e->loop_ids.size() >= 2 ? e->loop_ids[1] : 0; }

// y = Softmax(x * 2) + x * 2 over [rows, n] (op = "Softmax" or "LogSoftmax"); with
// `reuse_after`, the scaled input is read again after the softmax (an overlapping buffer).
std::shared_ptr<ir::Graph> softmax_body(int64_t rows, int64_t n, const std::string& op = "Softmax", bool reuse_after = true) {
  auto g = snippets_body({{rows, n}});
  ir::Value* m = g->add_node("Mul", {g->inputs()[0], scalar_const(*g, 2.0f)}, 1)->output(0);
  ir::Value* s = g->add_node(op, {m}, 1)->output(0);
  ir::Value* y = g->add_node("Add", {s, reuse_after ? m : g->inputs()[0]}, 1)->output(0);
  g->add_output(y);
  ir::infer_shapes(*g);
  return g;
}

std::unique_ptr<LinearIR> lir_of(const std::shared_ptr<ir::Graph>& g, int64_t rows, int64_t n) {
  snippets::pass::convert_constants_to_scalars(*g);
  auto lir = LinearIR::from_graph(*g, {{rows, n}}, {rows, n});
  lir->set_vector_length(16);
  return lir;
}

TEST(SnippetsReductionPasses, DecomposeReductionsWritesSoftmaxWithKernelOps) {
  auto lir = lir_of(softmax_body(2, 40), 2, 40);
  EXPECT_EQ(lp::decompose_reductions(*lir), 1u);
  EXPECT_TRUE(of_type(*lir, "Softmax").empty());
  std::vector<std::string> t;
  for (const auto& e : *lir) t.push_back(e->type());
  EXPECT_EQ(t, (std::vector<std::string>{"Parameter", "Scalar", "Mul", "VectorFill", "AccumulateMax", "HorizonMax", "Sub", "Exp",
                                         "VectorFill", "AccumulateSum", "HorizonSum", "Reciprocal", "Mul", "Add", "Result"}));
  Expression* fill = of_type(*lir, "VectorFill")[0];
  EXPECT_EQ(fill->op().attr("value"), -std::numeric_limits<double>::infinity());
  Expression* acc = of_type(*lir, "AccumulateMax")[0];
  EXPECT_EQ(acc->input_expr(0), fill);
  EXPECT_EQ(acc->input_expr(1)->type(), "Mul");
  // the Add now reads the decomposition's last Mul
  Expression* add = of_type(*lir, "Add")[0];
  EXPECT_EQ(add->input_expr(0)->type(), "Mul");
  EXPECT_EQ(add->input_expr(0)->input_expr(1)->type(), "Reciprocal");

  auto log = lir_of(softmax_body(2, 40, "LogSoftmax"), 2, 40);
  lp::decompose_reductions(*log);
  EXPECT_EQ(of_type(*log, "Log").size(), 1u);
  EXPECT_TRUE(of_type(*log, "Reciprocal").empty());
}

TEST(SnippetsReductionPasses, MarkLoopsPutsReadersOfARowResultInTheNextStage) {
  auto lir = lir_of(softmax_body(2, 40), 2, 40);
  lp::decompose_reductions(*lir);
  lp::mark_loops(*lir);
  ASSERT_EQ(lir->loops().size(), 4u);  // rows + three inner loops
  EXPECT_EQ(lir->loops()[0].dim_idx, 1u);
  for (size_t l = 1; l < 4; ++l) EXPECT_EQ(lir->loops()[l].work_amount, 40);
  auto loops_of = [&](const std::string& t, size_t k = 0) { return of_type(*lir, t).at(k)->loop_ids; };
  using V = std::vector<size_t>;
  EXPECT_EQ(loops_of("Mul", 0), (V{0, 1}));  // x * 2
  EXPECT_EQ(loops_of("AccumulateMax"), (V{0, 1}));
  EXPECT_EQ(loops_of("HorizonMax"), (V{0}));
  EXPECT_EQ(loops_of("VectorFill"), (V{0}));
  EXPECT_EQ(loops_of("Sub"), (V{0, 2}));
  EXPECT_EQ(loops_of("Exp"), (V{0, 2}));
  EXPECT_EQ(loops_of("AccumulateSum"), (V{0, 2}));
  EXPECT_EQ(loops_of("Reciprocal"), (V{0}));  // per row
  EXPECT_EQ(loops_of("Mul", 1), (V{0, 3}));
  EXPECT_EQ(loops_of("Add"), (V{0, 3}));
  EXPECT_TRUE(of_type(*lir, "Scalar")[0]->loop_ids.empty());

  // an elementwise body keeps one inner loop
  auto g = snippets_body({{2, 40}});
  g->add_output(g->add_node("Exp", {g->inputs()[0]}, 1)->output(0));
  auto plain = LinearIR::from_graph(*g, {{2, 40}}, {2, 40});
  lp::decompose_reductions(*plain);
  lp::mark_loops(*plain);
  EXPECT_EQ(plain->loops().size(), 2u);
}

TEST(SnippetsReductionPasses, FuseLoopsMakesEachStageContiguous) {
  auto lir = lir_of(softmax_body(2, 40), 2, 40);
  lp::decompose_reductions(*lir);
  lp::mark_loops(*lir);
  lp::fuse_loops(*lir);
  // every inner loop's expressions are contiguous and in stage order; each VectorFill comes
  // right before its accumulator's loop, each Horizon after it
  size_t prev_loop = 0, prev_pos = 0;
  std::set<size_t> closed;
  for (const auto& e : *lir) {
    const size_t l = inner_loop(e.get());
    if (l == 0) continue;
    EXPECT_FALSE(closed.count(l)) << expr_name(*e) << " reopens loop " << l;
    if (l != prev_loop && prev_loop) closed.insert(prev_loop);
    EXPECT_GE(l, prev_loop);
    prev_loop = l;
  }
  for (Expression* acc : of_type(*lir, "AccumulateMax")) {
    const size_t fill = position(*lir, acc->input_expr(0)), at = position(*lir, acc);
    for (size_t p = fill + 1; p < at; ++p) EXPECT_EQ(inner_loop(std::next(lir->begin(), static_cast<long>(p))->get()), inner_loop(acc));
    Expression* h = acc->get_output_port_connector(0)->get_consumers().at(0).get_expr();
    EXPECT_GT(position(*lir, h), at);
    prev_pos = position(*lir, h);
  }
  EXPECT_LT(prev_pos, position(*lir, of_type(*lir, "Sub")[0]));
  EXPECT_EQ(lir->expressions().back()->type(), "Result");
}

// The pipeline up to (and including) InsertLoadStore.
std::unique_ptr<LinearIR> buffered(const std::shared_ptr<ir::Graph>& g, int64_t rows, int64_t n, size_t* made = nullptr) {
  auto lir = lir_of(g, rows, n);
  lp::decompose_reductions(*lir);
  lp::mark_loops(*lir);
  lp::fuse_loops(*lir);
  const size_t b = lp::insert_buffers(*lir);
  if (made) *made = b;
  lp::insert_load_store(*lir);
  return lir;
}

TEST(SnippetsReductionPasses, InsertBuffersBetweenLoopsOnly) {
  size_t made = 0;
  auto lir = buffered(softmax_body(2, 40), 2, 40, &made);
  // x*2: written in loop 1, read in loops 2 (x - max) and 3 (the final Add); exp: loop 2 -> 3
  ASSERT_EQ(made, 2u);
  auto bufs = of_type(*lir, "Buffer");
  ASSERT_EQ(bufs.size(), 2u);
  for (Expression* b : bufs) {
    EXPECT_EQ(b->loop_ids, (std::vector<size_t>{0}));
    EXPECT_EQ(b->get_output_port_descriptor(0).shape, (std::vector<int64_t>{1, 40}));
    Expression* store = b->input_expr(0);
    ASSERT_EQ(store->type(), "Store");
    EXPECT_EQ(store->op().attr("buffer", -1), b->op().attr("buffer"));
    for (const auto& c : b->get_output_port_connector(0)->get_consumers()) {
      EXPECT_EQ(c.get_expr()->type(), "Load");
      EXPECT_GT(inner_loop(c.get_expr()), inner_loop(store));
    }
  }
  EXPECT_EQ(bufs[0]->input_expr(0)->input_expr(0)->type(), "Mul");
  EXPECT_EQ(bufs[1]->input_expr(0)->input_expr(0)->type(), "Exp");
  // within a loop a value stays in its register: the max loop reads x*2 directly
  Expression* acc = of_type(*lir, "AccumulateMax")[0];
  EXPECT_EQ(acc->input_expr(1)->type(), "Mul");

  // softmax of an input: every loop loads the Parameter itself, no Buffer for it
  auto g = snippets_body({{2, 40}});
  g->add_output(g->add_node("Softmax", {g->inputs()[0]}, 1)->output(0));
  ir::infer_shapes(*g);
  auto direct = buffered(g, 2, 40, &made);
  EXPECT_EQ(made, 1u);  // exp only
  size_t param_loads = 0;
  for (Expression* l : of_type(*direct, "Load")) param_loads += l->op().has("param");
  EXPECT_EQ(param_loads, 2u);
}

TEST(SnippetsReductionPasses, AllocateBuffersSharesMemoryOnlyWhenLifetimesAllow) {
  // overlapping: x*2 lives in loops 1..3, exp in 2..3: two regions either way
  for (bool optimized : {false, true}) {
    auto lir = buffered(softmax_body(2, 40), 2, 40);
    EXPECT_EQ(lp::allocate_buffers(*lir, optimized), 2u);
    EXPECT_EQ(lir->buffer_offsets(), (std::vector<int64_t>{0}));  // one scratch pointer for all
    EXPECT_EQ(lir->scratch_size(), 96);
    std::set<double> offsets;
    for (Expression* b : of_type(*lir, "Buffer")) {
      offsets.insert(b->op().attr("offset"));
      EXPECT_EQ(b->input_expr(0)->op().attr("buffer_offset", -1), b->op().attr("offset"));  // its Store
    }
    EXPECT_EQ(offsets, (std::set<double>{0, 48}));  // rows rounded up to 16 floats
  }
  // in place: x*2 is last read in loop 2, which writes exp - the same row serves both when optimized
  for (bool optimized : {false, true}) {
    auto lir = buffered(softmax_body(2, 40, "Softmax", false), 2, 40);
    const size_t regions = lp::allocate_buffers(*lir, optimized);
    EXPECT_EQ(regions, optimized ? 1u : 2u);
    EXPECT_EQ(lir->scratch_size(), optimized ? 48 : 96);
    std::set<double> offsets;
    for (Expression* b : of_type(*lir, "Buffer")) {
      offsets.insert(b->op().attr("offset"));
      EXPECT_EQ(b->op().attr("ptr", -1), 0);
      EXPECT_EQ(b->input_expr(0)->op().attr("buffer_offset", -1), b->op().attr("offset"));  // its Store
      for (const auto& c : b->get_output_port_connector(0)->get_consumers())
        EXPECT_EQ(c.get_expr()->op().attr("buffer_offset", -1), b->op().attr("offset"));
    }
    EXPECT_EQ(offsets.size(), regions);
  }
}

// ---- whole kernels ----

class SnippetsSoftmax : public SnippetsIsaTest {
 protected:
  snippets::CompileOptions opt(bool optimize_buffers = true, int unroll = 0) const {
    snippets::CompileOptions o = isa_options();
    o.optimize_buffers = optimize_buffers;
    o.unroll = unroll;
    return o;
  }
};

TEST_P(SnippetsSoftmax, MatchesTheReferenceForEveryTail) {
  std::mt19937 rng(11);
  for (const std::string op : {"Softmax", "LogSoftmax"})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 64, 100, 1000})
      for (bool reuse : {false, true})
        for (bool optimized : {false, true}) {
          SCOPED_TRACE(op + " n=" + std::to_string(n) + " reuse=" + std::to_string(reuse) + " optimized=" + std::to_string(optimized));
          auto g = softmax_body(5, n, op, reuse);
          EXPECT_EQ(compare_with_reference(g, {random_tensor({5, n}, rng(), -6.0f, 6.0f)}, 1e-5f, 1e-6f, opt(optimized)), 0);
        }
}

TEST_P(SnippetsSoftmax, UnrollFactorsAgree) {
  std::mt19937 rng(12);
  for (int unroll : {1, 2, 4})
    for (int64_t n : {40, 128, 131}) {
      SCOPED_TRACE("unroll=" + std::to_string(unroll) + " n=" + std::to_string(n));
      EXPECT_EQ(compare_with_reference(softmax_body(3, n), {random_tensor({3, n}, rng(), -4.0f, 4.0f)}, 1e-5f, 1e-6f, opt(true, unroll)), 0);
    }
}

// Eleven values cross from the first loop to the last: eleven Buffers, one scratch pointer (a
// pointer each would not fit the general-purpose registers).
TEST_P(SnippetsSoftmax, ManyBuffersShareOneDataPointer) {
  const int64_t n = 37;
  auto g = snippets_body({{4, n}});
  std::vector<ir::Value*> scaled;
  ir::Value* sum = nullptr;
  for (int k = 1; k <= 11; ++k) {
    scaled.push_back(g->add_node("Mul", {g->inputs()[0], scalar_const(*g, 0.1f * static_cast<float>(k))}, 1)->output(0));
    sum = sum ? g->add_node("Add", {sum, scaled.back()}, 1)->output(0) : scaled.back();
  }
  ir::Value* y = g->add_node("Softmax", {sum}, 1)->output(0);
  for (ir::Value* v : scaled) y = g->add_node("Add", {y, v}, 1)->output(0);
  g->add_output(y);
  for (bool optimized : {false, true}) {
    SCOPED_TRACE(optimized ? "optimized" : "non-optimized");
    EXPECT_EQ(compare_with_reference(g, {random_tensor({4, n}, 16, 2.0f)}, 1e-5f, 1e-5f, opt(optimized)), 0);
    auto k = snippets::compile(*g, {{{4, n}}, {4, n}}, opt(optimized));
    size_t buffers = 0;
    for (size_t at = 0; (at = k->describe().find("Buffer#", at)) != std::string::npos; ++at) ++buffers;
    EXPECT_GE(buffers, 11u);
  }
}

// Attention scores: Softmax(q / 8 + mask) with a [1, 1, 1, S] mask broadcast over heads and rows.
TEST_P(SnippetsSoftmax, AttentionScoresWithABroadcastMask) {
  std::mt19937 rng(13);
  const Shape s = {2, 3, 20, 20}, m = {2, 1, 1, 20};
  auto g = snippets_body({s, m});
  ir::Value* d = g->add_node("Div", {g->inputs()[0], scalar_const(*g, 8.0f)}, 1)->output(0);
  ir::Value* a = g->add_node("Add", {d, g->inputs()[1]}, 1)->output(0);
  g->add_output(g->add_node("Softmax", {a}, 1)->output(0));
  Tensor mask = random_tensor(m, rng(), -1.0f, 0.0f);
  for (int64_t i = 0; i < mask.size(); i += 3) mask.data<float>()[i] = -10000.0f;
  EXPECT_EQ(compare_with_reference(g, {random_tensor(s, rng(), -20.0f, 20.0f), mask}, 1e-5f, 1e-6f, opt()), 0);
  ir::infer_shapes(*g);
  auto k = snippets::compile(*g, {{s, m}, s}, opt());
  EXPECT_EQ(k->inner(), 20);
  EXPECT_EQ(k->rows(), 2 * 3 * 20);
  EXPECT_GT(k->scratch_size(), 0);
}

// Opset 11 Softmax over the flattened dims from the axis: [4, 3, 7] with axis 1 reduces 21.
TEST_P(SnippetsSoftmax, Opset11ReducesTheFlattenedTrailingDims) {
  std::mt19937 rng(14);
  auto g = snippets_body({{4, 3, 7}});
  g->opset_imports[""] = 11;
  ir::Node* sm = g->add_node("Softmax", {g->add_node("Neg", {g->inputs()[0]}, 1)->output(0)}, 1);
  sm->set_opset(11);
  sm->attrs["axis"] = ir::Attribute(int64_t{1});
  g->add_output(sm->output(0));
  EXPECT_EQ(compare_with_reference(g, {random_tensor({4, 3, 7}, rng(), -3.0f, 3.0f)}, 1e-5f, 1e-6f, opt()), 0);
  ir::infer_shapes(*g);
  EXPECT_EQ(snippets::compile(*g, {{{4, 3, 7}}, {4, 3, 7}}, opt())->inner(), 21);
}

TEST_P(SnippetsSoftmax, WhatItCannotReduceIsAnError) {
  // opset 13 over a dim that is not the last
  auto g = snippets_body({{4, 3, 7}});
  ir::Node* sm = g->add_node("Softmax", {g->add_node("Neg", {g->inputs()[0]}, 1)->output(0)}, 1);
  sm->attrs["axis"] = ir::Attribute(int64_t{1});
  g->add_output(sm->output(0));
  ir::infer_shapes(*g);
  EXPECT_THROW(snippets::compile(*g, {{{4, 3, 7}}, {4, 3, 7}}, opt()), Error);
  // an input broadcasting over part of the reduced dims (opset 11, from dim 1)
  EXPECT_THROW(snippets::make_schedule({{{4, 3, 7}, {1, 3, 1}}, {4, 3, 7}}, 1), Error);
  EXPECT_NO_THROW(snippets::make_schedule({{{4, 3, 7}, {4, 1, 1}}, {4, 3, 7}}, 1));
}

// Rows split across threads: each thread has its own scratch row.
TEST_P(SnippetsSoftmax, RowRangesFromTwoThreadsUseTheirOwnScratch) {
  std::mt19937 rng(15);
  const Shape s = {64, 300};
  auto g = softmax_body(64, 300);
  auto k = snippets::compile(*g, {{s}, s}, opt());
  auto x = random_tensor(s, rng(), -5, 5);
  std::vector<float> whole(static_cast<size_t>(shape_size(s))), split(whole.size(), -7.0f);
  k->run({x.data<float>()}, {whole.data()}, 0, 64);
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    for (int rep = 0; rep < 20; ++rep) {
      if (t == 0) k->run({x.data<float>()}, {split.data()}, 0, 29);
      else k->run({x.data<float>()}, {split.data()}, 29, 64);
    }
  }
  EXPECT_EQ(whole, split);
}

KILN_SNIPPETS_BOTH_ISAS(SnippetsSoftmax);

}  // namespace
}  // namespace kiln::test::test_snippets_reduction
