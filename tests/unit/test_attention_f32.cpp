// kiln's attention kernel (cpu/attention_f32.hpp): the 16x16 transposes of its K^T packing, and
// whole heads against a double reference over both layouts, multi-head and grouped-query,
// queries and keys of different lengths, float / bool / causal masks and a fully masked row,
// on one thread and on two. Below AVX-512 the kernel does not run: run() says so.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/attention_f32.hpp"
#include "cpu/isa.hpp"
#include <kiln/error.hpp>

#include "tensor_test_util.hpp"

namespace test_attention_f32 {

using namespace kiln;
using kiln::test::random_floats;
namespace att = kiln::cpu::attention_f32;

namespace {

struct Case {
  att::Geometry g;
  int mask = 0;  // 0 none, 1 float [B,1,1,T] with -inf, 2 float [1,1,S,T], 3 bool [B,1,S,T] (a row all false)
};

// element (b, h, s, d) of a [B, seq, heads*size] / [B, heads, seq, size] tensor
int64_t at(bool packed, int64_t heads, int64_t seq, int64_t size, int64_t b, int64_t h, int64_t s, int64_t d) {
  return packed ? ((b * seq + s) * heads + h) * size + d : ((b * heads + h) * seq + s) * size + d;
}

void check(const Case& c, int threads) {
  const att::Geometry& g = c.g;
  const auto q = random_floats(static_cast<size_t>(g.B * g.Hq * g.S * g.D), 1), k = random_floats(static_cast<size_t>(g.B * g.Hkv * g.T * g.D), 2),
             v = random_floats(static_cast<size_t>(g.B * g.Hkv * g.T * g.Dv), 3);
  att::Mask mask;
  std::vector<float> mf;
  std::vector<uint8_t> mb;
  if (c.mask == 1 || c.mask == 2) {
    const int64_t dims1[4] = {g.B, 1, 1, g.T}, dims2[4] = {1, 1, g.S, g.T};
    const int64_t* d = c.mask == 1 ? dims1 : dims2;
    for (int i = 0; i < 4; ++i) mask.dims[i] = d[i];
    mf = random_floats(static_cast<size_t>(d[0] * d[2] * d[3]), 4);
    if (c.mask == 1) mf[1] = -std::numeric_limits<float>::infinity();  // a padded key
    mask.data = mf.data();
  } else if (c.mask == 3) {
    const int64_t d[4] = {g.B, 1, g.S, g.T};
    for (int i = 0; i < 4; ++i) mask.dims[i] = d[i];
    mb.resize(static_cast<size_t>(g.B * g.S * g.T));
    std::mt19937 rng(5);
    for (auto& x : mb) x = rng() % 3 != 0;
    for (int64_t t = 0; t < g.T; ++t) mb[t] = 0;  // batch 0, query 0: no key at all -> zeros
    mask.boolean = true;
    mask.data = mb.data();
  }
  std::vector<float> y(static_cast<size_t>(g.B * g.Hq * g.S * g.Dv), 99.0f);
  std::vector<char> scratch(att::scratch_bytes(g, threads));
  att::run(g, q.data(), k.data(), v.data(), mask, y.data(), scratch.data(), threads);
  const int64_t G = g.Hq / g.Hkv;
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.Hq; ++h)
      for (int64_t s = 0; s < g.S; ++s) {
        std::vector<double> p(static_cast<size_t>(g.T));
        double mx = -INFINITY;
        for (int64_t t = 0; t < g.T; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < g.D; ++d)
            dot += static_cast<double>(q[at(g.packed, g.Hq, g.S, g.D, b, h, s, d)]) * k[at(g.packed, g.Hkv, g.T, g.D, b, h / G, t, d)];
          dot *= g.scale;
          if (c.mask == 1) dot += mf[b * g.T + t];
          if (c.mask == 2) dot += mf[s * g.T + t];
          if (c.mask == 3 && !mb[(b * g.S + s) * g.T + t]) dot = -INFINITY;
          if (g.causal && t > s) dot = -INFINITY;
          p[t] = dot;
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (double& x : p) sum += (x = mx == -INFINITY ? 0.0 : std::exp(x - mx));
        for (int64_t e = 0; e < g.Dv; ++e) {
          double want = 0;
          for (int64_t t = 0; t < g.T; ++t)
            want += (sum > 0 ? p[t] / sum : 0.0) * v[at(g.packed, g.Hkv, g.T, g.Dv, b, h / G, t, e)];
          ASSERT_NEAR(y[at(g.packed, g.Hq, g.S, g.Dv, b, h, s, e)], want, 2e-5)
              << "b " << b << " h " << h << " s " << s << " e " << e;
        }
      }
}

}  // namespace

