// Snippets: compiled x64 kernels against the reference executor (ops, NaN / inf, tails,
// broadcasting, random bodies, row ranges from two threads).
#include <gtest/gtest.h>

#include <kiln/error.hpp>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <filesystem>
#include <fstream>

#include "snippets/lowered/pass/passes.hpp"

#include "snippets/target_machine.hpp"
#include "test_snippets_util.hpp"
#include "temp_dir.hpp"

namespace kiln::test::test_snippets_generator {
namespace {

Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo, float hi) {
  Tensor t(DType::f32, s);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

TEST(SnippetsSchedule, CollapsesDimsAndFindsBroadcasts) {
  snippets::KernelShapes ks{{{2, 3, 4, 5}, {1, 1, 4, 5}, {2, 3, 1, 1}, {}}, {2, 3, 4, 5}};
  auto sc = snippets::make_schedule(ks);
  EXPECT_EQ(sc.inner, 20);
  EXPECT_EQ(sc.outer, (std::vector<int64_t>{6}));
  EXPECT_EQ(sc.rows(), 6);
  EXPECT_EQ(sc.in_inner_broadcast, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(sc.in_strides[0], (std::vector<int64_t>{20}));
  EXPECT_EQ(sc.in_strides[1], (std::vector<int64_t>{0}));
  EXPECT_EQ(sc.in_strides[2], (std::vector<int64_t>{1}));
  EXPECT_EQ(sc.lir_in_shapes[2], (std::vector<int64_t>{6, 1}));

  snippets::KernelShapes ks2{{{4, 1, 8}, {4, 5, 8}}, {4, 5, 8}};
  auto sc2 = snippets::make_schedule(ks2);
  EXPECT_EQ(sc2.inner, 8);
  EXPECT_EQ(sc2.outer, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(sc2.in_strides[0], (std::vector<int64_t>{8, 0}));
  EXPECT_THROW(snippets::make_schedule({{{3, 2}}, {3, 4}}), Error);
}

// Every emitter test runs on both x64 targets: AVX-512 and AVX2 (forced on AVX-512 CPUs;
// skipped where the CPU lacks the ISA).
class SnippetsGeneratorTest : public SnippetsIsaTest {
 protected:
  snippets::CompileOptions opt(bool fma = true) const {
    snippets::CompileOptions o = isa_options();
    o.fuse_fma = fma;
    return o;
  }
};
using SnippetsEmitters = SnippetsGeneratorTest;
using SnippetsEndToEnd = SnippetsGeneratorTest;

// One op on a [3, n] input for every tail length around the vector length.
void check_unary(const snippets::CompileOptions& opt, const std::string& op, float lo, float hi, float rtol, float atol,
                 const std::map<std::string, ir::Attribute>& attrs = {}) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 15, 16, 17, 33, 1000, 4099}) {
    SCOPED_TRACE(op + " n=" + std::to_string(n));
    auto g = snippets_body({{3, n}});
    ir::Node* node = g->add_node(op, {g->inputs()[0]}, 1);
    for (const auto& [k, v] : attrs) node->attrs[k] = v;
    g->add_output(node->output(0));
    EXPECT_EQ(compare_with_reference(g, {random_tensor({3, n}, rng, lo, hi)}, rtol, atol, opt), 0);
  }
}

// The snippets kernel of one unary `op` over `xs` (a 1-D body), run once: its outputs.
std::vector<float> run_unary_kernel(const snippets::CompileOptions& opt, const std::string& op,
                                    const std::vector<float>& xs) {
  const int64_t n = static_cast<int64_t>(xs.size());
  auto g = snippets_body({{n}});
  g->add_output(g->add_node(op, {g->inputs()[0]}, 1)->output(0));
  ir::infer_shapes(*g);
  auto k = snippets::compile(*g, {{{n}}, {n}}, opt);
  std::vector<float> y(xs.size());
  k->run({xs.data()}, {y.data()}, 0, k->rows());
  return y;
}

TEST_P(SnippetsEmitters, ExactUnaryOps) {
  for (const char* op : {"Neg", "Abs", "Relu", "Sqrt", "Floor", "Ceil", "Round"}) check_unary(opt(), op, -5.0f, 5.0f, 0, 0);
  check_unary(opt(), "LeakyRelu", -5.0f, 5.0f, 0, 0, {{"alpha", 0.1f}});
  check_unary(opt(), "Clip", -5.0f, 5.0f, 0, 0, {{"min", -1.5f}, {"max", 2.0f}});
}

TEST_P(SnippetsEmitters, TranscendentalOpsWithinTolerance) {
  for (const char* op : {"Exp", "Sigmoid", "Tanh", "Erf"}) {
    check_unary(opt(), op, -10.0f, 10.0f, 1e-5f, 1e-6f);
    check_unary(opt(), op, -0.3f, 0.3f, 1e-5f, 1e-6f);
  }
  check_unary(opt(), "Exp", -100.0f, 90.0f, 1e-5f, 1e-6f);  // underflow and overflow
}

TEST_P(SnippetsEmitters, ErfMatchesStdErf) {
  std::vector<float> xs;
  for (float x = -6.0f; x <= 6.0f; x += 0.001f) xs.push_back(x);
  std::vector<float> y = run_unary_kernel(opt(), "Erf", xs);
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_TRUE(close(y[i], std::erf(xs[i]), 1e-5f, 1e-6f)) << xs[i];
  // Tanh and Exp against std:: as well.
  for (const char* op : {"Tanh", "Exp"}) {
    y = run_unary_kernel(opt(), op, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      float ref = std::string(op) == "Tanh" ? std::tanh(xs[i]) : std::exp(xs[i]);
      ASSERT_TRUE(close(y[i], ref, 1e-5f, 1e-6f)) << op << " " << xs[i] << ": " << y[i] << " vs " << ref;
    }
  }
}

// The exp core's accuracy in units of 2^-24 (half of float's epsilon: a correctly rounded
// result is within 1), over the range where e^x and the sigmoid's small side are normal
// floats (AVX2 flushes below e^-86.5): measured 2.6 for Exp (the degree-5 polynomial; the
// degree-7 one before it 1.2) and 4.0 / 4.9 for Sigmoid on AVX-512 / AVX2 (whose reciprocal
// estimate has 12 bits, not 14). A cheaper polynomial or a range reduction that loses bits
// fails here, long before the 1e-5 tolerance of the tests above would notice.
TEST_P(SnippetsEmitters, ExpAndSigmoidStayWithinAFewUnitsOfRoundoff) {
  std::vector<float> xs;
  for (float x = -86.0f; x <= 88.0f; x += 0.0037f) xs.push_back(x);
  for (const char* op : {"Exp", "Sigmoid"}) {
    const std::vector<float> y = run_unary_kernel(opt(), op, xs);
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i];
      const double ref = std::string(op) == "Exp" ? std::exp(x) : 1.0 / (1.0 + std::exp(-x));
      const double rel = std::abs(y[i] - ref) / ref;
      if (rel > worst) worst = rel, at = xs[i];
    }
    const double units = worst / std::ldexp(1.0, -24);
    EXPECT_LT(units, std::string(op) == "Exp" ? 3.0 : 6.0) << op << " at x = " << at;
  }
}

