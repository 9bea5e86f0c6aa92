#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <limits>
#include <map>
#include <memory>

#include "op_test_util.hpp"

namespace test_ops_misc {

using namespace kiln;
using namespace kiln::test;

namespace {

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.size(), static_cast<int64_t>(want.size()));
  auto got = t.to_f64();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

// ------------------------------------------------------------------ recurrent

TEST(OpsMisc, RnnForwardAndReverse) {
  Tensor X = f32({1, 2}, {2, 1, 1});  // seq 2, batch 1, input 1
  Tensor W = f32({0.5f}, {1, 1, 1});
  Tensor R = f32({0.25f}, {1, 1, 1});
  auto y = run_op("RNN", {X, W, R}, {{"hidden_size", 1}}, 2);
  EXPECT_EQ(y[0].shape(), (Shape{2, 1, 1, 1}));
  EXPECT_EQ(y[1].shape(), (Shape{1, 1, 1}));
  double h1 = std::tanh(0.5), h2 = std::tanh(1.0 + 0.25 * h1);
  expect_near(y[0], {h1, h2});
  expect_near(y[1], {h2});

  auto yr = run_op("RNN", {X, W, R}, {{"hidden_size", 1}, {"direction", "reverse"}}, 2);
  double r1 = std::tanh(1.0), r0 = std::tanh(0.5 + 0.25 * r1);
  expect_near(yr[0], {r0, r1});
  expect_near(yr[1], {r0});

  // bidirectional stacks both; activations given once are shared by both directions
  Tensor W2 = f32({0.5f, 0.5f}, {2, 1, 1});
  Tensor R2 = f32({0.25f, 0.25f}, {2, 1, 1});
  auto yb = run_op("RNN", {X, W2, R2}, {{"direction", "bidirectional"}}, 2);
  EXPECT_EQ(yb[0].shape(), (Shape{2, 2, 1, 1}));
  expect_near(yb[0], {h1, r0, h2, r1});
  expect_near(yb[1], {h2, r0});
}

TEST(OpsMisc, RnnSequenceLensAndLayout) {
  // batch 2: second sequence has length 1; layout 1 puts batch first.
  Tensor X = f32({1, 2, 3, 4}, {2, 2, 1});  // [batch, seq, input]
  Tensor W = f32({1.0f}, {1, 1, 1});
  Tensor R = f32({0.0f}, {1, 1, 1});
  Tensor B = f32({0.0f, 0.0f}, {1, 2});
  Tensor L = Tensor::from_vector<int32_t>({2, 1}, {2});
  auto y = run_op("RNN", {X, W, R, B, L}, {{"layout", 1}, {"activations", std::vector<std::string>{"Relu"}}}, 2);
  EXPECT_EQ(y[0].shape(), (Shape{2, 2, 1, 1}));
  expect_near(y[0], {1, 2, 3, 0});
  EXPECT_EQ(y[1].shape(), (Shape{2, 1, 1}));
  expect_near(y[1], {2, 3});
}

TEST(OpsMisc, LstmSingleStepAllOutputs) {
  Tensor X = f32({0.5f}, {1, 1, 1});
  Tensor W = f32({1, 1, 1, 1}, {1, 4, 1});
  Tensor R = f32({0, 0, 0, 0}, {1, 4, 1});
  auto y = run_op("LSTM", {X, W, R}, {{"hidden_size", 1}}, 3);
  double s = sigmoid(0.5), c = s * std::tanh(0.5), h = s * std::tanh(c);
  expect_near(y[0], {h});
  expect_near(y[1], {h});
  expect_near(y[2], {c});

  // peepholes: P = [Pi, Po, Pf] with initial cell state 1
  Tensor B = f32({0, 0, 0, 0, 0, 0, 0, 0}, {1, 8});
  Tensor seq = Tensor::from_vector<int32_t>({1}, {1});
  Tensor h0 = f32({0}, {1, 1, 1});
  Tensor c0 = f32({1}, {1, 1, 1});
  Tensor P = f32({0.1f, 0.2f, 0.3f}, {1, 3});
  auto yp = run_op("LSTM", {X, W, R, B, seq, h0, c0, P}, {}, 3);
  double i = sigmoid(0.5 + 0.1), f = sigmoid(0.5 + 0.3), cc = std::tanh(0.5);
  double C = f * 1 + i * cc, o = sigmoid(0.5 + 0.2 * C), H = o * std::tanh(C);
  expect_near(yp[1], {H});
  expect_near(yp[2], {C});
}

TEST(OpsMisc, GruLinearBeforeReset) {
  Tensor X = f32({1.0f}, {1, 1, 1});
  Tensor W = f32({0.5f, -0.5f, 2.0f}, {1, 3, 1});  // z, r, h
  Tensor R = f32({0, 0, 0}, {1, 3, 1});
  Tensor B = f32({0, 0, 0, 0, 0, 0.7f}, {1, 6});  // Rbh = 0.7
  double z = sigmoid(0.5), r = sigmoid(-0.5);
  auto y0 = run_op("GRU", {X, W, R, B}, {{"hidden_size", 1}}, 2);
  expect_near(y0[1], {(1 - z) * std::tanh(2.0 + 0.7)});
  auto y1 = run_op("GRU", {X, W, R, B}, {{"hidden_size", 1}, {"linear_before_reset", 1}}, 2);
  expect_near(y1[1], {(1 - z) * std::tanh(2.0 + r * 0.7)});
}

TEST(OpsMisc, RecurrentErrors) {
  Tensor X = f32({1, 2}, {2, 1, 1});
  Tensor W = f32({0.5f}, {1, 1, 1});
  Tensor R = f32({0.25f}, {1, 1, 1});
  EXPECT_THROW(run_op("RNN", {X, W, R}, {{"direction", "sideways"}}, 2), Error);
  EXPECT_THROW(run_op("RNN", {X, W, R}, {{"activations", std::vector<std::string>{"Bogus"}}}, 2), Error);
  EXPECT_THROW(run_op("RNN", {X, f32({1, 2}, {1, 2, 1}), R}, {}, 2), Error);              // W shape
  EXPECT_THROW(run_op("LSTM", {X, W, R}, {}, 3), Error);                                  // W needs 4 gates
  Tensor L = Tensor::from_vector<int32_t>({5}, {1});
  EXPECT_THROW(run_op("RNN", {X, W, R, f32({0, 0}, {1, 2}), L}, {}, 2), Error);           // seq len > S
}

// ------------------------------------------------------------------ detection / sampling

TEST(OpsMisc, NonMaxSuppression) {
  Tensor boxes = f32({0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.1f, 1.0f, 1.1f, 0.0f, -0.1f, 1.0f, 0.9f,
                      0.0f, 10.0f, 1.0f, 11.0f, 0.0f, 10.1f, 1.0f, 11.1f, 0.0f, 100.0f, 1.0f, 101.0f},
                     {1, 6, 4});
  Tensor scores = f32({0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}, {1, 1, 6});
  auto y = run_op("NonMaxSuppression",
                  {boxes, scores, i64({3}, {1}), f32({0.5f}, {1}), f32({0.0f}, {1})});
  EXPECT_EQ(y[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(vals<int64_t>(y[0]), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  // score threshold 0.4 drops box 5; max 2 keeps the first two
  auto y2 = run_op("NonMaxSuppression", {boxes, scores, i64({2}, {1}), f32({0.5f}, {1}), f32({0.4f}, {1})});
  EXPECT_EQ(vals<int64_t>(y2[0]), (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // without max_output_boxes_per_class nothing is selected
  auto y3 = run_op("NonMaxSuppression", {boxes, scores});
  EXPECT_EQ(y3[0].shape(), (Shape{0, 3}));
  EXPECT_THROW(run_op("NonMaxSuppression", {f32({0, 0, 1}, {1, 1, 3}), f32({1}, {1, 1, 1})}), Error);
}

// NonMaxSuppression by the definition: per batch and class, candidates above the score
// threshold by descending score (stable), each kept unless a kept one overlaps it by IoU > t.
std::vector<int64_t> nms_by_definition(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t nb,
                                       int64_t nc, int64_t ns, int64_t max_out, double iou_t, double score_t,
                                       bool center) {
  auto corners = [&](int64_t b, int64_t i) {
    const float* p = boxes.data() + (b * ns + i) * 4;
    std::array<double, 4> c;  // y1, x1, y2, x2
    if (center) {
      c = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0};
    } else {
      c = {std::min<double>(p[0], p[2]), std::min<double>(p[1], p[3]), std::max<double>(p[0], p[2]),
           std::max<double>(p[1], p[3])};
    }
    return c;
  };
  auto over = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double h = std::min(a[2], b[2]) - std::max(a[0], b[0]), w = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (!(h > 0 && w > 0)) return false;
    const double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]), inter = h * w;
    const double uni = aa + ab - inter;
    if (aa <= 0 || ab <= 0 || uni <= 0) return false;
    return inter / uni > iou_t;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nc; ++c) {
      const float* sc = scores.data() + (b * nc + c) * ns;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < ns; ++i)
        if (sc[i] > score_t) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept) keep = keep && !over(corners(b, i), corners(b, k));
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) out.insert(out.end(), {b, c, i});
    }
  return out;
}

