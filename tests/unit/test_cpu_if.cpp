// If on the fast path: a condition that folds to a constant puts the chosen branch's nodes in
// the If's place (specialize_shapes); a run-time condition keeps the If, its branches
// specialised to the input shapes and compiled as executors of their own (cpu If node);
// a branch kiln cannot type for the shapes runs as the model has it on the reference kernels when
// taken (and fails there if it really cannot run); executors owned by a graph are torn down
// safely when a thread exits.
#include <gtest/gtest.h>

#include <thread>

#include "cpu/executor.hpp"
#include "cpu_test_util.hpp"
#include "error_util.hpp"

namespace test_cpu_if {

using namespace kiln;
using namespace kiln::test;

namespace {

// A branch reading the outer value `x` [2, 3]: then = Relu(x) * 2 (and x + 1 as a second
// output), else = Sigmoid(x) (and Reshape(x, else_shape)).
std::shared_ptr<ir::Graph> branch(bool then, const Shape& else_shape) {
  auto b = make_graph(13);
  ir::Value* x = b->add_input("x", {DType::f32, ir::PartialShape()});
  if (then) {
    ir::Node* r = b->add_node("Relu", {x}, 1, "relu");
    ir::Node* m = b->add_node("Mul", {r->output(0), b->add_constant("two", Tensor::scalar<float>(2.0f))}, 1, "mul");
    ir::Node* a = b->add_node("Add", {x, b->add_constant("one", Tensor::scalar<float>(1.0f))}, 1, "add");
    b->add_output(m->output(0));
    b->add_output(a->output(0));
  } else {
    ir::Node* s = b->add_node("Sigmoid", {x}, 1, "sigmoid");
    std::vector<int64_t> dims(else_shape.begin(), else_shape.end());
    ir::Node* r = b->add_node("Reshape", {x, b->add_constant("shape", Tensor::from_vector<int64_t>(dims, {static_cast<int64_t>(dims.size())}))},
                              1, "reshape");
    b->add_output(s->output(0));
    b->add_output(r->output(0));
  }
  return b;
}

// x [n, 3], cond (bool scalar input, or Shape(x)[0] == 2 when `folded`) -> If -> y, z.
// x is [n, 3]: the model loads whatever the branches say about other shapes.
std::shared_ptr<ir::Graph> if_model(bool folded, const Shape& else_shape = {2, 3}) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), 3})});
  ir::Value* cond;
  if (folded) {
    ir::Node* sh = g->add_node("Shape", {x}, 1, "shape");
    ir::Node* ga = g->add_node("Gather", {sh->output(0), g->add_constant("zero", Tensor::scalar<int64_t>(0))}, 1, "dim0");
    ir::Node* eq = g->add_node("Equal", {ga->output(0), g->add_constant("two", Tensor::scalar<int64_t>(2))}, 1, "eq");
    cond = eq->output(0);
  } else {
    cond = g->add_input("c", {DType::boolean, ir::PartialShape(Shape{})});
  }
  ir::Node* iff = g->add_node("If", {cond, x}, 2, "if");
  iff->attrs["then_branch"] = ir::Attribute(branch(true, else_shape));
  iff->attrs["else_branch"] = ir::Attribute(branch(false, else_shape));
  iff->attrs["kiln_captures"] = ir::Attribute(std::vector<std::string>{"x"});
  ir::Node* y = g->add_node("Identity", {iff->output(0)}, {"y"}, "y");
  ir::Node* z = g->add_node("Identity", {iff->output(1)}, {"z"}, "z");
  g->add_output(y->output(0));
  g->add_output(z->output(0));
  ir::infer_shapes(*g);
  return g;
}

Tensor flag(bool v) { return Tensor::scalar<bool>(v); }

void expect_same(const std::vector<Tensor>& want, const std::vector<Tensor>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) expect_close(want[i], got[i], 1e-6, 1e-6);
}

}  // namespace

TEST(CpuIf, ConstantConditionInlinesTheChosenBranch) {
  auto g = if_model(/*folded=*/true);
  auto copy = g->clone();
  auto r = transforms::specialize_shapes(*copy, {Shape{2, 3}});
  EXPECT_TRUE(r.all_static);
  size_t ifs = 0, relus = 0;
  for (const ir::Node* n : copy->nodes()) {
    ifs += n->op_type() == "If";
    relus += n->op_type() == "Relu";
  }
  EXPECT_EQ(ifs, 0u);
  EXPECT_EQ(relus, 1u) << "the then branch's nodes took the If's place";
  ASSERT_EQ(copy->outputs().size(), 2u);
  EXPECT_EQ(copy->outputs()[0]->name(), "y");
  EXPECT_EQ(copy->outputs()[1]->name(), "z");

  cpu::Executor ex(g);
  const Tensor x = random_tensor({2, 3}, 3);
  expect_same(runtime::ReferenceExecutor(g).run({x}), ex.run({x}));
}