// Swish (Mul(x, Sigmoid(x)) in one op): within a few units of roundoff of x / (1 + e^-x)
// wherever the result is a normal float (measured: 3.7 on AVX-512, 4.6 on AVX2; Sigmoid and
// Mul, which it replaces, 4.6 and 5.3); at the edges: +inf stays
// +inf, NaN stays NaN, below -87 (and at -inf) a value of magnitude at most 1.5e-36.
TEST_P(SnippetsEmitters, SwishMatchesSigmoidTimesInput) {
  std::vector<float> xs;
  for (float x = -80.0f; x <= 100.0f; x += 0.0041f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 89.0f, 104.5f, 1e30f}) xs.push_back(x);
  const int64_t n = static_cast<int64_t>(xs.size());
  auto run = [&](bool fuse, const std::vector<float>& in) {
    auto g = snippets_body({{static_cast<int64_t>(in.size())}});
    ir::Value* x = g->inputs()[0];
    g->add_output(g->add_node("Mul", {x, g->add_node("Sigmoid", {x}, 1)->output(0)}, 1)->output(0));
    ir::infer_shapes(*g);
    snippets::CompileOptions o = opt();
    o.fuse_swish = fuse;
    const int64_t m = static_cast<int64_t>(in.size());
    auto k = snippets::compile(*g, {{{m}}, {m}}, o);
    std::vector<float> y(in.size());
    k->run({in.data()}, {y.data()}, 0, k->rows());
    return y;
  };
  auto units = [&](const std::vector<float>& y, float* at) {
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = xs[static_cast<size_t>(i)];
      const double ref = x / (1.0 + std::exp(-x));
      if (ref == 0 || std::abs(ref) < 1.2e-38) {
        EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f) << x;
        continue;
      }
      const double rel = std::abs(y[static_cast<size_t>(i)] - ref) / std::abs(ref);
      if (rel > worst) worst = rel, *at = xs[static_cast<size_t>(i)];
    }
    return worst / std::ldexp(1.0, -24);
  };
  float at_fused = 0, at_pair = 0;
  const double fused = units(run(true, xs), &at_fused), pair = units(run(false, xs), &at_pair);
  EXPECT_LT(fused, 6.0) << "at x = " << at_fused;
  EXPECT_LT(pair, 7.0) << "at x = " << at_pair;

  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {inf, std::numeric_limits<float>::quiet_NaN(), -inf, -87.0f, -100.0f, -1e30f, -3e38f};
  const std::vector<float> y = run(true, edges);
  EXPECT_EQ(y[0], inf);
  EXPECT_TRUE(std::isnan(y[1]));
  for (size_t i = 2; i < edges.size(); ++i) {
    EXPECT_LE(y[i], 0.0f) << edges[i];
    EXPECT_LT(std::abs(y[i]), 1.5e-36f) << edges[i];
  }
}