TEST(OpsMisc, NonMaxSuppressionAgainstTheDefinition) {
  // boxes of every size over a wide range (a detector's per-class offsets), some huge, some
  // with no area, some with NaN or infinite corners; scores with ties
  const int64_t nb = 2, nc = 3, ns = 600;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> boxes(static_cast<size_t>(nb * ns * 4)), scores(static_cast<size_t>(nb * nc * ns));
  for (int64_t i = 0; i < nb * ns; ++i) {
    float* p = boxes.data() + i * 4;
    const float band = static_cast<float>(i % 4) * 1000.f;  // four bands far apart
    const float y = u(rng) * 300, x = band + u(rng) * 300, h = u(rng) * 60, w = u(rng) * 60;
    p[0] = y, p[1] = x, p[2] = y + h, p[3] = x + w;
    if (i % 97 == 0) p[3] = x + 900;                                         // very wide
    if (i % 89 == 0) p[2] = p[0];                                            // no area
    if (i % 83 == 0) p[1] = std::numeric_limits<float>::quiet_NaN();         // NaN corner
    if (i % 79 == 0) p[3] = std::numeric_limits<float>::infinity();          // infinite
    if (i % 5 == 0) std::swap(p[0], p[2]);                                   // corners either way
  }
  for (auto& s : scores) s = std::round(u(rng) * 200) / 200;  // ties
  for (bool center : {false, true})
    for (double iou : {0.0, 0.3, 0.7})
      for (int64_t max_out : {int64_t(5), int64_t(1000)}) {
        SCOPED_TRACE(testing::Message() << "center " << center << " iou " << iou << " max " << max_out);
        auto y = run_op("NonMaxSuppression",
                        {f32(boxes, {nb, ns, 4}), f32(scores, {nb, nc, ns}), i64({max_out}, {1}),
                         f32({static_cast<float>(iou)}, {1}), f32({0.2f}, {1})},
                        {{"center_point_box", int64_t(center)}});
        const std::vector<int64_t> want =
            nms_by_definition(boxes, scores, nb, nc, ns, max_out, static_cast<float>(iou), 0.2f, center);
        EXPECT_EQ(vals<int64_t>(y[0]), want);
      }
}

