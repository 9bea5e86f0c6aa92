// Snippets Mod (fmod=1, f32): every kernel output must have the bits of std::fmod, -0.0 included
// (any NaN matches any NaN), on AVX-512 and AVX2, for quotients far beyond 2^24, denormals,
// zeros, infinities, NaNs, a broadcast divisor and every tail length.
#include <gtest/gtest.h>

#include "cpu/mark_skipped.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "snippets/subgraph_op.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "snippets/tokenizer.hpp"
#include "test_snippets_util.hpp"

namespace kiln::test::test_snippets_mod {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

class SnippetsMod : public SnippetsIsaTest {
 protected:
  snippets::CompileOptions opt() const { return isa_options(); }
};

bool same_bits(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
}

std::string show(float v) {
  std::ostringstream s;
  s.precision(9);
  s << v << " (0x" << std::hex << std::bit_cast<uint32_t>(v) << ")";
  return s.str();
}

// Compiles `body` for `inputs`, runs every row and returns the first output.
std::vector<float> run_kernel(const std::shared_ptr<ir::Graph>& body, const std::vector<Tensor>& inputs,
                              const Shape& out_shape, const snippets::CompileOptions& opt) {
  snippets::KernelShapes ks;
  for (const auto& t : inputs) ks.inputs.push_back(t.shape());
  ks.output = out_shape;
  auto kernel = snippets::compile(*body, ks, opt);
  std::vector<Tensor> outs;
  std::vector<float*> optr;
  for (size_t o = 0; o < body->outputs().size(); ++o) {
    outs.emplace_back(DType::f32, out_shape);
    optr.push_back(outs.back().data<float>());
  }
  std::vector<const float*> ins;
  for (const auto& t : inputs) ins.push_back(t.data<float>());
  kernel->run(ins, optr, 0, kernel->rows());
  return {outs[0].data<float>(), outs[0].data<float>() + outs[0].size()};
}

ir::Node* add_mod(ir::Graph& g, ir::Value* a, ir::Value* b) {
  ir::Node* n = g.add_node("Mod", {a, b}, 1);
  n->attrs["fmod"] = 1;
  return n;
}

// Mod(a, b) with b of shape [rows, n], [1, n] or [] against std::fmod, bit for bit; returns
// the number of mismatches (the first few reported).
int64_t check_mod(const snippets::CompileOptions& opt, const Tensor& a, const Tensor& b) {
  auto g = snippets_body({a.shape(), b.shape()});
  g->add_output(add_mod(*g, g->inputs()[0], g->inputs()[1])->output(0));
  ir::infer_shapes(*g);
  const std::vector<float> got = run_kernel(g, {a, b}, a.shape(), opt);
  const int64_t n = a.shape().empty() ? 1 : a.shape().back();
  const bool b_rows = b.shape().size() == 2 && b.shape()[0] != 1;
  const bool b_cols = !b.shape().empty() && b.shape().back() != 1;
  int64_t bad = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const int64_t bi = (b_rows ? i / n * n : 0) + (b_cols ? i % n : 0);
    const float x = a.data<float>()[i], y = b.data<float>()[bi];
    const float want = std::fmod(x, y);
    if (!same_bits(got[static_cast<size_t>(i)], want) && ++bad <= 5)
      ADD_FAILURE() << "fmod(" << show(x) << ", " << show(y) << "): kernel " << show(got[static_cast<size_t>(i)])
                    << ", std::fmod " << show(want);
  }
  return bad;
}

// A finite float with a uniformly random exponent field (denormals included) and sign.
float random_finite(std::mt19937& rng) {
  std::uniform_int_distribution<uint32_t> exp(0, 254), frac(0, (1u << 23) - 1), sign(0, 1);
  return std::bit_cast<float>(sign(rng) << 31 | exp(rng) << 23 | frac(rng));
}

// +-m * 10^e, m in [1, 10), e in [lo, hi].
float random_decimal(std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<double> m(1.0, 10.0);
  std::uniform_int_distribution<int> e(lo, hi), sign(0, 1);
  return static_cast<float>((sign(rng) ? -1.0 : 1.0) * m(rng) * std::pow(10.0, e(rng)));
}