TEST_P(SnippetsEmitters, CompositeActivationsWithinTolerance) {
  check_unary(opt(), "Elu", -6.0f, 6.0f, 1e-5f, 1e-6f, {{"alpha", 0.7f}});
  for (const char* op : {"Softplus", "Mish"}) check_unary(opt(), op, -25.0f, 25.0f, 1e-5f, 1e-6f);
  check_unary(opt(), "Gelu", -6.0f, 6.0f, 1e-5f, 1e-6f);
  check_unary(opt(), "Gelu", -6.0f, 6.0f, 1e-5f, 1e-6f, {{"approximate", "tanh"}});
  check_unary(opt(), "Gelu", -0.4f, 0.4f, 1e-5f, 1e-6f);
  check_unary(opt(), "HardSigmoid", -6.0f, 6.0f, 1e-6f, 1e-7f, {{"alpha", 0.3f}, {"beta", 0.4f}});
  check_unary(opt(), "HardSwish", -6.0f, 6.0f, 1e-6f, 1e-7f);
  check_unary(opt(), "Log", 1e-3f, 1e3f, 1e-6f, 1e-6f);
  check_unary(opt(), "Log", 0.5f, 2.0f, 1e-6f, 1e-7f);
  check_unary(opt(), "Log", 1e-44f, 1e-37f, 1e-6f, 0);  // subnormals
  check_unary(opt(), "Reciprocal", -5.0f, 5.0f, 0, 0);
}

TEST_P(SnippetsEmitters, PReluWithBroadcastSlope) {
  std::mt19937 rng(9);
  for (int64_t n : {1, 17, 100}) {
    SCOPED_TRACE(n);
    auto x = random_tensor({3, n}, rng, -50, 50), slope = random_tensor({n}, rng, -1, 1);
    auto g = snippets_body({{3, n}, {n}});
    g->add_output(g->add_node("PRelu", {g->inputs()[0], g->inputs()[1]}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {x, slope}, 0, 0, opt()), 0);
  }
}

// Comparisons, logic, Where and Cast: bools and integers inside the body, f32 at its edges.
TEST_P(SnippetsEmitters, ComparisonsLogicWhereAndCast) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 17, 100}) {
    SCOPED_TRACE(n);
    auto g = snippets_body({{3, n}, {3, n}});
    ir::Value* x = g->inputs()[0];
    ir::Value* y = g->inputs()[1];
    auto node = [&](const char* op, std::vector<ir::Value*> in) { return g->add_node(op, in, 1)->output(0); };
    auto cast = [&](ir::Value* v, int64_t to) {
      ir::Node* c = g->add_node("Cast", {v}, 1);
      c->attrs["to"] = to;
      return c->output(0);
    };
    ir::Value* gt = node("Greater", {x, y});
    ir::Value* le = node("LessOrEqual", {x, scalar_const(*g, 0.5f)});
    ir::Value* both = node("And", {gt, le});
    ir::Value* eq = node("Equal", {node("Floor", {x}), node("Floor", {y})});
    ir::Value* sel = node("Xor", {node("Not", {both}), eq});
    ir::Value* either = node("Or", {node("Less", {x, y}), node("GreaterOrEqual", {y, scalar_const(*g, 1.0f)})});
    ir::Value* w = node("Where", {sel, x, node("Mul", {y, scalar_const(*g, 2.0f)})});
    ir::Value* out = node("Add", {w, cast(either, 1)});                        // bool -> f32
    out = node("Add", {out, cast(cast(node("Mul", {x, scalar_const(*g, 3.0f)}), 6), 1)});  // f32 -> i32 -> f32
    out = node("Add", {out, cast(cast(node("Sub", {x, y}), 9), 1)});          // f32 -> bool -> f32
    out = node("Add", {out, cast(cast(cast(x, 7), 9), 1)});                   // f32 -> i64 -> bool -> f32
    g->add_output(out);
    // integral values make Equal and the truncations hit both sides
    auto xs = random_tensor({3, n}, rng, -4, 4), ys = random_tensor({3, n}, rng, -4, 4);
    for (int64_t i = 0; i < xs.size(); i += 3) xs.data<float>()[i] = std::round(xs.data<float>()[i]);
    for (int64_t i = 0; i < ys.size(); i += 2) ys.data<float>()[i] = std::round(ys.data<float>()[i]);
    EXPECT_EQ(compare_with_reference(g, {xs, ys}, 0, 0, opt()), 0);
  }
}