TEST(AttentionF32, TransposesMatchTheirDefinition) {
  if (!att::available()) GTEST_SKIP() << "neither AVX-512 nor AVX2: the kernel does not run (see HeadsMatch...)";
  for (int64_t rows : {1, 5, 16, 17, 40})
    for (int64_t cols : {1, 15, 16, 33, 64}) {
      const int64_t ld_in = cols + 3, ld_out = rows + 5;
      const auto in = random_floats(static_cast<size_t>(rows * ld_in), 7);
      std::vector<float> out(static_cast<size_t>(cols * ld_out), 42.0f);
      att::transpose(in.data(), rows, cols, ld_in, 0.5f, out.data(), ld_out);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < ld_out; ++i) {
          const float want = i < rows ? 0.5f * in[i * ld_in + j] : 42.0f;  // nothing written past `rows`
          ASSERT_EQ(out[j * ld_out + i], want) << rows << "x" << cols << " at " << j << ", " << i;
        }
    }
}

TEST(AttentionF32, HeadsMatchADoubleReference) {
  if (!att::available()) {  // below AVX2: an error, never an illegal instruction
    att::Geometry g{1, 1, 1, 2, 2, 4, 4, true, 0.5f, false, {}};
    std::vector<float> x(8), y(8);
    std::vector<char> scratch(att::scratch_bytes(g, 1));
    EXPECT_THROW(att::run(g, x.data(), x.data(), x.data(), {}, y.data(), scratch.data(), 1), Error);
    return;
  }
  const std::vector<Case> cases = {
      {{1, 2, 2, 7, 7, 16, 16, true, 0.25f, false, {}}, 0},   // multi-head, packed
      {{2, 4, 2, 9, 9, 8, 12, true, 0.35f, false, {}}, 1},    // grouped-query, float padding mask
      {{2, 2, 2, 5, 70, 64, 64, false, 0.125f, false, {}}, 2},  // 4-D, queries and keys of different lengths
      {{2, 3, 1, 20, 20, 17, 33, true, 0.2f, true, {}}, 0},   // multi-query, causal, odd sizes
      {{2, 2, 2, 6, 6, 8, 8, false, 0.3f, false, {}}, 3},     // bool mask with a row of no keys
      {{1, 2, 2, 130, 130, 64, 64, true, 0.125f, false, {}}, 1},  // rows past a panel of keys
      // few heads: their query rows split into items (run() gives each thread 8 or more), with
      // masks that differ per query row and a causal limit, which each item offsets by its rows
      {{1, 1, 1, 64, 40, 16, 16, true, 0.3f, false, {}}, 2},
      {{1, 2, 1, 50, 50, 8, 8, false, 0.3f, true, {}}, 3},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "case " << i << ", " << threads << " threads");
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      check(cases[i], threads);
      omp_set_num_threads(before);
    }
}

TEST(AttentionF32, NoDenormalProbabilities) {
  // No denormal weight may reach the product with V: it would run on the CPU's slow path (a
  // real BERT input took 7.9 ms instead of 3.5). One query, 128 keys: 127 scores 0 and one at
  // -87 (e^-87 / 128 is below the smallest normal float); V is 0 but for that key, 1e30, so
  // whatever weight it gets shows in Y. The kernel leaves the row as e^(x - max) (e^-87 is a
  // normal float) and scales Y by 1 / sum, which gives the exact product,
  // e^-87 / (127 + e^-87) * 1e30, where normalizing first would make the weight a denormal.
  if (!att::available()) GTEST_SKIP() << "neither AVX-512 nor AVX2: the kernel does not run (see HeadsMatch...)";
  att::Geometry g{1, 1, 1, 1, 128, 1, 1, true, 1.0f, false, {}};
  std::vector<float> q = {1.0f}, k(128, 0.0f), v(128, 0.0f), mask(128, 0.0f), y(1, 5.0f);
  k[7] = -87.0f;
  v[7] = 1e30f;
  att::Mask m;
  m.data = mask.data();
  m.dims[3] = 128;
  std::vector<char> scratch(att::scratch_bytes(g, 1));
  att::run(g, q.data(), k.data(), v.data(), m, y.data(), scratch.data(), 1);
  const double exact = std::exp(-87.0) / (127.0 + std::exp(-87.0)) * 1e30;
  EXPECT_NEAR(y[0], exact, 1e-5 * exact);
  // a mask of -10000: e^-10000 is 0, the key weighs nothing on every ISA
  k[7] = 0.0f;
  mask[7] = -10000.0f;
  att::run(g, q.data(), k.data(), v.data(), m, y.data(), scratch.data(), 1);
  EXPECT_EQ(y[0], 0.0f);
}