Tensor fill(const Shape& s, const std::function<float(int64_t)>& f) {
  Tensor t(DType::f32, s);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = f(i);
  return t;
}

const std::vector<float>& special_values() {
  static const std::vector<float> v = {
      0.0f, -0.0f, kInf, -kInf, kNan, -kNan, kDenormMin, -kDenormMin, 1.5e-44f, 3.3e-39f, FLT_MIN,
      -FLT_MIN, std::nextafter(FLT_MIN, 0.0f), FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.1f, -0.1f, 3.0f, -3.0f, 6.0f,
      -6.0f, 1.5e-7f, 3e38f, -3e38f, 16777216.0f, 33554430.0f, 8388607.5f, 0.75f, 1e-30f, 7e25f};
  return v;
}

TEST_P(SnippetsMod, RandomBitPatternsEveryTail) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 15, 16, 17, 33, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Tensor a = fill({3, n}, [&](int64_t) { return random_finite(rng); });
    Tensor b = fill({3, n}, [&](int64_t) { return random_finite(rng); });
    EXPECT_EQ(check_mod(opt(), a, b), 0);
  }
}

TEST_P(SnippetsMod, RandomMagnitudesBothSigns) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 15, 16, 17, 33, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Tensor a = fill({4, n}, [&](int64_t) { return random_decimal(rng, -40, 38); });
    Tensor b = fill({4, n}, [&](int64_t) { return random_decimal(rng, -40, 38); });
    EXPECT_EQ(check_mod(opt(), a, b), 0);
    // and against the reference executor (also std::fmod; its comparison ignores the zero's sign)
    auto g = snippets_body({a.shape(), b.shape()});
    g->add_output(add_mod(*g, g->inputs()[0], g->inputs()[1])->output(0));
    EXPECT_EQ(compare_with_reference(g, {a, b}, 0.0f, 0.0f, opt()), 0);
  }
}

// Quotients from 1 to 2^24, exact multiples (a zero remainder, -0.0 for a negative a) and
// one ulp off them, where q = trunc(a / b) rounds up and the remainder needs the fix-up.
TEST_P(SnippetsMod, SmallQuotientsAndExactMultiples) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> k(1, 1 << 24);
  const int64_t n = 1000;
  Tensor b = fill({1, n}, [&](int64_t) { return random_decimal(rng, -20, 20); });
  Tensor a = fill({4, n}, [&](int64_t i) {
    const float y = b.data<float>()[i % n];
    const float m = static_cast<float>(k(rng)) * y;
    switch (i / n) {
      case 0: return m;
      case 1: return -m;
      case 2: return std::nextafter(m, 0.0f);
      default: return -std::nextafter(m, kInf);
    }
  });
  EXPECT_EQ(check_mod(opt(), a, b), 0);
}

TEST_P(SnippetsMod, HugeQuotients) {
  const std::vector<std::pair<float, float>> pairs = {
      {3e38f, 1.5e-7f},  {-3e38f, 1.5e-7f},     {FLT_MAX, kDenormMin}, {FLT_MAX, 3.3e-39f}, {-FLT_MAX, -1e-45f},
      {1e30f, 3.0f},     {7.3786976e19f, 0.1f}, {3e38f, 7.0f},         {1e20f, 1e-20f},     {FLT_MAX, FLT_MIN},
      {1.0f, 1e-44f},    {FLT_MIN, 1e-45f},     {2.5e-39f, 1e-45f},    {3.4e38f, 1.0000001f}};
  std::vector<float> av, bv;
  for (const auto& [x, y] : pairs) {
    av.push_back(x);
    bv.push_back(y);
  }
  const int64_t n = static_cast<int64_t>(av.size());
  EXPECT_EQ(check_mod(opt(), Tensor::from_vector<float>(av, {1, n}), Tensor::from_vector<float>(bv, {1, n})), 0);
  // random divisors far below random dividends
  std::mt19937 rng(9);
  Tensor a = fill({2, 333}, [&](int64_t) { return random_decimal(rng, 10, 38); });
  Tensor b = fill({2, 333}, [&](int64_t) { return random_decimal(rng, -45, 0); });
  EXPECT_EQ(check_mod(opt(), a, b), 0);
}

