// A convolution as the GEMMs of the taps that read the input (cpu/conv_taps_f32.hpp): which
// windows it takes and which taps it keeps, and the output against a direct convolution in
// double, channels-last, with the taps of whole rows (read in place) and of parts of rows
// (gathered), a bias, a summand already in the output and an activation after the last tap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/conv_taps_f32.hpp"
#include "tensor_test_util.hpp"

namespace test_conv_taps_f32 {

using namespace kiln;
using kiln::test::random_floats;
namespace taps = kiln::cpu::conv_taps_f32;
namespace gemm = kiln::cpu::gemm_f32;

// A 3x3 window, stride 1, "same" padding at dilations (dh, dw), over c channels of h x w.
cpu::im2col_f32::Geometry same_3x3(int64_t c, int64_t h, int64_t w, int64_t dh, int64_t dw) {
  cpu::im2col_f32::Geometry g;
  g.c = c, g.h = h, g.w = w, g.kh = 3, g.kw = 3, g.oh = h, g.ow = w;
  g.dil_h = dh, g.dil_w = dw, g.pad_t = dh, g.pad_l = dw;
  return g;
}

TEST(ConvTapsF32, KeepsTheTapsThatReadTheInputAndOnlyWindowsThatMostlyReadPadding) {
  // DeepLab's pyramid at dilation 12 over 10 x 16: the centre and the two horizontal side taps,
  // 4 columns each (16 - 12); the vertical ones read padding only
  const auto p = taps::plan(same_3x3(960, 10, 16, 12, 12), 1, 256);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->center, 4);
  ASSERT_EQ(p->others.size(), 2u);
  EXPECT_EQ(p->others[0].index, 3);
  EXPECT_EQ(p->others[0].dw, -12);
  EXPECT_EQ(p->others[0].c0, 12);
  EXPECT_EQ(p->others[0].c1, 16);
  EXPECT_EQ(p->others[1].index, 5);
  EXPECT_EQ(p->others[1].c0, 0);
  EXPECT_EQ(p->others[1].c1, 4);
  EXPECT_EQ(p->live_pixels, 160 + 2 * 40);
  // a dense 3x3 window reads the input with all 9 taps almost everywhere: the dense kernels
  EXPECT_FALSE(taps::plan(same_3x3(64, 20, 20, 1, 1), 1, 64));
  // at a stride, or with the output another size, or no centre tap (padding off the centre): none
  auto strided = same_3x3(64, 20, 20, 12, 12);
  strided.stride_h = 2, strided.oh = 10;
  EXPECT_FALSE(taps::plan(strided, 1, 64));
  auto off = same_3x3(64, 10, 16, 12, 12);
  off.pad_t = 11;
  EXPECT_FALSE(taps::plan(off, 1, 64));
}

TEST(ConvTapsF32, MatchesADirectConvolutionWithBiasSummandAndActivation) {
  if (!gemm::available()) GTEST_SKIP() << "kiln's GEMM needs AVX2";
  struct Case {
    int64_t n, c, h, w, m, dh, dw;
    const char* what;
  };
  const Case cases[] = {
      {2, 20, 5, 7, 70, 4, 3, "vertical side taps of whole rows, horizontal ones gathered; 70 columns cross a panel"},
      {1, 24, 4, 9, 16, 6, 5, "only horizontal side taps (gathered): the map is shorter than the dilation"},
      {3, 8, 9, 3, 33, 2, 4, "only vertical side taps (whole rows, read in place)"},
      {1, 16, 3, 3, 8, 3, 3, "the centre alone: the ops go with its GEMM"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const auto g = same_3x3(k.c, k.h, k.w, k.dh, k.dw);
    const auto p = taps::plan(g, k.n, k.m);
    ASSERT_TRUE(p);
    const std::vector<float> x = random_floats(static_cast<size_t>(k.n * k.h * k.w * k.c), 11);  // NHWC
    const std::vector<float> w = random_floats(static_cast<size_t>(k.m * k.c * 9), 12);        // [m][c][3][3]
    const std::vector<float> bias = random_floats(static_cast<size_t>(k.m), 13);
    const std::vector<float> summand = random_floats(static_cast<size_t>(k.n * k.h * k.w * k.m), 14);
    std::vector<float> packed(static_cast<size_t>(taps::packed_floats(k.c, k.m, 9)));
    taps::pack(w.data(), k.c, k.m, 9, packed.data());
    gemm::Epilogue ep, first, last;
    ep.bias = bias.data();
    ep.accumulate = true;
    gemm::EpilogueOp relu;
    relu.alg = dnnl::algorithm::eltwise_relu;
    ep.ops.push_back(relu);
    taps::split_epilogue(*p, ep, &first, &last);
    EXPECT_EQ(last.ops.empty(), p->others.empty());
    std::vector<float> y = summand;
    std::vector<float> scratch(static_cast<size_t>(std::max<int64_t>(1, taps::scratch_floats(*p))));
    taps::run(*p, x.data(), packed.data(), y.data(), first, last, scratch.data(), 2);
    size_t bad = 0;
    for (int64_t img = 0; img < k.n; ++img)
      for (int64_t r = 0; r < k.h; ++r)
        for (int64_t col = 0; col < k.w; ++col)
          for (int64_t o = 0; o < k.m; ++o) {
            const size_t at = static_cast<size_t>(((img * k.h + r) * k.w + col) * k.m + o);
            double sum = static_cast<double>(summand[at]) + bias[static_cast<size_t>(o)], scale = std::fabs(sum);
            for (int64_t th = 0; th < 3; ++th)
              for (int64_t tw = 0; tw < 3; ++tw) {
                const int64_t ir = r + th * k.dh - k.dh, ic = col + tw * k.dw - k.dw;
                if (ir < 0 || ir >= k.h || ic < 0 || ic >= k.w) continue;
                for (int64_t ch = 0; ch < k.c; ++ch) {
                  const double v = static_cast<double>(x[static_cast<size_t>(((img * k.h + ir) * k.w + ic) * k.c + ch)]) *
                                   w[static_cast<size_t>((o * k.c + ch) * 9 + th * 3 + tw)];
                  sum += v;
                  scale += std::fabs(v);
                }
              }
            const double want = std::max(0.0, sum);
            if (std::fabs(y[at] - want) > 1e-5 * scale + 1e-6 && ++bad <= 5)
              ADD_FAILURE() << "image " << img << " pixel " << r << "," << col << " channel " << o << ": " << y[at]
                            << ", want " << want;
          }
    EXPECT_EQ(bad, 0u);
  }
}

}  // namespace test_conv_taps_f32