TEST(OpsMisc, RoiAlign) {
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = static_cast<float>(i);
  Tensor X = f32(xs, {1, 1, 4, 4});
  Tensor rois = f32({0, 0, 3, 3}, {1, 4});
  Tensor bi = i64({0}, {1});
  auto y = run_op("RoiAlign", {X, rois, bi},
                  {{"coordinate_transformation_mode", "output_half_pixel"}, {"sampling_ratio", 1}});
  EXPECT_EQ(y[0].shape(), (Shape{1, 1, 1, 1}));
  expect_near(y[0], {7.5});  // bilinear sample at (1.5, 1.5)
  // 2x2 output, half_pixel: roi [0.5, 2.5] x [0.5, 2.5] minus 0.5 -> [0, 2]; bins of 1, samples at 0.5, 1.5
  auto y2 = run_op("RoiAlign", {X, f32({0.5f, 0.5f, 2.5f, 2.5f}, {1, 4}), bi},
                   {{"output_height", 2}, {"output_width", 2}, {"sampling_ratio", 1}});
  expect_near(y2[0], {2.5, 3.5, 6.5, 7.5});
  EXPECT_THROW(run_op("RoiAlign", {X, rois, i64({3}, {1})}), Error);  // batch index out of range
  EXPECT_THROW(run_op("RoiAlign", {X, rois, bi}, {{"mode", "median"}}), Error);
}