// Every pair of special values (zeros, infinities, NaNs, denormals, extremes): one lane each.
TEST_P(SnippetsMod, SpecialValuesAllPairs) {
  const auto& v = special_values();
  const int64_t n = static_cast<int64_t>(v.size() * v.size());
  Tensor a = fill({1, n}, [&](int64_t i) { return v[static_cast<size_t>(i) / v.size()]; });
  Tensor b = fill({1, n}, [&](int64_t i) { return v[static_cast<size_t>(i) % v.size()]; });
  EXPECT_EQ(check_mod(opt(), a, b), 0);
}

TEST_P(SnippetsMod, DenormalsOnBothSides) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<uint32_t> tiny(1, (1u << 24) - 1), sign(0, 1);  // denormals and the first normals
  auto small = [&](int64_t) { return std::bit_cast<float>(sign(rng) << 31 | tiny(rng)); };
  EXPECT_EQ(check_mod(opt(), fill({2, 500}, small), fill({2, 500}, small)), 0);
  EXPECT_EQ(check_mod(opt(), fill({2, 500}, [&](int64_t) { return random_finite(rng); }), fill({2, 500}, small)), 0);
}

// b as a [1, n] input broadcast over rows, and as one value broadcast over everything.
TEST_P(SnippetsMod, BroadcastDivisor) {
  std::mt19937 rng(17);
  for (int64_t n : {1, 15, 16, 17, 33, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Tensor a = fill({5, n}, [&](int64_t) { return random_decimal(rng, -40, 38); });
    Tensor row = fill({1, n}, [&](int64_t) { return random_decimal(rng, -40, 38); });
    EXPECT_EQ(check_mod(opt(), a, row), 0);
    for (float y : {0.75f, -3.0f, 1.5e-7f, 1e-45f, 0.0f, kInf, kNan})
      EXPECT_EQ(check_mod(opt(), a, Tensor::from_vector<float>({y}, Shape{})), 0) << "b = " << y;
  }
}

// b a constant: it becomes a Scalar inside the kernel.
TEST_P(SnippetsMod, ScalarConstantDivisor) {
  std::mt19937 rng(19);
  for (float y : {0.75f, -2.5f, 1.5e-7f, 1e-45f, 3e38f, 0.0f, -kInf, kNan}) {
    for (int64_t n : {1, 17, 1000}) {
      SCOPED_TRACE("b=" + show(y) + " n=" + std::to_string(n));
      auto g = snippets_body({{2, n}});
      g->add_output(add_mod(*g, g->inputs()[0], scalar_const(*g, y))->output(0));
      ir::infer_shapes(*g);
      Tensor a = fill({2, n}, [&](int64_t) { return random_finite(rng); });
      const std::vector<float> got = run_kernel(g, {a}, a.shape(), opt());
      int64_t bad = 0;
      for (int64_t i = 0; i < a.size(); ++i) {
        const float want = std::fmod(a.data<float>()[i], y);
        if (!same_bits(got[static_cast<size_t>(i)], want) && ++bad <= 5)
          ADD_FAILURE() << "fmod(" << show(a.data<float>()[i]) << ", " << show(y) << "): kernel "
                        << show(got[static_cast<size_t>(i)]) << ", std::fmod " << show(want);
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

// Mod among other ops: its output may take an input's register, the same value on both
// sides, two Mods in one kernel (each with its own loop labels).
TEST_P(SnippetsMod, InsideAChain) {
  std::mt19937 rng(23);
  const int64_t n = 37;
  auto g = snippets_body({{3, n}, {3, n}});
  ir::Value *a = g->inputs()[0], *b = g->inputs()[1];
  ir::Node* m1 = add_mod(*g, a, b);              // a, b still live after it
  ir::Node* m2 = add_mod(*g, m1->output(0), a);  // fmod(fmod(a, b), a) = fmod(a, b)
  ir::Node* m3 = add_mod(*g, b, b);              // +-0
  ir::Node* s = g->add_node("Add", {m2->output(0), m3->output(0)}, 1);
  ir::Node* m4 = add_mod(*g, a, s->output(0));   // a's and s's last use
  g->add_output(m4->output(0));
  g->add_output(m1->output(0));
  ir::infer_shapes(*g);
  Tensor ta = fill({3, n}, [&](int64_t) { return random_decimal(rng, -10, 30); });
  Tensor tb = fill({3, n}, [&](int64_t) { return random_decimal(rng, -30, 10); });
  const std::vector<float> got = run_kernel(g, {ta, tb}, {3, n}, opt());
  int64_t bad = 0;
  for (int64_t i = 0; i < ta.size(); ++i) {
    const float x = ta.data<float>()[i], y = tb.data<float>()[i];
    const float want = std::fmod(x, std::fmod(std::fmod(x, y), x) + std::fmod(y, y));
    if (!same_bits(got[static_cast<size_t>(i)], want) && ++bad <= 5)
      ADD_FAILURE() << "a " << show(x) << " b " << show(y) << ": kernel " << show(got[static_cast<size_t>(i)])
                    << ", expected " << show(want);
  }
  EXPECT_EQ(bad, 0);
}

KILN_SNIPPETS_BOTH_ISAS(SnippetsMod);

// Mod on two [4] inputs of type t; fmod < 0: no attribute (ONNX's default 0).
ir::Node* typed_mod(ir::Graph& g, DType t, int64_t fmod) {
  ir::Value* a = g.add_input("a", ir::ValueType{t, ir::PartialShape(Shape{4})});
  ir::Value* b = g.add_input("b", ir::ValueType{t, ir::PartialShape(Shape{4})});
  ir::Node* n = g.add_node("Mod", {a, b}, 1);
  if (fmod >= 0) n->attrs["fmod"] = fmod;
  g.add_output(n->output(0));
  ir::infer_shapes(g);
  return n;
}

TEST(SnippetsModSupport, OnlyF32WithFmod) {
  struct Case {
    DType type;
    int64_t fmod;
    bool supported;
  };
  for (const Case& c : {Case{DType::f32, 1, true}, Case{DType::f32, 0, false}, Case{DType::f32, -1, false},
                        Case{DType::i32, 1, false}, Case{DType::i32, 0, false}}) {
    auto g = snippets_body({});
    EXPECT_EQ(snippets::is_supported(*typed_mod(*g, c.type, c.fmod)), c.supported)
        << dtype_name(c.type) << " fmod=" << c.fmod;
  }
}

// A chain with a Mod ends in one Subgraph whose body compiles and computes std::fmod.
TEST(SnippetsModSupport, TokenizedChainCompiles) {
  KILN_SKIP_WITHOUT_SNIPPETS_TARGET();
  auto g = snippets_body({{2, 40}});
  ir::Node* r = g->add_node("Relu", {g->inputs()[0]}, 1, "relu");
  ir::Node* m = add_mod(*g, r->output(0), scalar_const(*g, 0.3f));
  ir::Node* ng = g->add_node("Neg", {m->output(0)}, 1, "neg");
  g->add_output(ng->output(0));
  ir::infer_shapes(*g);
  EXPECT_EQ(snippets::tokenize(*g, cpu::mark_skipped(*g), cpu::x64::shared_target_machine()->max_data_pointers()), 1u);
  ASSERT_EQ(g->num_nodes(), 1u);
  ir::Node* sg = g->topo_order().at(0);
  ASSERT_TRUE(snippets::is_subgraph(*sg));
  auto body = sg->attr_graph(snippets::kBodyAttr);
  EXPECT_EQ(body->num_nodes(), 3u);
  std::mt19937 rng(29);
  Tensor x = fill({2, 40}, [&](int64_t) { return random_decimal(rng, -3, 3); });
  snippets::CompileOptions o = best_target_options();  // the best ISA the CPU has
  EXPECT_EQ(compare_with_reference(body, {x}, 0.0f, 0.0f, o), 0);
  const std::vector<float> got = run_kernel(body, {x}, {2, 40}, o);
  for (int64_t i = 0; i < x.size(); ++i) {
    const float want = -std::fmod(std::max(x.data<float>()[i], 0.0f), 0.3f);
    const float y = got[static_cast<size_t>(i)];
    EXPECT_TRUE(same_bits(y, want)) << i << ": " << show(y) << " vs " << show(want);
  }
}

}  // namespace
}  // namespace kiln::test::test_snippets_mod