namespace {

// A padded batch: batch b attends to its first valid[b] keys; the mask is [B, 1, 1, T], float
// (`pad` added at padded keys, 0 elsewhere) or bool.
struct Padded {
  att::Geometry g;
  std::vector<int64_t> valid;
  float pad = -3.4028235e38f;  // Hugging Face's finfo(f32).min
  bool boolean = false;
};

struct PaddedData {
  std::vector<float> q, k, v, mf;
  std::vector<uint8_t> mb;
  int64_t dims[4] = {1, 1, 1, 1};
  bool boolean = false;
  // the mask over this data's own mf / mb (a copy of the data has its own)
  att::Mask mask() const {
    att::Mask m;
    for (int i = 0; i < 4; ++i) m.dims[i] = dims[i];
    m.boolean = boolean;
    m.data = boolean ? static_cast<const void*>(mb.data()) : static_cast<const void*>(mf.data());
    return m;
  }
  // attended_keys over this data
  int64_t keys(const att::Geometry& g, int64_t b, int64_t h, int64_t s0, int64_t s1) const {
    return att::attended_keys(g, q.data(), k.data(), v.data(), mask(), b, h, s0, s1);
  }
};

PaddedData padded_data(const Padded& c, float qk_range = 1.0f) {
  const att::Geometry& g = c.g;
  PaddedData d;
  d.q = random_floats(static_cast<size_t>(g.B * g.Hq * g.S * g.D), 11, -qk_range, qk_range);
  d.k = random_floats(static_cast<size_t>(g.B * g.Hkv * g.T * g.D), 12, -qk_range, qk_range);
  d.v = random_floats(static_cast<size_t>(g.B * g.Hkv * g.T * g.Dv), 13);
  const int64_t dims[4] = {g.B, 1, 1, g.T};
  for (int i = 0; i < 4; ++i) d.dims[i] = dims[i];
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t t = 0; t < g.T; ++t) {
      d.mf.push_back(t < c.valid[static_cast<size_t>(b)] ? 0.0f : c.pad);
      d.mb.push_back(t < c.valid[static_cast<size_t>(b)] ? 1 : 0);
    }
  d.boolean = c.boolean;
  return d;
}

std::vector<float> run_padded(const att::Geometry& g, const PaddedData& d, int threads) {
  std::vector<float> y(static_cast<size_t>(g.B * g.Hq * g.S * g.Dv), 99.0f);
  std::vector<char> scratch(att::scratch_bytes(g, threads));
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  att::run(g, d.q.data(), d.k.data(), d.v.data(), d.mask(), y.data(), scratch.data(), threads);
  omp_set_num_threads(before);
  return y;
}

}  // namespace

TEST(AttentionF32, PaddedKeysAreLeftOutWithTheSameResults) {
  // A padded batch's trailing keys weigh exactly 0 in every row: left out, the outputs are those
  // the kernel gives when it computes them (skip_masked_keys off) but for the order in which
  // the GEMM sums the other keys' terms (the AVX2 kernel pairs K steps by four and by parity:
  // a few ulp), for Hugging Face's
  // finfo.min mask, the older -10000, -inf and a bool mask; both layouts, grouped-query, one
  // batch with no padding and one with a single key, on one thread and two.
  if (!att::available()) GTEST_SKIP() << "neither AVX-512 nor AVX2: the kernel does not run (see HeadsMatch...)";
  const std::vector<Padded> cases = {
      {{3, 4, 4, 40, 40, 16, 16, true, 0.25f, false, {}}, {30, 40, 1}},
      {{2, 4, 2, 35, 35, 8, 12, false, 0.35f, false, {}}, {20, 27}, -10000.0f},
      {{2, 2, 2, 70, 70, 64, 64, true, 0.125f, false, {}}, {53, 17}, -std::numeric_limits<float>::infinity()},
      {{2, 2, 1, 33, 33, 16, 16, true, 0.2f, false, {}}, {25, 9}, 0.0f, true},
      {{2, 2, 2, 24, 24, 16, 16, true, 0.2f, true, {}}, {18, 24}, 0.0f, true},  // causal, bool
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "case " << i << ", " << threads << " threads");
      const PaddedData d = padded_data(cases[i]);
      att::Geometry g = cases[i].g;
      // every item of batch b computes valid[b] keys (one query row's range is enough to ask)
      for (int64_t b = 0; b < g.B; ++b)
        EXPECT_EQ(d.keys(g, b, 1, 0, g.S), cases[i].valid[static_cast<size_t>(b)]);
      const std::vector<float> skipped = run_padded(g, d, threads);
      g.skip_masked_keys = false;
      EXPECT_EQ(d.keys(g, 0, 0, 0, g.S), g.T);
      const std::vector<float> computed = run_padded(g, d, threads);
      for (size_t e = 0; e < computed.size(); ++e)
        ASSERT_NEAR(skipped[e], computed[e], 1e-6f * std::max(1.0f, std::fabs(computed[e]))) << "element " << e;
    }
}