// RoiAlign by the definition, one output element at a time: the mean (or max) over the bin's
// sampling grid of the bilinear interpolation (max: of its four weighted corners).
double roi_align_at(const std::vector<float>& x, int64_t H, int64_t W, const float* plane_roi, double scale,
                    bool half_pixel, int64_t ph_n, int64_t pw_n, int64_t sampling, bool is_max, int64_t ph,
                    int64_t pw, int64_t plane) {
  const double off = half_pixel ? 0.5 : 0.0;
  const double sw = plane_roi[0] * scale - off, sh = plane_roi[1] * scale - off;
  double rw = plane_roi[2] * scale - off - sw, rh = plane_roi[3] * scale - off - sh;
  if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
  const double bh = rh / ph_n, bw = rw / pw_n;
  const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / ph_n));
  const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / pw_n));
  auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(x[static_cast<size_t>((plane * H + yy) * W + xx)]); };
  double acc = 0;
  bool first = true;
  for (int64_t iy = 0; iy < gh; ++iy)
    for (int64_t ix = 0; ix < gw; ++ix) {
      double yv = sh + ph * bh + (iy + 0.5) * bh / gh, xv = sw + pw * bw + (ix + 0.5) * bw / gw;
      double v[4] = {0, 0, 0, 0};
      if (!(yv < -1.0 || yv > H || xv < -1.0 || xv > W)) {
        yv = std::max(yv, 0.0);
        xv = std::max(xv, 0.0);
        int64_t y0 = static_cast<int64_t>(yv), x0 = static_cast<int64_t>(xv);
        int64_t y1 = y0 + 1, x1 = x0 + 1;
        if (y0 >= H - 1) y0 = y1 = H - 1, yv = static_cast<double>(y0);
        if (x0 >= W - 1) x0 = x1 = W - 1, xv = static_cast<double>(x0);
        const double ly = yv - y0, lx = xv - x0;
        v[0] = (1 - ly) * (1 - lx) * at(y0, x0);
        v[1] = (1 - ly) * lx * at(y0, x1);
        v[2] = ly * (1 - lx) * at(y1, x0);
        v[3] = ly * lx * at(y1, x1);
      }
      if (is_max) {
        const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
        acc = first ? m : std::max(acc, m);
        first = false;
      } else {
        acc += v[0] + v[1] + v[2] + v[3];
      }
    }
  return is_max ? acc : acc / static_cast<double>(std::max<int64_t>(gh * gw, 1));
}

