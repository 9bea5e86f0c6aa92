// The GRU node (kiln's gru_f32) against the reference kernel: every direction, batch 1 and more,
// both forms of linear_before_reset, biases, an initial state, the outputs a model asks for,
// hidden sizes that leave a vector tail, one or two threads; and the forms that stay on the
// reference kernel. Where the CPU has no AVX2 every GRU runs on the reference kernel, which
// these tests then check instead.
#include <gtest/gtest.h>
#include <omp.h>

#include "cpu/graph.hpp"
#include "cpu/gru_f32.hpp"
#include "ir/op_registry.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_gru {

using namespace kiln;
using namespace kiln::test;

namespace {

struct GruCase {
  int64_t T, N, C, H;
  std::string direction = "forward";
  bool linear_before_reset = false;
  bool bias = true, initial = false;
  int outputs = 2;        // Y, Y_h (1: only Y)
  bool y_unused = false;  // Y omitted, only Y_h read
};

// x [T, N, C] -> GRU -> its outputs (each a graph output); returns the graph and its inputs.
std::pair<std::shared_ptr<ir::Graph>, std::vector<Tensor>> gru_graph(const GruCase& c, uint32_t seed,
                                                                     const std::map<std::string, ir::Attribute>& extra = {}) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 14;
  std::vector<Tensor> feeds = {random_tensor({c.T, c.N, c.C}, seed)};
  std::vector<ir::Value*> ins = {g->add_input("x", {DType::f32, ir::PartialShape(Shape{c.T, c.N, c.C})}),
                                 g->add_constant("W", random_tensor({D, 3 * c.H, c.C}, seed + 1, 0.5f)),
                                 g->add_constant("R", random_tensor({D, 3 * c.H, c.H}, seed + 2, 0.5f))};
  ins.push_back(c.bias ? g->add_constant("B", random_tensor({D, 6 * c.H}, seed + 3, 0.5f)) : nullptr);
  if (c.initial) {
    ins.push_back(nullptr);  // sequence_lens
    ins.push_back(g->add_input("h0", {DType::f32, ir::PartialShape(Shape{D, c.N, c.H})}));
    feeds.push_back(random_tensor({D, c.N, c.H}, seed + 4));
  }
  while (!ins.empty() && !ins.back()) ins.pop_back();
  auto* n = g->add_node("GRU", ins, c.outputs, "gru");
  n->attrs["hidden_size"] = c.H;
  n->attrs["direction"] = c.direction;
  if (c.linear_before_reset) n->attrs["linear_before_reset"] = int64_t{1};
  for (const auto& [k, v] : extra) n->attrs[k] = v;
  for (int i = c.y_unused ? 1 : 0; i < c.outputs; ++i) g->add_output(n->output(static_cast<size_t>(i)));
  return {g, feeds};
}

}  // namespace

TEST(CpuGru, MatchesReferenceInEveryDirectionBatchAndForm) {
  const std::vector<GruCase> cases = {
      {5, 1, 7, 8},                                             // forward, batch 1
      {6, 3, 5, 16, "reverse"},                                 // reverse, batch 3
      {4, 1, 9, 12, "bidirectional"},                           // a tail of 12 lanes
      {7, 3, 6, 21, "bidirectional", true},                     // linear_before_reset, tails of 5
      {9, 2, 40, 64, "forward", true},                          // PyTorch's form
      {3, 2, 4, 5, "bidirectional", false, false, true},        // no bias, an initial state
      {3, 2, 4, 5, "bidirectional", true, false, true},         // the same with linear_before_reset
      {5, 2, 3, 7, "reverse", false, true, true, 1},            // only Y
      {4, 2, 6, 6, "bidirectional", true, true, false, 2, true},  // Y omitted
      {1, 1, 1, 1},                                             // one of everything
  };
  const bool kiln = cpu::gru_f32::available();
  const int team = omp_get_max_threads();
  for (int threads : {1, 2}) {  // one thread: the directions in turn; two: one each at once
    omp_set_num_threads(threads);
    uint32_t seed = 10;
    for (const GruCase& c : cases) {
      SCOPED_TRACE(cat(threads, " threads, T ", c.T, " N ", c.N, " C ", c.C, " H ", c.H, " ", c.direction,
                       c.linear_before_reset ? " linear_before_reset" : ""));
      auto [g, feeds] = gru_graph(c, seed);
      seed += 10;
      auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
      EXPECT_EQ(count_type(*cg, "GRU"), kiln ? 1u : 0u);
      EXPECT_EQ(count_type(*cg, "Reference"), kiln ? 0u : 1u);
      for (const auto& n : cg->nodes()) {
        if (n->kind() == cpu::NodeKind::GRU) {
          EXPECT_EQ(n->impl, cpu::gru_f32::impl_name());
        }
      }
    }
  }
  omp_set_num_threads(team);
}

TEST(CpuGru, OtherFormsStayOnTheReferenceKernel) {
  // clip, other activations, layout 1, sequences shorter than T: the reference kernel
  const GruCase c{4, 2, 3, 5, "forward"};
  const std::vector<std::map<std::string, ir::Attribute>> forms = {
      {{"clip", ir::Attribute(0.5f)}},
      {{"activations", ir::Attribute(std::vector<std::string>{"Sigmoid", "Relu"})}},
      {{"layout", ir::Attribute(int64_t{1})}},
  };
  for (const auto& extra : forms) {
    auto [g, feeds] = gru_graph(c, 3, extra);
    auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
    EXPECT_EQ(count_type(*cg, "GRU"), 0u);
    EXPECT_EQ(count_type(*cg, "Reference"), 1u);
  }
  {  // sequence_lens [3, 4] of T = 4: the first sequence stops early
    auto [g, feeds] = gru_graph(c, 5);
    ir::Node* n = g->nodes().front();
    std::vector<ir::Value*> ins(n->inputs().begin(), n->inputs().end());
    ins.resize(5, nullptr);
    ins[4] = g->add_constant("lens", Tensor::from_vector<int32_t>({3, 4}, {2}));
    auto* m = g->add_node("GRU", ins, 2, "short");
    m->attrs = n->attrs;
    g->add_output(m->output(1));
    auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
    for (const auto& node : cg->nodes()) {
      if (node->name == "short") {
        EXPECT_EQ(node->kind(), cpu::NodeKind::Reference);
      }
    }
    EXPECT_EQ(count_type(*cg, "GRU"), cpu::gru_f32::available() ? 1u : 0u);  // the full-length one
  }
  // default activations written out are the common form
  auto [g, feeds] = gru_graph(c, 3, {{"activations", ir::Attribute(std::vector<std::string>{"sigmoid", "tanh"})}});
  EXPECT_EQ(count_type(*compare_with_reference(g, feeds, 1e-4, 1e-5), "GRU"), cpu::gru_f32::available() ? 1u : 0u);
}

}  // namespace test_cpu_gru