TEST(AttentionF32, KeysAreKeptWhereTheirWeightCouldBeNonZero) {
  // attended_keys keeps every key where leaving one out could change a result.
  if (!att::available()) GTEST_SKIP() << "neither AVX-512 nor AVX2: the kernel does not run (see HeadsMatch...)";
  const Padded base{{1, 2, 2, 16, 16, 8, 8, true, 0.5f, false, {}}, {10}, -10000.0f};
  const att::Geometry& g = base.g;
  {  // scores that can reach 10000: Q and K of length ~ 8 * 60, scale 0.5 -> |score| up to ~14400
    const PaddedData d = padded_data(base, 60.0f);
    EXPECT_EQ(d.keys(g, 0, 0, 0, g.S), g.T);
    std::vector<float> y = run_padded(g, d, 1);
    att::Geometry dense = g;
    dense.skip_masked_keys = false;
    EXPECT_EQ(y, run_padded(dense, d, 1));  // every key computed: the very same sums
  }
  PaddedData d = padded_data(base);
  EXPECT_EQ(d.keys(g, 0, 0, 0, g.S), 10);
  {  // a padded key's V not finite: 0 * inf is NaN, as computing the key gives
    PaddedData e = d;
    e.v[static_cast<size_t>((12 * 2 + 1) * g.Dv + 3)] = std::numeric_limits<float>::infinity();  // key 12, head 1
    EXPECT_EQ(e.keys(g, 0, 1, 0, g.S), g.T);
    EXPECT_EQ(e.keys(g, 0, 0, 0, g.S), 10);  // head 0's V
  }
  {  // a NaN in the mask, or a causal limit with a float mask: every key
    PaddedData e = d;
    e.mf[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(e.keys(g, 0, 0, 0, g.S), g.T);
    att::Geometry causal = g;
    causal.causal = true;
    EXPECT_EQ(d.keys(causal, 0, 0, 0, g.S), g.T);
  }
  {  // a mask per query row ([1, 1, S, T], as newer exporters expand it): the keys every row
     // of the item drops; a row that keeps them all keeps them for the item
    PaddedData e = d;
    e.mf.resize(static_cast<size_t>(g.S * g.T));
    for (int64_t s = 0; s < g.S; ++s)
      for (int64_t t = 0; t < g.T; ++t) e.mf[static_cast<size_t>(s * g.T + t)] = t < 10 + s % 3 ? 0.0f : -10000.0f;
    const int64_t dims[4] = {1, 1, g.S, g.T};
    for (int i = 0; i < 4; ++i) e.dims[i] = dims[i];
    EXPECT_EQ(e.keys(g, 0, 0, 0, g.S), 12);
    EXPECT_EQ(e.keys(g, 0, 0, 3, 4), 10);  // row 3 alone
    std::vector<float> y = run_padded(g, e, 2);
    att::Geometry dense = g;
    dense.skip_masked_keys = false;
    const std::vector<float> want = run_padded(dense, e, 2);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-6f * std::max(1.0f, std::fabs(want[i])));
    e.mf[static_cast<size_t>(5 * g.T + g.T - 1)] = 0.0f;  // row 5 attends to the last key
    EXPECT_EQ(e.keys(g, 0, 0, 0, g.S), g.T);
    EXPECT_EQ(e.keys(g, 0, 0, 6, g.S), 12);
  }
  {  // quantized probabilities whose 0 does not stay 0 (zero point outside [qmin, qmax])
    att::Geometry quant = g;
    quant.probs = {true, 1.0f / 255, 0.0f, 1.0f, 255.0f};
    EXPECT_EQ(d.keys(quant, 0, 0, 0, g.S), g.T);
    quant.probs.qmin = 0.0f;
    EXPECT_EQ(d.keys(quant, 0, 0, 0, g.S), 10);
  }
  {  // a bool mask that attends to nothing: no key, and zeros out
    Padded none = base;
    none.boolean = true;
    none.valid = {0};
    const PaddedData e = padded_data(none);
    EXPECT_EQ(e.keys(g, 0, 0, 0, g.S), 0);
    for (float x : run_padded(g, e, 2)) ASSERT_EQ(x, 0.0f);
  }
}

}  // namespace test_attention_f32