TEST(OpsMisc, RoiAlignAgainstTheDefinition) {
  // two images of 5 channels; rois small, larger than the map (samples outside it), and large
  // enough that adaptive sampling gives a bin many samples (the kernel's groups of taps)
  const int64_t N = 2, C = 5, H = 9, W = 11;
  std::vector<float> xs(static_cast<size_t>(N * C * H * W));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * static_cast<float>(i)) * 3.f;
  const std::vector<float> rv = {1, 1, 4, 5,  -3, -2, 14, 12,  0.5f, 2.5f, 9.5f, 3.5f,  2, 0, 300, 250,  7, 7, 7, 7};
  const std::vector<int64_t> bv = {0, 1, 1, 0, 1};
  const int64_t R = static_cast<int64_t>(bv.size());
  // f32 maps are computed in float, others in double (f64 here)
  const std::vector<double> xd(xs.begin(), xs.end());
  for (bool f64_map : {false, true})
    for (const char* ctm : {"half_pixel", "output_half_pixel"})
      for (const char* mode : {"avg", "max"})
        for (int64_t sampling : {0, 2})
          for (float scale : {1.f, 0.25f}) {
            SCOPED_TRACE(testing::Message() << ctm << " " << mode << " sampling " << sampling << " scale " << scale
                                            << (f64_map ? " f64" : " f32"));
            const int64_t ph_n = 3, pw_n = 4;
            const Tensor X = f64_map ? Tensor::from_vector<double>(xd, {N, C, H, W}) : f32(xs, {N, C, H, W});
            auto y = run_op("RoiAlign", {X, f32(rv, {R, 4}), i64(bv, {R})},
                            {{"coordinate_transformation_mode", ctm}, {"mode", mode}, {"output_height", ph_n},
                             {"output_width", pw_n}, {"sampling_ratio", sampling}, {"spatial_scale", scale}});
            ASSERT_EQ(y[0].shape(), (Shape{R, C, ph_n, pw_n}));
            ASSERT_EQ(y[0].dtype(), X.dtype());
            const std::vector<double> got = y[0].to_f64();
            for (int64_t r = 0; r < R; ++r)
              for (int64_t c = 0; c < C; ++c)
                for (int64_t ph = 0; ph < ph_n; ++ph)
                  for (int64_t pw = 0; pw < pw_n; ++pw) {
                    const double want = roi_align_at(xs, H, W, rv.data() + r * 4, scale, std::string(ctm) == "half_pixel",
                                                     ph_n, pw_n, sampling, std::string(mode) == "max", ph, pw,
                                                     bv[static_cast<size_t>(r)] * C + c);
                    ASSERT_NEAR(got[static_cast<size_t>(((r * C + c) * ph_n + ph) * pw_n + pw)], want,
                                (f64_map ? 1e-12 : 1e-5) * (1 + std::fabs(want)))
                        << "roi " << r << " channel " << c << " bin " << ph << "," << pw;
                  }
          }
}

TEST(OpsMisc, GridSample) {
  Tensor X = f32({0, 1, 2, 3}, {1, 1, 2, 2});
  Tensor grid = f32({-1, -1, 0, 0, 1, 1, 1, -1}, {1, 1, 4, 2});
  auto y = run_op("GridSample", {X, grid}, {{"align_corners", 1}});
  EXPECT_EQ(y[0].shape(), (Shape{1, 1, 1, 4}));
  expect_near(y[0], {0, 1.5, 3, 1});
  // align_corners=0, zeros padding: corner (-1,-1) lies half a pixel outside -> 1/4 of pixel 0
  Tensor g2 = f32({-1, -1, 1, 1}, {1, 1, 2, 2});
  auto y2 = run_op("GridSample", {X, g2}, {});
  expect_near(y2[0], {0.0, 0.75});
  auto y3 = run_op("GridSample", {X, g2}, {{"padding_mode", "border"}});
  expect_near(y3[0], {0.0, 3.0});
  auto y4 = run_op("GridSample", {X, f32({0.1f, 0.6f}, {1, 1, 1, 2})}, {{"mode", "nearest"}});
  expect_near(y4[0], {3.0});
  // bicubic on a linear ramp with border padding reproduces the ramp
  auto y5 = run_op("GridSample", {X, f32({0, 0}, {1, 1, 1, 2})}, {{"mode", "bicubic"}, {"padding_mode", "border"}});
  expect_near(y5[0], {1.5});
  EXPECT_THROW(run_op("GridSample", {X, grid}, {{"mode", "area"}}), Error);
  EXPECT_THROW(run_op("GridSample", {X, f32({0, 0, 0}, {1, 1, 1, 3})}), Error);
}

