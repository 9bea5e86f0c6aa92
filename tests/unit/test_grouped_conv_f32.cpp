// kiln's grouped convolution kernel (cpu/grouped_conv_f32.hpp) against a direct loop in double
// precision: groups of 8 to 32 output channels (8 at stride 1 over 3 columns its own loop) and
// groups of 4 (two to a vector), strided, dilated, padded on either side, runs of every length,
// output rows in parts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/grouped_conv_f32.hpp"
#include "cpu/isa.hpp"

namespace test_grouped_conv_f32 {

namespace gc = kiln::cpu::grouped_conv_f32;

struct Case {
  int64_t c, m, groups, h, w, k, stride, dil, pad_t, pad_l;
};

gc::Geometry geometry(const Case& t) {
  gc::Geometry g;
  g.c = t.c, g.m = t.m, g.groups = t.groups, g.h = t.h, g.w = t.w, g.kh = g.kw = t.k;
  g.stride_h = g.stride_w = t.stride, g.dil_h = g.dil_w = t.dil, g.pad_t = t.pad_t, g.pad_l = t.pad_l;
  // as many output pixels as the window fits with the same padding on the far side
  g.oh = (t.h + 2 * t.pad_t - t.dil * (t.k - 1) - 1) / t.stride + 1;
  g.ow = (t.w + 2 * t.pad_l - t.dil * (t.k - 1) - 1) / t.stride + 1;
  return g;
}

// y[oy][ox][o], x channels-last, w ONNX's [m][c / groups][k][k]
std::vector<double> reference(const gc::Geometry& g, const std::vector<float>& x, const std::vector<float>& w) {
  const int64_t cg = g.in_per_group(), og = g.out_per_group();
  std::vector<double> y(static_cast<size_t>(g.oh * g.ow * g.m), 0.0);
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox)
      for (int64_t o = 0; o < g.m; ++o) {
        const int64_t group = o / og;
        double s = 0;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t iy = oy * g.stride_h - g.pad_t + i * g.dil_h, ix = ox * g.stride_w - g.pad_l + j * g.dil_w;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              s += static_cast<double>(x[static_cast<size_t>((iy * g.w + ix) * g.c + group * cg + ci)]) *
                   w[static_cast<size_t>(((o * cg + ci) * g.kh + i) * g.kw + j)];
            }
        y[static_cast<size_t>((oy * g.ow + ox) * g.m + o)] = s;
      }
  return y;
}

void check(const Case& t) {
  const gc::Geometry g = geometry(t);
  SCOPED_TRACE(testing::Message() << "c " << t.c << " m " << t.m << " groups " << t.groups << " " << t.h << "x" << t.w
                                  << " k " << t.k << " stride " << t.stride << " dil " << t.dil << " pads " << t.pad_t
                                  << "," << t.pad_l);
  ASSERT_TRUE(gc::supports(g.in_per_group(), g.out_per_group(), g.groups));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(g.h * g.w * g.c)), w(static_cast<size_t>(g.m * g.in_per_group() * g.kh * g.kw));
  for (float& v : x) v = d(rng);
  for (float& v : w) v = d(rng);
  std::vector<float> packed(static_cast<size_t>(gc::packed_size(g))), scratch(static_cast<size_t>(gc::scratch_floats(g)));
  gc::pack_weights(g, w.data(), packed.data());
  std::vector<float> y(static_cast<size_t>(g.oh * g.ow * g.m), std::nanf(""));
  // the rows in two calls, as threads take them
  const int64_t half = g.oh / 2;
  gc::rows(g, x.data(), packed.data(), 0, half, y.data(), scratch.data());
  gc::rows(g, x.data(), packed.data(), half, g.oh, y.data(), scratch.data());
  const std::vector<double> ref = reference(g, x, w);
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::abs(y[i] - ref[i]) <= 1e-5 + 1e-4 * std::abs(ref[i])) && bad++ < 5)
      ADD_FAILURE() << "output " << i << " (pixel " << i / static_cast<size_t>(g.m) << ", channel "
                    << i % static_cast<size_t>(g.m) << "): " << y[i] << ", expected " << ref[i];
  EXPECT_EQ(bad, 0u);
}

TEST(GroupedConvF32, Supports) {
  EXPECT_TRUE(gc::supports(8, 8, 3));
  EXPECT_TRUE(gc::supports(16, 32, 5));
  EXPECT_FALSE(gc::supports(8, 40, 2));   // more than 32 outputs a group
  EXPECT_FALSE(gc::supports(8, 12, 2));   // not a multiple of 8
  EXPECT_TRUE(gc::supports(4, 4, 32));    // two groups of 4 to a vector
  EXPECT_FALSE(gc::supports(4, 4, 31));   // an odd number of groups of 4
  EXPECT_FALSE(gc::supports(2, 4, 32));   // groups of 4 outputs from 2 inputs
}

