// The LSTM node (oneDNN lstm_forward) against the reference kernel: every direction, batch 1
// and more (the permuted Y), biases, initial states, the outputs a model asks for, and the
// forms that stay on the reference kernel.
#include <gtest/gtest.h>
#include <omp.h>

#include "cpu/graph.hpp"
#include "ir/op_registry.hpp"

#include "cpu_test_util.hpp"

namespace test_cpu_lstm {

using namespace kiln;
using namespace kiln::test;

namespace {

struct LstmCase {
  int64_t T, N, C, H;
  std::string direction = "forward";
  bool bias = true, initial = false;
  int outputs = 3;  // Y, Y_h, Y_c (fewer: the first ones)
  bool y_unused = false;  // Y omitted (empty name), only Y_h / Y_c read
};

// x [T, N, C] -> LSTM -> its outputs (each a graph output); returns the graph and its inputs.
std::pair<std::shared_ptr<ir::Graph>, std::vector<Tensor>> lstm_graph(const LstmCase& c, uint32_t seed,
                                                                      const std::map<std::string, ir::Attribute>& extra = {}) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 14;
  std::vector<Tensor> feeds = {random_tensor({c.T, c.N, c.C}, seed)};
  std::vector<ir::Value*> ins = {g->add_input("x", {DType::f32, ir::PartialShape(Shape{c.T, c.N, c.C})}),
                                 g->add_constant("W", random_tensor({D, 4 * c.H, c.C}, seed + 1, 0.5f)),
                                 g->add_constant("R", random_tensor({D, 4 * c.H, c.H}, seed + 2, 0.5f))};
  ins.push_back(c.bias ? g->add_constant("B", random_tensor({D, 8 * c.H}, seed + 3, 0.5f)) : nullptr);
  if (c.initial) {
    ins.push_back(nullptr);  // sequence_lens
    ins.push_back(g->add_input("h0", {DType::f32, ir::PartialShape(Shape{D, c.N, c.H})}));
    ins.push_back(g->add_input("c0", {DType::f32, ir::PartialShape(Shape{D, c.N, c.H})}));
    feeds.push_back(random_tensor({D, c.N, c.H}, seed + 4));
    feeds.push_back(random_tensor({D, c.N, c.H}, seed + 5));
  }
  while (!ins.empty() && !ins.back()) ins.pop_back();
  auto* n = g->add_node("LSTM", ins, c.outputs, "lstm");
  n->attrs["hidden_size"] = c.H;
  n->attrs["direction"] = c.direction;
  for (const auto& [k, v] : extra) n->attrs[k] = v;
  for (int i = c.y_unused ? 1 : 0; i < c.outputs; ++i) g->add_output(n->output(static_cast<size_t>(i)));
  return {g, feeds};
}

}  // namespace

TEST(CpuLstm, MatchesReferenceInEveryDirectionAndBatch) {
  std::vector<LstmCase> cases = {
      {5, 1, 7, 8},                                    // forward, batch 1
      {6, 3, 5, 16, "reverse"},                        // reverse, batch 3
      {4, 1, 9, 12, "bidirectional"},                  // Y as oneDNN writes it
      {7, 3, 6, 10, "bidirectional"},                  // Y permuted from [T, N, D, H]
      {3, 2, 4, 5, "bidirectional", false, true},      // no bias, initial states
      {5, 2, 3, 7, "forward", true, true, 1},          // only Y
      {4, 2, 6, 6, "bidirectional", true, false, 3, true},  // Y omitted
      {1, 1, 1, 1},                                    // one of everything
  };
  // a team of one thread: one primitive for both directions (Y permuted when N > 1); of two:
  // one primitive per direction, run at once
  const int team = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    uint32_t seed = 10;
    for (const LstmCase& c : cases) {
      SCOPED_TRACE(cat(threads, " threads, T ", c.T, " N ", c.N, " C ", c.C, " H ", c.H, " ", c.direction));
      auto [g, feeds] = lstm_graph(c, seed);
      seed += 10;
      auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
      EXPECT_EQ(count_type(*cg, "LSTM"), 1u);
      EXPECT_EQ(count_type(*cg, "Reference"), 0u);
    }
  }
  omp_set_num_threads(team);
}

TEST(CpuLstm, FormsOneDnnDoesNotComputeStayOnTheReferenceKernel) {
  // clip, other activations, layout 1: the reference kernel, with the same results as before
  const LstmCase c{4, 2, 3, 5, "forward"};
  std::vector<std::map<std::string, ir::Attribute>> forms = {
      {{"clip", ir::Attribute(0.5f)}},
      {{"activations", ir::Attribute(std::vector<std::string>{"Sigmoid", "Relu", "Tanh"})}},
      {{"input_forget", ir::Attribute(int64_t(1))}},
  };
  for (const auto& extra : forms) {
    auto [g, feeds] = lstm_graph(c, 3, extra);
    auto cg = compare_with_reference(g, feeds, 1e-4, 1e-5);
    EXPECT_EQ(count_type(*cg, "LSTM"), 0u);
    EXPECT_EQ(count_type(*cg, "Reference"), 1u);
  }
  // default activations written out are the common form
  auto [g, feeds] = lstm_graph(c, 3, {{"activations", ir::Attribute(std::vector<std::string>{"sigmoid", "tanh", "tanh"})}});
  EXPECT_EQ(count_type(*compare_with_reference(g, feeds, 1e-4, 1e-5), "LSTM"), 1u);
}

}  // namespace test_cpu_lstm

namespace test_cpu_lstm {

// An inference called from inside the caller's own parallel region (a team of two, the call on
// one of its threads): a parallel region the kernels open there runs on that one thread, and
// both directions must still be computed.
TEST(CpuLstm, BothDirectionsInsideTheCallersParallelRegion) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "a team of one thread: no parallel region to be in";
  uint32_t seed = 300;
  for (const LstmCase& c : {LstmCase{4, 1, 9, 12, "bidirectional"}, LstmCase{7, 3, 6, 10, "bidirectional"}}) {
    SCOPED_TRACE(cat("T ", c.T, " N ", c.N, " ", c.direction));
    const auto made = lstm_graph(c, seed);  // (no structured binding: clang's regions cannot capture one)
    const std::shared_ptr<ir::Graph>& g = made.first;
    const std::vector<Tensor>& feeds = made.second;
    seed += 10;
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 0) compare_with_reference(g, feeds, 1e-4, 1e-5);
    }
  }
}

}  // namespace test_cpu_lstm