TEST_P(SnippetsEmitters, NanInfAndSignedZerosMatchTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, 3.4e38f, -3.4e38f,
                                88.0f, -88.0f, 0.5f, -2.5f, 2.5f};
  const int64_t n = static_cast<int64_t>(special.size());
  // Pair every special value with every other for the binary ops.
  Tensor a(DType::f32, {n, n}), b(DType::f32, {n, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      a.data<float>()[i * n + j] = special[static_cast<size_t>(i)];
      b.data<float>()[i * n + j] = special[static_cast<size_t>(j)];
    }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    SCOPED_TRACE(op);
    auto g = snippets_body({{n, n}, {n, n}});
    g->add_output(g->add_node(op, {g->inputs()[0], g->inputs()[1]}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {a, b}, 0, 0, opt()), 0);
  }
  for (const char* op : {"Neg", "Abs", "Relu", "Sqrt", "Floor", "Ceil", "Round", "LeakyRelu", "Clip"}) {
    SCOPED_TRACE(op);
    auto g = snippets_body({{n, n}});
    g->add_output(g->add_node(op, {g->inputs()[0]}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {a}, 0, 0, opt()), 0);
  }
  for (const char* op : {"Exp", "Sigmoid", "Tanh", "Erf", "Elu", "Softplus", "Mish", "Gelu", "HardSigmoid", "HardSwish",
                         "Log", "Reciprocal"}) {
    SCOPED_TRACE(op);
    auto g = snippets_body({{n, n}});
    g->add_output(g->add_node(op, {g->inputs()[0]}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {a}, 1e-5f, 1e-6f, opt()), 0);
  }
  for (const char* op : {"PRelu", "Equal", "Less", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    auto g = snippets_body({{n, n}, {n, n}});
    ir::Node* node = g->add_node(op, {g->inputs()[0], g->inputs()[1]}, 1);
    ir::Value* out = node->output(0);
    const std::string o = op;
    if (o == "Equal" || o == "Less" || o == "GreaterOrEqual") {  // bool -> f32 to leave the body
      ir::Node* c = g->add_node("Cast", {out}, 1);
      c->attrs["to"] = int64_t{1};
      out = c->output(0);
    }
    g->add_output(out);
    EXPECT_EQ(compare_with_reference(g, {a, b}, 0, 0, opt()), 0);
  }
  for (float p : {0.5f, 2.0f, 3.0f, -1.0f, -2.0f, 0.0f, 1.0f}) {
    SCOPED_TRACE("Pow " + std::to_string(p));
    auto g = snippets_body({{n, n}});
    g->add_output(g->add_node("Pow", {g->inputs()[0], scalar_const(*g, p)}, 1)->output(0));
    EXPECT_EQ(compare_with_reference(g, {a}, 1e-6f, 1e-30f, opt()), 0);
  }
}

