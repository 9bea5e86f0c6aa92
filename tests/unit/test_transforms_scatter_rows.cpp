// ScatterRowsToScatterND: ScatterElements along axis 0 with one expanded index per row becomes
// ScatterND of whole rows; the others stay, each with its reason.
#include <gtest/gtest.h>

#include "transforms/scatter_rows.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_scatter_rows {

using namespace kiln;
using namespace kiln::test;
using transforms::kScatterRowsToScatterND;
using transforms::PassLog;
using transforms::scatter_rows_to_scatter_nd;

namespace {

// data [6, 4, 3] <- updates [rows, 4, 3] at Expand(idx [rows, 1, 1], updates' shape) along `axis`;
// `idx_shape` / `upd_shape` change what the indices and updates look like
std::shared_ptr<ir::Graph> scatter(std::vector<ir::Dim> idx_shape, std::vector<ir::Dim> upd_shape, int64_t axis,
                                   const std::string& reduction = "") {
  auto g = new_graph(16);
  ir::Value* data = g->add_input("data", f32_type({6, 4, 3}));
  ir::Value* idx = g->add_input("idx", {DType::i64, ir::PartialShape(idx_shape)});
  ir::Value* upd = g->add_input("upd", f32_type(upd_shape));
  std::vector<int64_t> target;
  for (const ir::Dim& d : upd_shape) target.push_back(d.value);
  ir::Node* e = g->add_node("Expand", {idx, g->add_constant("shape", Tensor::from_vector<int64_t>(target, {3}))},
                            {"expanded"}, "expand");
  ir::Node* s = g->add_node("ScatterElements", {data, e->output(0), upd}, {"y"}, "scatter");
  s->attrs["axis"] = axis;
  if (!reduction.empty()) s->attrs["reduction"] = reduction;
  g->add_output(s->output(0));
  ir::infer_shapes(*g);
  return g;
}

std::string skip_reason(const PassLog& log) {
  const auto skipped = entries(log, kScatterRowsToScatterND, false);
  return skipped.empty() ? "" : skipped[0].message;
}

}  // namespace

TEST(TransformsScatterRows, ExpandedRowIndicesBecomeScatterND) {
  auto g = scatter({3, 1, 1}, {3, 4, 3}, 0);
  auto before = g->clone();
  PassLog log;
  EXPECT_EQ(scatter_rows_to_scatter_nd(*g, &log), 1u);
  g->remove_dead();
  ir::infer_shapes(*g);
  EXPECT_EQ(count_op(*g, "ScatterND"), 1u);
  EXPECT_EQ(count_op(*g, "ScatterElements"), 0u);
  EXPECT_EQ(count_op(*g, "Expand"), 0u) << "the expanded indices are no longer read";
  EXPECT_EQ(output_names(*g), (std::vector<std::string>{"y"}));
  // rows 4, 0 and -1 (the last, 5) of the data written; the other rows kept
  expect_same_outputs(before, g,
                      {rand_f32({6, 4, 3}, 1), Tensor::from_vector<int64_t>({4, 0, -1}, {3, 1, 1}),
                       rand_f32({3, 4, 3}, 2)});
}

TEST(TransformsScatterRows, OtherScattersStay) {
  struct Case {
    std::shared_ptr<ir::Graph> g;
    const char* why;
  };
  const Case cases[] = {
      {scatter({3, 1, 1}, {3, 4, 3}, 0, "add"), "reduction is add"},
      {scatter({6, 1, 1}, {6, 4, 3}, 1), "along axis 1"},
      {scatter({3, 4, 1}, {3, 4, 3}, 0), "not one per row"},
      {scatter({3, 1, 1}, {3, 2, 3}, 0), "do not cover whole rows"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    PassLog log;
    EXPECT_EQ(scatter_rows_to_scatter_nd(*c.g, &log), 0u);
    EXPECT_EQ(count_op(*c.g, "ScatterElements"), 1u);
    EXPECT_NE(skip_reason(log).find(c.why), std::string::npos) << skip_reason(log);
  }
}

}  // namespace test_transforms_scatter_rows
