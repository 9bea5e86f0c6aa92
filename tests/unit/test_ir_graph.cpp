#include <gtest/gtest.h>

#include "ir/graph.hpp"

using namespace kiln;

TEST(IrGraph, Placeholder) {
  ir::Graph g;
  auto* x = g.add_input("x", {DType::f32, ir::PartialShape(Shape{2, 3})});
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(x->type.shape.to_string(), "[2,3]");
}