TEST(GroupedConvF32, GroupsOfEightToThirtyTwoMatchDirectLoop) {
  if (!gc::available()) GTEST_SKIP() << "grouped_conv_f32 needs AVX2";
  check({24, 24, 3, 9, 13, 3, 1, 1, 1, 1});
  check({32, 64, 2, 7, 30, 3, 2, 1, 1, 1});    // 32 outputs a group, stride 2
  check({48, 48, 2, 6, 11, 3, 1, 2, 2, 2});    // 24 a group, dilated
  check({16, 32, 2, 5, 5, 5, 1, 1, 2, 0});     // 16 a group, 5x5, padded above only
  // 8 a group at stride 1, 3 columns (each input broadcast once for its three taps): runs of
  // every length up to the longest (12 with AVX2, 24 with AVX-512) and past it, padded or not
  for (int64_t w : {1, 2, 3, 5, 12, 13, 24, 25, 26})
    check({16, 16, 2, 3, w, 3, 1, 1, 1, 1});
  check({24, 24, 3, 6, 20, 3, 1, 1, 0, 0});   // unpadded: read in place
  check({16, 16, 2, 4, 9, 3, 1, 1, 2, 2});    // padding past a tap: every third column zeros
}

// Groups of 16 and 32 outputs: on AVX-512 the 16-lane forms (runs of up to 28 pixels for 16 a
// group, 14 for 32; 28 and 12 at stride 1 over 3 columns), and where the channels are a multiple
// of 64 the input rows copied a cache line apart a pixel; the 8-lane forms elsewhere.
TEST(GroupedConvF32, GroupsOfSixteenAndThirtyTwoMatchDirectLoop) {
  if (!gc::available()) GTEST_SKIP() << "grouped_conv_f32 needs AVX2";
  for (int64_t w : {1, 2, 7, 12, 13, 14, 15, 27, 28, 29, 57}) {
    check({32, 32, 2, 3, w, 3, 1, 1, 1, 1});   // 16 a group, stride 1, 3 columns
    check({64, 64, 2, 3, w, 3, 1, 1, 1, 1});   // 32 a group, stride 1, 3 columns
    check({64, 64, 4, 3, w, 3, 2, 1, 1, 1});   // 16 a group, stride 2, 64 channels: rows a line apart a pixel
  }
  check({128, 128, 4, 5, 30, 3, 2, 1, 1, 1});  // 32 a group, stride 2, rows a line apart a pixel
  check({128, 128, 8, 6, 13, 3, 1, 1, 1, 1});  // 16 a group, stride 1, rows a line apart a pixel
  check({64, 64, 2, 6, 11, 3, 1, 2, 2, 2});    // dilated
  check({48, 96, 3, 5, 9, 5, 1, 1, 2, 0});     // 16 in, 32 out a group, 5x5, padded above only
  check({64, 64, 4, 6, 20, 3, 1, 1, 0, 0});    // unpadded: read in place, c a pixel
  check({32, 32, 2, 4, 9, 3, 1, 1, 2, 2});     // padding past a tap
}

// Rows wide enough that a call's rows are several bands (grouped_conv_f32::band_rows): each
// band's input rows copied into the scratch once, shared by its output rows.
TEST(GroupedConvF32, BandsOfRowsMatchDirectLoop) {
  if (!gc::available()) GTEST_SKIP() << "grouped_conv_f32 needs AVX2";
  const Case cases[] = {
      {128, 128, 32, 16, 60, 3, 1, 1, 1, 1},  // groups of 4: bands of 3 rows
      {128, 128, 16, 17, 60, 3, 2, 2, 2, 2},  // groups of 8, stride 2, dilated
      {256, 256, 16, 12, 60, 3, 1, 1, 1, 1},  // groups of 16: a band a row
      {256, 256, 8, 9, 70, 3, 2, 1, 1, 1},    // groups of 32, stride 2
  };
  for (const Case& t : cases) {
    const gc::Geometry g = geometry(t);
    EXPECT_GE(gc::band_rows(g), 1);
    EXPECT_LT(gc::band_rows(g), g.oh / 2) << "c " << t.c << " w " << t.w << ": one band a call, not several";
    check(t);
  }
  // bands of many rows whose windows span more rows than they read (dilated 4 apart: each window
  // row a slot of its own) or skip rows (stride 3 over 2 rows)
  check({16, 16, 2, 20, 9, 3, 1, 4, 4, 4});
  check({16, 16, 2, 23, 9, 2, 3, 1, 1, 1});
  check({32, 32, 2, 20, 9, 3, 2, 3, 3, 3});
}

TEST(GroupedConvF32, GroupsOfFourMatchDirectLoop) {
  if (!gc::available()) GTEST_SKIP() << "grouped_conv_f32 needs AVX2";
  // ResNeXt-50 32x4d's first stage, small: 128 channels, 32 groups of 4
  check({128, 128, 32, 10, 14, 3, 1, 1, 1, 1});
  for (int64_t w : {1, 2, 3, 4, 5, 7, 13, 29})  // runs of every length up to the longest and past it
    check({16, 16, 4, 4, w, 3, 1, 1, 1, 1});
  check({32, 32, 8, 9, 17, 3, 2, 1, 1, 1});    // ResNeXt's strided block
  check({8, 8, 2, 8, 12, 3, 1, 2, 2, 2});      // dilated
  check({24, 24, 6, 6, 9, 1, 1, 1, 0, 0});     // 1x1, read in place
  check({16, 16, 4, 7, 8, 3, 1, 1, 0, 2});     // padded left only
}

}  // namespace test_grouped_conv_f32