TEST(CpuIf, RunTimeConditionRunsEachBranchOnTheFastPath) {
  auto g = if_model(/*folded=*/false);
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{2, 3}, Shape{}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  EXPECT_EQ(count_type(*plan.cpu, "If"), 1u);
  runtime::ReferenceExecutor ref(g);
  for (int i = 0; i < 3; ++i)
    for (bool c : {true, false, true}) {
      const Tensor x = random_tensor({2, 3}, 10 + i, -2.0f, 2.0f);
      expect_same(ref.run({x, flag(c)}), ex.run({x, flag(c)}));
    }
}

TEST(CpuIf, BranchThatCannotTakeTheShapesFailsOnlyWhenTaken) {
  auto g = if_model(/*folded=*/false, /*else_shape=*/{4});  // 6 values cannot be [4]
  cpu::Executor ex(g);
  const auto& plan = ex.plan_for({Shape{2, 3}, Shape{}});
  ASSERT_TRUE(plan.cpu) << plan.fallback_reason;
  const Tensor x = random_tensor({2, 3}, 5);
  expect_same(runtime::ReferenceExecutor(g).run({x, flag(true)}), ex.run({x, flag(true)}));
  const std::string msg = error_of([&] { ex.run({x, flag(false)}); });
  EXPECT_NE(msg.find("'if'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("else_branch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("running it as given"), std::string::npos) << "tried on the reference kernels: " << msg;
  EXPECT_NE(msg.find("cannot reshape"), std::string::npos) << msg;
}

TEST(CpuIf, BranchExecutorsGoAwayWithTheThreadThatRanThem) {
  auto g = if_model(/*folded=*/false);
  auto ex = std::make_shared<cpu::Executor>(g);
  const Tensor x = random_tensor({2, 3}, 7);
  const auto want = runtime::ReferenceExecutor(g).run({x, flag(false)});
  std::vector<Tensor> got;
  std::thread t([&] {
    ex->run({x, flag(true)});
    got = ex->run({x, flag(false)});
  });  // the thread's graphs (and the If's branch executors) are destroyed as it exits
  t.join();
  expect_same(want, got);
  std::thread t2([&] {
    ex->run({x, flag(true)});
    ex.reset();  // destroyed on a thread that holds its graphs
  });
  t2.join();
}

// A branch whose Conv reads its weights from the enclosing graph (by name, as exporters write
// Silero VAD): the weights become the branch's constants, so the Conv runs on oneDNN; the
// profile lists the branch's nodes under the If, which keeps only its own time.
TEST(CpuIf, BranchReadsOuterWeightsAndIsProfiledUnderTheIf) {
  auto g = make_graph(13);
  ir::Value* x = g->add_input("x", {DType::f32, ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("n"), 3, 8, 8})});
  ir::Value* c = g->add_input("c", {DType::boolean, ir::PartialShape(Shape{})});
  ir::Value* w = g->add_constant("w", random_tensor({4, 3, 3, 3}, 21));
  auto body = [&](bool conv) {
    auto b = make_graph(13);
    ir::Value* bx = b->add_input("x", {DType::f32, ir::PartialShape()});
    ir::Value* bw = b->add_input("w", {DType::f32, ir::PartialShape()});
    ir::Node* n = conv ? b->add_node("Conv", {bx, bw}, 1, "conv") : b->add_node("Conv", {b->add_node("Neg", {bx}, 1, "neg")->output(0), bw}, 1, "conv2");
    n->attrs["pads"] = ir::Attribute(std::vector<int64_t>{1, 1, 1, 1});
    b->add_output(n->output(0));
    return b;
  };
  ir::Node* iff = g->add_node("If", {c, x, w}, {"y"}, "if");
  iff->attrs["then_branch"] = ir::Attribute(body(true));
  iff->attrs["else_branch"] = ir::Attribute(body(false));
  iff->attrs["kiln_captures"] = ir::Attribute(std::vector<std::string>{"x", "w"});
  g->add_output(iff->output(0));
  ir::infer_shapes(*g);

  cpu::Executor ex(g);
  runtime::ReferenceExecutor ref(g);
  const Tensor in = random_tensor({2, 3, 8, 8}, 22);
  for (bool cond : {true, false}) {
    std::vector<ProfilingInfo> profile;
    const auto got = ex.run({in, flag(cond)}, &profile);
    expect_same(ref.run({in, flag(cond)}), got);
    const std::string conv = cond ? "if/conv" : "if/conv2";
    bool found = false;
    double if_time = -1, nested_sum = 0;
    for (const auto& row : profile) {
      if (row.node_name == conv) {
        found = true;
        EXPECT_EQ(row.node_type, "Convolution") << "the branch's weights are constants";
      }
      if (row.node_name == "if") if_time = row.real_time_us;
      if (row.node_name.rfind("if/", 0) == 0) nested_sum += row.real_time_us;
    }
    EXPECT_TRUE(found) << conv << " is not in the profile";
    EXPECT_GE(if_time, 0.0);
    EXPECT_GT(nested_sum, 0.0);
  }
}

}  // namespace test_cpu_if