// ------------------------------------------------------------------ signal

TEST(OpsMisc, Windows) {
  auto h = run_op("HannWindow", {Tensor::scalar<int64_t>(4)});
  EXPECT_EQ(h[0].dtype(), DType::f32);
  expect_near(h[0], {0, 0.5, 1, 0.5});
  auto hs = run_op("HannWindow", {Tensor::scalar<int32_t>(3)}, {{"periodic", 0}, {"output_datatype", 11}});
  EXPECT_EQ(hs[0].dtype(), DType::f64);
  expect_near(hs[0], {0, 1, 0});
  auto hm = run_op("HammingWindow", {Tensor::scalar<int64_t>(2)});
  expect_near(hm[0], {4.0 / 46, 1.0});
  auto bm = run_op("BlackmanWindow", {Tensor::scalar<int64_t>(2)});
  expect_near(bm[0], {0.0, 1.0});
  EXPECT_THROW(run_op("HannWindow", {Tensor::scalar<int64_t>(-1)}), Error);
  EXPECT_THROW(run_op("HannWindow", {Tensor::scalar<int64_t>(4)}, {{"output_datatype", 99}}), Error);
}

TEST(OpsMisc, Dft) {
  Tensor x = f32({1, 2, 3, 4}, {1, 4, 1});
  auto y = run_op("DFT", {x});
  EXPECT_EQ(y[0].shape(), (Shape{1, 4, 2}));
  expect_near(y[0], {10, 0, -2, 2, -2, 0, -2, -2});
  auto yo = run_op("DFT", {x}, {{"onesided", 1}});
  EXPECT_EQ(yo[0].shape(), (Shape{1, 3, 2}));
  expect_near(yo[0], {10, 0, -2, 2, -2, 0});
  auto yi = run_op("DFT", {y[0]}, {{"inverse", 1}});
  expect_near(yi[0], {1, 0, 2, 0, 3, 0, 4, 0});
  // dft_length pads with zeros: [1,2,0,0] -> [3, 1-2i, -1, 1+2i]
  auto yl = run_op("DFT", {f32({1, 2}, {1, 2, 1}), i64({4}, {})});
  expect_near(yl[0], {3, 0, 1, -2, -1, 0, 1, 2});
  EXPECT_THROW(run_op("DFT", {x}, {{"axis", 2}}), Error);
  EXPECT_THROW(run_op("DFT", {f32({1, 2, 3}, {1, 1, 3})}), Error);
}

TEST(OpsMisc, Stft) {
  Tensor sig = f32({1, 2, 3, 4, 5, 6}, {1, 6, 1});
  auto y = run_op("STFT", {sig, i64({2}, {}), Tensor(), i64({4}, {})}, {}, 1, {false, false, true, false});
  EXPECT_EQ(y[0].shape(), (Shape{1, 2, 3, 2}));
  expect_near(y[0], {10, 0, -2, 2, -2, 0, 18, 0, -2, 2, -2, 0});
  auto yw = run_op("STFT", {sig, i64({2}, {}), f32({1, 0, 1, 0}, {4})});
  expect_near(yw[0], {4, 0, -2, 0, 4, 0, 8, 0, -2, 0, 8, 0});
  EXPECT_THROW(run_op("STFT", {sig, i64({0}, {}), f32({1, 0, 1, 0}, {4})}), Error);
}