TEST_P(SnippetsEmitters, FmaAndScalars) {
  std::mt19937 rng(3);
  auto g = snippets_body({{4, 37}, {4, 37}});
  ir::Value* m = g->add_node("Mul", {g->inputs()[0], scalar_const(*g, 1.5f)}, 1)->output(0);
  ir::Value* a = g->add_node("Add", {m, g->inputs()[1]}, 1)->output(0);
  g->add_output(a);
  auto x = random_tensor({4, 37}, rng, -2, 2), y = random_tensor({4, 37}, rng, -2, 2);
  EXPECT_EQ(compare_with_reference(g, {x, y}, 1e-6f, 1e-6f, opt()), 0);
  ir::infer_shapes(*g);
  auto k = snippets::compile(*g, {{{4, 37}, {4, 37}}, {4, 37}}, opt());
  EXPECT_NE(k->describe().find("FMA"), std::string::npos);
  auto k2 = snippets::compile(*g, {{{4, 37}, {4, 37}}, {4, 37}}, opt(false));
  EXPECT_EQ(k2->describe().find("FMA"), std::string::npos);
}

TEST_P(SnippetsEmitters, BroadcastPatterns) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 15, 16, 17, 1000}) {
    SCOPED_TRACE(n);
    std::vector<Shape> shapes = {{2, 3, n}, {3, 1}, {1, 3, n}, {1}, {2, 1, 1}, {n}};
    auto g = snippets_body(shapes);
    ir::Value* v = g->inputs()[0];
    for (size_t i = 1; i < shapes.size(); ++i)
      v = g->add_node(i % 2 ? "Add" : "Mul", {v, g->inputs()[i]}, 1)->output(0);
    g->add_output(v);
    std::vector<Tensor> ins;
    for (const auto& s : shapes) ins.push_back(random_tensor(s, rng, -2, 2));
    EXPECT_EQ(compare_with_reference(g, ins, 0, 0, opt(false)), 0);
  }
}

TEST_P(SnippetsEmitters, UnsupportedThrows) {
  auto g = snippets_body({{4}});
  g->add_output(g->add_node("Sin", {g->inputs()[0]}, 1)->output(0));
  ir::infer_shapes(*g);
  EXPECT_THROW(snippets::compile(*g, {{{4}}, {4}}, opt()), Error);
  auto g2 = snippets_body({{4}});
  g2->add_output(g2->add_node("Pow", {g2->inputs()[0], scalar_const(*g2, 0.3f)}, 1)->output(0));
  ir::infer_shapes(*g2);
  EXPECT_FALSE(snippets::is_supported(*g2->outputs()[0]->producer()));
  EXPECT_THROW(snippets::compile(*g2, {{{4}}, {4}}, opt()), Error);
}

