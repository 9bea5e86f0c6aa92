// Folding a Gather of consecutive rows of a constant as a view of its rows (fold_as_view): the
// folded constant shares the table's storage and holds what the Gather kernel computes; rows
// that are not consecutive, not adjacent in memory, or strings are copied by the kernel.
#include <gtest/gtest.h>

#include "transforms/fold_as_view.hpp"
#include "transforms/specialize_shapes.hpp"
#include "transforms_test_util.hpp"

namespace test_transforms_fold_as_view {

using namespace kiln;
using namespace kiln::test;

namespace {

// x [rows of the result] + Gather(table, indices, axis): after specialize_shapes, the Add's
// second input is the folded Gather. Returns it, and checks the result against the graph as
// built (the reference kernels).
Tensor folded_gather(const Tensor& table, const Tensor& indices, int64_t axis) {
  auto g = new_graph();
  ir::Value* t = g->add_constant("table", table);
  ir::Value* i = g->add_constant("indices", indices);
  ir::Node* gather = g->add_node("Gather", {t, i}, 1, "gather");
  gather->attrs["axis"] = ir::Attribute(axis);
  ir::infer_shapes(*g);
  const Shape out = gather->output(0)->type.shape.to_shape();
  std::vector<ir::Dim> dims(out.begin(), out.end());
  ir::Value* x = g->add_input("x", f32_type(dims));
  ir::Node* add = g->add_node("Add", {x, gather->output(0)}, 1, "add");
  g->add_output(add->output(0));
  ir::infer_shapes(*g);
  auto before = g->clone();
  transforms::specialize_shapes(*g, {out});
  EXPECT_EQ(count_op(*g, "Gather"), 0u);
  expect_same_outputs(before, g, {rand_f32(out, 5)});
  const ir::Value* c = nullptr;
  for (const ir::Node* n : g->nodes())
    if (n->op_type() == "Add") c = n->input(1);
  EXPECT_TRUE(c && c->is_constant());
  return c && c->is_constant() ? c->constant() : Tensor();
}

const float* row(const Tensor& t, int64_t r, int64_t width) { return t.data<float>() + r * width; }

}  // namespace

TEST(TransformsFoldAsView, ConsecutiveRowsShareTheTable) {
  const Tensor table = rand_f32({6, 4}, 1);
  const Tensor v = folded_gather(table, Tensor::from_vector<int64_t>({0, 1, 2}, {3}), 0);  // Range(0, 3)
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  EXPECT_EQ(v.raw(), table.raw());
  const Tensor w = folded_gather(table, Tensor::from_vector<int64_t>({2, 3, 4, 5}, {2, 2}), 0);
  EXPECT_EQ(w.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(w.raw(), row(table, 2, 4));
}

TEST(TransformsFoldAsView, NegativeIndicesCountFromTheEnd) {
  const Tensor table = rand_f32({6, 4}, 2);
  const Tensor v = folded_gather(table, Tensor::from_vector<int32_t>({-3, -2}, {2}), 0);
  EXPECT_EQ(v.raw(), row(table, 3, 4));
}

TEST(TransformsFoldAsView, InnerAxisUnderUnitDims) {
  const Tensor table = rand_f32({1, 6, 4}, 3);  // a [1, positions, hidden] table
  const Tensor v = folded_gather(table, Tensor::from_vector<int64_t>({1, 2, 3}, {3}), 1);
  EXPECT_EQ(v.shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(v.raw(), row(table, 1, 4));
}

TEST(TransformsFoldAsView, OtherGathersAreCopies) {
  const Tensor table = rand_f32({6, 4}, 4);
  auto copied = [&](const Tensor& t) {
    const char* b = static_cast<const char*>(table.raw());
    const char* p = static_cast<const char*>(t.raw());
    return p < b || p >= b + table.byte_size();
  };
  EXPECT_TRUE(copied(folded_gather(table, Tensor::from_vector<int64_t>({0, 2}, {2}), 0)));     // a gap
  EXPECT_TRUE(copied(folded_gather(table, Tensor::from_vector<int64_t>({3, 2}, {2}), 0)));     // descending
  EXPECT_TRUE(copied(folded_gather(table, Tensor::from_vector<int64_t>({5, -6}, {2}), 0)));    // 5 then 0
  EXPECT_TRUE(copied(folded_gather(table, Tensor::from_vector<int64_t>({1, 2}, {2}), 1)));     // columns
  const Tensor outer = rand_f32({2, 6, 4}, 5);
  const Tensor o = folded_gather(outer, Tensor::from_vector<int64_t>({1, 2}, {2}), 1);  // rows of two slices
  const char* b = static_cast<const char*>(outer.raw());
  const char* p = static_cast<const char*>(o.raw());
  EXPECT_TRUE(p < b || p >= b + outer.byte_size());
}

TEST(TransformsFoldAsView, StringsAndOutOfRangeAreLeftToTheKernel) {
  auto g = new_graph();
  ir::Node* n = g->add_node("Gather", {g->add_constant("t", rand_f32({4, 2}, 6)),
                                       g->add_constant("i", Tensor::from_vector<int64_t>({3, 4}, {2}))},
                            1, "gather");
  const Tensor table = rand_f32({4, 2}, 6);
  const Tensor past_the_end = Tensor::from_vector<int64_t>({3, 4}, {2});
  EXPECT_FALSE(transforms::fold_as_view(*n, {&table, &past_the_end}).has_value());  // the kernel throws
  Tensor strings(DType::string, {2});
  const Tensor first = Tensor::from_vector<int64_t>({0}, {1});
  EXPECT_FALSE(transforms::fold_as_view(*n, {&strings, &first}).has_value());
  const Tensor in_range = Tensor::from_vector<int64_t>({2, 3}, {2});
  const std::optional<Tensor> v = transforms::fold_as_view(*n, {&table, &in_range});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->raw(), row(table, 2, 2));
  EXPECT_EQ(v->shape(), (Shape{2, 2}));
}

}  // namespace test_transforms_fold_as_view