TEST(OpsMisc, MelWeightMatrix) {
  auto y = run_op("MelWeightMatrix", {Tensor::scalar<int32_t>(8), Tensor::scalar<int32_t>(16),
                                      Tensor::scalar<int32_t>(8192), Tensor::scalar<float>(0),
                                      Tensor::scalar<float>(4096)});
  EXPECT_EQ(y[0].shape(), (Shape{9, 8}));
  auto v = vals<float>(y[0]);
  // ONNX reference: first rows are [1,1,0,...], [0,0,1,1,0,...]
  EXPECT_FLOAT_EQ(v[0], 1);
  EXPECT_FLOAT_EQ(v[1], 1);
  EXPECT_FLOAT_EQ(v[2], 0);
  EXPECT_FLOAT_EQ(v[8 + 2], 1);
  EXPECT_FLOAT_EQ(v[8 + 3], 1);
  EXPECT_FLOAT_EQ(v[8 * 5 + 7], 1);
  EXPECT_FLOAT_EQ(v[8 * 8 + 7], 0);
}

// ------------------------------------------------------------------ random

TEST(OpsMisc, RandomGenerators) {
  auto u = run_op("RandomUniform", {}, {{"shape", std::vector<int64_t>{3, 4}}, {"low", 2.0f}, {"high", 3.0f},
                                        {"seed", 5.0f}});
  EXPECT_EQ(u[0].shape(), (Shape{3, 4}));
  for (float v : vals<float>(u[0])) {
    EXPECT_GE(v, 2.0f);
    EXPECT_LE(v, 3.0f);
  }
  auto u2 = run_op("RandomUniform", {}, {{"shape", std::vector<int64_t>{3, 4}}, {"low", 2.0f}, {"high", 3.0f},
                                         {"seed", 5.0f}});
  EXPECT_EQ(vals<float>(u[0]), vals<float>(u2[0]));  // same seed, same values
  auto n = run_op("RandomNormalLike", {f32({0, 0, 0, 0}, {2, 2})}, {{"dtype", 11}});
  EXPECT_EQ(n[0].dtype(), DType::f64);
  EXPECT_EQ(n[0].shape(), (Shape{2, 2}));
  auto b = run_op("Bernoulli", {f32({0, 1, 0, 1}, {4})}, {{"dtype", 7}});
  EXPECT_EQ(b[0].dtype(), DType::i64);
  EXPECT_EQ(vals<int64_t>(b[0]), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_THROW(run_op("Bernoulli", {f32({2}, {1})}), Error);
  EXPECT_THROW(run_op("RandomNormal", {}, {{"shape", std::vector<int64_t>{2}}, {"dtype", 6}}), Error);
}

TEST(OpsMisc, MultinomialSamplesTheSoftmaxOfEachRow) {
  // row 0: log-probabilities of 0.1 / 0.2 / 0.7; row 1: class 2 only (the others -inf)
  const float ninf = -std::numeric_limits<float>::infinity();
  const Tensor x = f32({std::log(0.1f), std::log(0.2f), std::log(0.7f), ninf, ninf, 3.0f}, {2, 3});
  const int64_t n = 20000;
  auto y = run_op("Multinomial", {x}, {{"sample_size", n}, {"seed", 5.0f}});
  ASSERT_EQ(y[0].dtype(), DType::i32);  // the default
  ASSERT_EQ(y[0].shape(), (Shape{2, n}));
  const int32_t* p = y[0].data<int32_t>();
  int64_t count[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; ++i) ++count[p[i]];
  // binomial standard deviation at n = 20000 is at most 0.0035: 0.015 is > 4 sigma
  EXPECT_NEAR(static_cast<double>(count[0]) / n, 0.1, 0.015);
  EXPECT_NEAR(static_cast<double>(count[1]) / n, 0.2, 0.015);
  EXPECT_NEAR(static_cast<double>(count[2]) / n, 0.7, 0.015);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[n + i], 2);
  // seeded: the same draws again; int64 on request
  auto again = run_op("Multinomial", {x}, {{"sample_size", n}, {"seed", 5.0f}, {"dtype", 7}});
  ASSERT_EQ(again[0].dtype(), DType::i64);
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(again[0].data<int64_t>()[i], p[i]);
  EXPECT_THROW(run_op("Multinomial", {x}, {{"dtype", 1}}), Error);  // float output
  EXPECT_THROW(run_op("Multinomial", {f32({ninf, ninf}, {1, 2})}), Error);  // nothing to draw
}