// Random bodies: chains of 2..12 ops over 1..4 inputs (full, row-broadcast, inner-broadcast
// or scalar), every length with tails.
TEST_P(SnippetsEndToEnd, RandomBodiesMatchTheReference) {
  const std::vector<std::string> unary = {"Neg", "Abs", "Relu", "Exp", "Sigmoid", "Tanh", "Erf", "Floor",
                                          "Ceil", "Round", "LeakyRelu", "Clip", "Sqrt", "Pow2", "Pow05"};
  const std::vector<std::string> binary = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  std::mt19937 rng(2024);
  int cases = 0;
  for (int64_t n : {1, 15, 16, 17, 1000, 4099}) {
    for (int rep = 0; rep < 6; ++rep) {
      const int64_t rows = 3;
      const int n_in = 1 + static_cast<int>(rng() % 4);
      std::vector<Shape> shapes = {{rows, n}};
      for (int i = 1; i < n_in; ++i) {
        switch (rng() % 4) {
          case 0: shapes.push_back({rows, n}); break;
          case 1: shapes.push_back({1, n}); break;
          case 2: shapes.push_back({rows, 1}); break;
          default: shapes.push_back({}); break;
        }
      }
      auto g = snippets_body(shapes);
      ir::Value* v = g->inputs()[0];
      const int n_ops = 2 + static_cast<int>(rng() % 11);
      std::string trace;
      bool transcendental = false;
      for (int k = 0; k < n_ops; ++k) {
        if (rng() % 2) {
          const std::string& op = unary[rng() % unary.size()];
          trace += op + " ";
          transcendental |= op == "Exp" || op == "Sigmoid" || op == "Tanh" || op == "Erf" || op == "Pow2" || op == "Pow05";
          if (op == "Pow2") v = g->add_node("Pow", {v, scalar_const(*g, 2.0f)}, 1)->output(0);
          else if (op == "Pow05") v = g->add_node("Pow", {v, scalar_const(*g, 0.5f)}, 1)->output(0);
          else if (op == "Clip")
            v = g->add_node("Clip", {v, scalar_const(*g, -0.75f), scalar_const(*g, 1.25f)}, 1)->output(0);
          else v = g->add_node(op, {v}, 1)->output(0);
        } else {
          const std::string& op = binary[rng() % binary.size()];
          trace += op + " ";
          ir::Value* other = rng() % 4 == 0 ? scalar_const(*g, 0.5f + static_cast<float>(rng() % 4))
                                            : g->inputs()[rng() % g->inputs().size()];
          v = rng() % 2 ? g->add_node(op, {v, other}, 1)->output(0) : g->add_node(op, {other, v}, 1)->output(0);
        }
      }
      g->add_output(v);
      std::vector<Tensor> ins;
      for (const auto& s : shapes) ins.push_back(random_tensor(s, rng, -2, 2));
      SCOPED_TRACE("n=" + std::to_string(n) + " inputs=" + std::to_string(n_in) + " ops: " + trace);
      const float rtol = transcendental ? 1e-5f : 0.0f, atol = transcendental ? 1e-6f : 0.0f;
      EXPECT_EQ(compare_with_reference(g, ins, rtol, atol, opt(false)), 0);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 36);
}

// More values live at once than AVX2 has registers: InsertRegSpills' stack slots.
TEST_P(SnippetsEndToEnd, ManyLiveValuesSpillAndStillMatch) {
  std::mt19937 rng(8);
  const int k = 14;
  auto g = snippets_body({{3, 77}});
  std::vector<ir::Value*> vals;
  for (int i = 0; i < k; ++i)
    vals.push_back(g->add_node("Tanh", {g->add_node("Mul", {g->inputs()[0], scalar_const(*g, 0.1f * (i + 1))}, 1)->output(0)}, 1)->output(0));
  ir::Value* sum = vals[0];
  for (int i = 1; i < k; ++i) sum = g->add_node(i % 2 ? "Add" : "Max", {sum, vals[static_cast<size_t>(i)]}, 1)->output(0);
  g->add_output(sum);
  EXPECT_EQ(compare_with_reference(g, {random_tensor({3, 77}, rng, -3, 3)}, 1e-5f, 1e-6f, opt()), 0);
  if (GetParam() == snippets::Isa::Avx2) {  // 10 allocatable ymm registers for 14 values
    auto kern = snippets::compile(*g, {{{3, 77}}, {3, 77}}, opt());
    EXPECT_NE(kern->describe().find("RegSpillBegin"), std::string::npos) << kern->describe();
  }
}

TEST_P(SnippetsEndToEnd, RowRangesFromTwoThreads) {
  std::mt19937 rng(5);
  const Shape s = {64, 1001};
  auto g = snippets_body({s, {64, 1}});
  ir::Value* v = g->add_node("Mul", {g->inputs()[0], g->inputs()[1]}, 1)->output(0);
  v = g->add_node("Tanh", {v}, 1)->output(0);
  v = g->add_node("Add", {v, scalar_const(*g, 1.0f)}, 1)->output(0);
  g->add_output(v);
  ir::infer_shapes(*g);
  auto k = snippets::compile(*g, {{s, {64, 1}}, s}, opt());
  EXPECT_EQ(k->isa(), snippets::isa_name(GetParam()));
  ASSERT_EQ(k->rows(), 64);
  auto x = random_tensor(s, rng, -3, 3), y = random_tensor({64, 1}, rng, -1, 1);
  std::vector<float> whole(static_cast<size_t>(shape_size(s))), split(whole.size(), -7.0f);
  k->run({x.data<float>(), y.data<float>()}, {whole.data()}, 0, 64);
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    for (int rep = 0; rep < 20; ++rep) {
      if (t == 0) k->run({x.data<float>(), y.data<float>()}, {split.data()}, 0, 29);
      else k->run({x.data<float>(), y.data<float>()}, {split.data()}, 29, 64);
    }
  }
  EXPECT_EQ(whole, split);
}

KILN_SNIPPETS_BOTH_ISAS(SnippetsEmitters);
KILN_SNIPPETS_BOTH_ISAS(SnippetsEndToEnd);

}  // namespace
}  // namespace kiln::test::test_snippets_generator

namespace kiln::test::test_snippets_generator {
namespace {

std::shared_ptr<ir::Graph> relu_mul_body(float k) {
  auto g = snippets_body({{4, 40}});
  ir::Value* v = g->add_node("Relu", {g->inputs()[0]}, 1)->output(0);
  g->add_output(g->add_node("Mul", {v, scalar_const(*g, k)}, 1)->output(0));
  ir::infer_shapes(*g);
  return g;
}

TEST(SnippetsKernelCache, SameBodyAndShapesCompileOnce) {
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  const snippets::KernelShapes ks{{{4, 40}}, {4, 40}};
  auto before = snippets::kernel_cache_stats();
  auto a = snippets::compile_cached(*relu_mul_body(2.0f), ks, best_target_options());
  auto b = snippets::compile_cached(*relu_mul_body(2.0f), ks, best_target_options());  // another graph, same body
  EXPECT_EQ(a.get(), b.get());
  auto c = snippets::compile_cached(*relu_mul_body(3.0f), ks, best_target_options());  // another constant
  auto d = snippets::compile_cached(*relu_mul_body(2.0f), {{{2, 80}}, {2, 80}}, best_target_options());  // other shapes
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a.get(), d.get());
  auto after = snippets::kernel_cache_stats();
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_EQ(after.misses - before.misses, 3u);
  snippets::CompileOptions avx512;
  avx512.target = cpu::x64::shared_target_machine(snippets::Isa::Avx512);
  EXPECT_NE(snippets::kernel_cache_key(*relu_mul_body(2.0f), ks, avx512),
            snippets::kernel_cache_key(*relu_mul_body(2.0f), ks, [] {
              snippets::CompileOptions o = best_target_options();
              o.target = cpu::x64::shared_target_machine(snippets::Isa::Avx2);
              return o;
            }()));
  const size_t live = after.live;
  a.reset();
  b.reset();
  EXPECT_EQ(snippets::kernel_cache_stats().live, live - 1);  // released kernels leave the cache
}

TEST(SnippetsKernelCache, ASharedBodyKeepsItsKeyAndAnotherBodyGetsItsOwn) {
  // compile_cached on a body held by a shared_ptr keeps the body's key while the body lives:
  // the same kernel as for a copy of that body; a body with another constant, made after the
  // first is gone, gets its own kernel (it cannot inherit the key by taking the address)
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  const snippets::KernelShapes ks{{{4, 40}}, {4, 40}};
  auto run = [&](const snippets::Kernel& k) {
    Tensor x(DType::f32, {4, 40}), y(DType::f32, {4, 40});
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
    k.run({x.data<float>()}, {y.data<float>()}, 0, k.rows());
    return y;
  };
  std::shared_ptr<const ir::Graph> two = relu_mul_body(2.0f);
  auto a = snippets::compile_cached(two, ks, best_target_options());
  auto again = snippets::compile_cached(two, ks, best_target_options());
  auto copy = snippets::compile_cached(*relu_mul_body(2.0f), ks, best_target_options());
  EXPECT_EQ(a.get(), again.get());
  EXPECT_EQ(a.get(), copy.get());
  EXPECT_FLOAT_EQ(run(*a).data<float>()[3], 0.0f * 2.0f);
  EXPECT_FLOAT_EQ(run(*a).data<float>()[6], 3.0f * 2.0f);
  two.reset();
  std::shared_ptr<const ir::Graph> three = relu_mul_body(3.0f);
  auto b = snippets::compile_cached(three, ks, best_target_options());
  EXPECT_NE(a.get(), b.get());
  EXPECT_FLOAT_EQ(run(*b).data<float>()[6], 3.0f * 3.0f);
}

// compile_cached's kernel for `body` on `inputs`, checked against the reference executor.
std::shared_ptr<const snippets::Kernel> cached_against_reference(const std::shared_ptr<ir::Graph>& body,
                                                                 const std::vector<Tensor>& inputs) {
  ir::infer_shapes(*body);
  const auto want = runtime::ReferenceExecutor(body).run(inputs);
  snippets::KernelShapes ks;
  for (const auto& t : inputs) ks.inputs.push_back(t.shape());
  ks.output = want.at(0).shape();
  auto kernel = snippets::compile_cached(*body, ks, best_target_options());
  Tensor out(DType::f32, ks.output);
  std::vector<const float*> ins;
  for (const auto& t : inputs) ins.push_back(t.data<float>());
  kernel->run(ins, {out.data<float>()}, 0, kernel->rows());
  for (int64_t i = 0; i < out.size(); ++i)
    if (!close(out.data<float>()[i], want[0].data<float>()[i], 1e-5f, 1e-6f)) {
      ADD_FAILURE() << "element " << i << ": kernel " << out.data<float>()[i] << ", reference " << want[0].data<float>()[i];
      break;
    }
  return kernel;
}

TEST(SnippetsKernelCache, ShapesThatDifferInRowsOnlyShareTheMachineCode) {
  // x [rows, n] + b [n], then a softmax over each row: the code takes its rows per call, so a
  // sequence of another length reuses the generated kernel with a schedule of its own; one row
  // and another row length (n) get code of their own
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  auto body = [](int64_t rows, int64_t n) {
    auto g = snippets_body({{rows, n}, {n}});
    ir::Value* v = g->add_node("Add", {g->inputs()[0], g->inputs()[1]}, 1)->output(0);
    g->add_output(g->add_node("Softmax", {v}, 1)->output(0));
    return g;
  };
  std::mt19937 rng(11);
  const auto before = snippets::kernel_cache_stats();
  auto k3 = cached_against_reference(body(3, 40), {random_tensor({3, 40}, rng, -2, 2), random_tensor({40}, rng, -2, 2)});
  auto k9 = cached_against_reference(body(9, 40), {random_tensor({9, 40}, rng, -2, 2), random_tensor({40}, rng, -2, 2)});
  auto k1 = cached_against_reference(body(1, 40), {random_tensor({1, 40}, rng, -2, 2), random_tensor({40}, rng, -2, 2)});
  auto k48 = cached_against_reference(body(3, 48), {random_tensor({3, 48}, rng, -2, 2), random_tensor({48}, rng, -2, 2)});
  const auto after = snippets::kernel_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 4u);       // four shapes, four kernels ...
  EXPECT_EQ(after.code_shared - before.code_shared, 1u);  // ... of which [9, 40] took [3, 40]'s code
  EXPECT_EQ(k3->describe(), k9->describe());
  EXPECT_EQ(k9->rows(), 9);
  EXPECT_NE(k3->describe(), k48->describe());
}