// ------------------------------------------------------------------ text

TEST(OpsMisc, TfIdfVectorizer) {
  std::map<std::string, ir::Attribute> attrs = {
      {"mode", "TF"},
      {"min_gram_length", 2},
      {"max_gram_length", 2},
      {"max_skip_count", 0},
      {"ngram_counts", std::vector<int64_t>{0, 4}},
      {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}},
      {"pool_int64s", std::vector<int64_t>{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}}};
  Tensor x = Tensor::from_vector<int32_t>({1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}, {12});
  auto y = run_op("TfIdfVectorizer", {x}, attrs);
  EXPECT_EQ(y[0].shape(), (Shape{7}));
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{0, 0, 0, 0, 1, 1, 1}));
  // unigrams + bigrams with skips, batched, TFIDF weights
  attrs["min_gram_length"] = 1;
  attrs["max_skip_count"] = 5;
  attrs["mode"] = "TFIDF";
  attrs["weights"] = std::vector<float>{1, 1, 1, 1, 2, 2, 2};
  auto y2 = run_op("TfIdfVectorizer", {x.reshaped({2, 6})}, attrs);
  EXPECT_EQ(y2[0].shape(), (Shape{2, 7}));
  EXPECT_EQ(vals<float>(y2[0]), (std::vector<float>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 2, 2}));
  attrs["ngram_indexes"] = std::vector<int64_t>{0, 1};
  EXPECT_THROW(run_op("TfIdfVectorizer", {x}, attrs), Error);
}

TEST(OpsMisc, GruDoubleBidirectionalMatchesPerDirection) {
  // A bidirectional f64 GRU equals a forward and a reverse GRU run separately.
  std::vector<double> xv = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6};  // seq 3, batch 1, input 2
  std::vector<double> wv(2 * 6 * 2), rv(2 * 6 * 2), bv(2 * 12);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.05 * static_cast<double>(i % 7) - 0.1;
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = 0.03 * static_cast<double>(i % 5) - 0.05;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = 0.01 * static_cast<double>(i);
  auto t = [](std::vector<double> v, Shape s) { return Tensor::from_vector<double>(v, std::move(s)); };
  auto half = [](const std::vector<double>& v, int d) {
    return std::vector<double>(v.begin() + d * v.size() / 2, v.begin() + (d + 1) * v.size() / 2);
  };
  auto yb = run_op("GRU", {t(xv, {3, 1, 2}), t(wv, {2, 6, 2}), t(rv, {2, 6, 2}), t(bv, {2, 12})},
                   {{"direction", "bidirectional"}, {"hidden_size", 2}}, 2);
  EXPECT_EQ(yb[0].dtype(), DType::f64);
  auto yf = run_op("GRU", {t(xv, {3, 1, 2}), t(half(wv, 0), {1, 6, 2}), t(half(rv, 0), {1, 6, 2}), t(half(bv, 0), {1, 12})},
                   {{"hidden_size", 2}}, 2);
  auto yr = run_op("GRU", {t(xv, {3, 1, 2}), t(half(wv, 1), {1, 6, 2}), t(half(rv, 1), {1, 6, 2}), t(half(bv, 1), {1, 12})},
                   {{"hidden_size", 2}, {"direction", "reverse"}}, 2);
  auto b = vals<double>(yb[0]), f = vals<double>(yf[0]), r = vals<double>(yr[0]);
  for (int s = 0; s < 3; ++s)
    for (int h = 0; h < 2; ++h) {
      EXPECT_DOUBLE_EQ(b[(s * 2 + 0) * 2 + h], f[s * 2 + h]);
      EXPECT_DOUBLE_EQ(b[(s * 2 + 1) * 2 + h], r[s * 2 + h]);
    }
  auto bh = vals<double>(yb[1]);
  EXPECT_DOUBLE_EQ(bh[0], f[4]);
  EXPECT_DOUBLE_EQ(bh[2], r[0]);
}

}  // namespace test_ops_misc