TEST(SnippetsDebug, LinearIrDumpAfterEveryPass) {
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  const kiln::test::ScopedTempDir tmp("lir_dump");
  const std::string dir = tmp.path().string();
  snippets::CompileOptions o = best_target_options();
  o.dump_dir = dir;
  o.name = "my/kernel";
  o.unroll = 1;
  snippets::compile(*relu_mul_body(2.0f), {{{4, 40}}, {4, 40}}, o);
  std::vector<std::string> files;
  bool code = false;  // the machine code, my_kernel.bin
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    const std::string n = f.path().filename().string();
    if (n == "my_kernel.bin") code = std::filesystem::file_size(f.path()) > 16;
    else files.push_back(n);
  }
  EXPECT_TRUE(code);
  std::sort(files.begin(), files.end());
  const auto names = snippets::lowered::pass::PassPipeline::control_flow().names();
  ASSERT_EQ(files.size(), names.size());
  EXPECT_EQ(files.front(), "my_kernel_u1_01_" + names.front() + ".txt");
  std::ifstream last(dir + "/" + files.back());
  std::string text((std::istreambuf_iterator<char>(last)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# control flow"), std::string::npos);
  EXPECT_NE(text.find("LoopBegin"), std::string::npos);
  o.dump_dir = dir + "/no/such/dir";
  EXPECT_THROW(snippets::compile(*relu_mul_body(2.0f), {{{4, 40}}, {4, 40}}, o), Error);
}

}  // namespace
}  // namespace kiln::test::test_snippets_generator

namespace kiln::test::test_snippets_generator {
namespace {

// A kernel given a bad data pointer: the detector names the emitter and the loop iteration.
void run_on_bad_pointer() {
  auto g = snippets_body({{4, 40}});
  g->add_output(g->add_node("Relu", {g->inputs()[0]}, 1)->output(0));
  ir::infer_shapes(*g);
  snippets::CompileOptions o = best_target_options();
  o.segfault_detector = true;
  o.name = "bad_kernel";
  auto k = snippets::compile(*g, {{{4, 40}}, {4, 40}}, o);
  std::vector<float> out(160);
  std::vector<float> x(160, 1.0f);
  const float* in = x.data() + (1ll << 40);  // far outside the process
  k->run({in}, {out.data()}, 0, k->rows());
}

TEST(SnippetsDebug, SegfaultDetectorReportsTheEmitter) {
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_on_bad_pointer(), "kernel 'bad_kernel' faulted(.|\n)*in emitter: Load#[0-9]+(.|\n)*iteration 0");
}

}  // namespace
}  // namespace kiln::test::test_snippets_generator
