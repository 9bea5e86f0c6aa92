// Unit tests of the nn family: Conv, ConvTranspose, ConvInteger, QLinearConv, pools,
// BatchNormalization, InstanceNormalization, LRN, MeanVarianceNormalization, Dropout,
// Identity, MaxUnpool.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "op_test_util.hpp"

namespace test_ops_nn {

using namespace kiln;
using namespace kiln::test;

namespace {

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-4) {
  auto got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// Independent, naive N-d convolution: explicit pads (begin..., end...).
struct ConvCfg {
  Shape x, w;  // x: N, C, spatial; w: M, C/g, k
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;
};

Shape naive_out_shape(const ConvCfg& c) {
  size_t nsp = c.x.size() - 2;
  Shape out = {c.x[0], c.w[0]};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t ek = (c.w[2 + i] - 1) * c.dilations[i] + 1;
    out.push_back((c.x[2 + i] + c.pads[i] + c.pads[nsp + i] - ek) / c.strides[i] + 1);
  }
  return out;
}

// Iterates a multi-index over `dims`.
bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

std::vector<double> naive_conv(const ConvCfg& c, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b) {
  const size_t nsp = c.x.size() - 2;
  Shape out = naive_out_shape(c);
  const int64_t N = c.x[0], C = c.x[1], M = c.w[0], Cg = C / c.group, Mg = M / c.group;
  std::vector<int64_t> osp(out.begin() + 2, out.end()), ksp(c.w.begin() + 2, c.w.end()),
      isp(c.x.begin() + 2, c.x.end());
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      std::vector<int64_t> o(nsp, 0);
      do {
        double acc = b.empty() ? 0.0 : b[m];
        int64_t gr = m / Mg;
        for (int64_t ci = 0; ci < Cg; ++ci) {
          std::vector<int64_t> k(nsp, 0);
          do {
            int64_t xoff = n * C + gr * Cg + ci, woff = m * Cg + ci;
            bool inside = true;
            for (size_t i = 0; i < nsp; ++i) {
              int64_t pos = o[i] * c.strides[i] + k[i] * c.dilations[i] - c.pads[i];
              if (pos < 0 || pos >= isp[i]) inside = false;
              xoff = xoff * isp[i] + pos;
              woff = woff * ksp[i] + k[i];
            }
            if (inside) acc += static_cast<double>(x[xoff]) * w[woff];
          } while (next_index(k, ksp));
        }
        y.push_back(acc);
      } while (next_index(o, osp));
    }
  return y;
}

ir::Node* conv_node(OneNode& t, const ConvCfg& c, const std::string& op = "Conv") {
  ir::Node* n = t.make(op);
  n->attrs["group"] = c.group;
  n->attrs["strides"] = c.strides;
  n->attrs["dilations"] = c.dilations;
  n->attrs["pads"] = c.pads;
  return n;
}

}  // namespace

// ----------------------------------------------------------------------------- Conv

TEST(OpsNn, ConvBasicWithPadding) {
  // ONNX test_basic_conv_with_padding: 5x5 iota input, 3x3 ones kernel, pads 1.
  OneNode t;
  t.input(f32(iota(25), {1, 1, 5, 5})).constant(f32(std::vector<float>(9, 1.f), {1, 1, 3, 3}));
  ir::Node* n = t.make("Conv");
  n->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  n->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 1, 5, 5}));
  expect_near(out[0], {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                       93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
}

TEST(OpsNn, ConvMatchesNaiveAcrossConfigs) {
  std::vector<ConvCfg> cfgs = {
      {{2, 3, 7}, {4, 3, 3}, 1, {2}, {1}, {1, 2}},                                // 1-D, strided
      {{1, 4, 9}, {6, 2, 2}, 2, {1}, {3}, {0, 1}},                                // 1-D, groups + dilation
      {{1, 3, 8, 7}, {5, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},              // 2-D, same size
      {{2, 4, 9, 8}, {8, 1, 3, 2}, 4, {2, 3}, {2, 1}, {2, 0, 1, 1}},              // 2-D groups/strides/dilations
      {{1, 6, 6, 6}, {6, 1, 3, 3}, 6, {1, 1}, {1, 1}, {1, 1, 1, 1}},              // depthwise
      {{1, 8, 5, 5}, {7, 8, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},              // 1x1 (merged rows)
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}},  // 3-D
  };
  unsigned seed = 1;
  for (const ConvCfg& c : cfgs) {
    std::vector<float> x = random_vec(static_cast<size_t>(shape_size(c.x)), seed++);
    std::vector<float> w = random_vec(static_cast<size_t>(shape_size(c.w)), seed++);
    std::vector<float> b = random_vec(static_cast<size_t>(c.w[0]), seed++);
    auto want = naive_conv(c, x, w, b);
    for (DType dt : {DType::f32, DType::f64}) {
      OneNode t;
      Tensor xt = f32(x, c.x), wt = f32(w, c.w), bt = f32(b, {c.w[0]});
      if (dt == DType::f64) {
        xt = Tensor::from_vector<double>(std::vector<double>(x.begin(), x.end()), c.x);
        wt = Tensor::from_vector<double>(std::vector<double>(w.begin(), w.end()), c.w);
        bt = Tensor::from_vector<double>(std::vector<double>(b.begin(), b.end()), {c.w[0]});
      }
      t.input(xt).input(wt).input(bt);
      conv_node(t, c);
      auto out = t.run();
      EXPECT_EQ(out[0].shape(), naive_out_shape(c)) << shape_to_string(c.x);
      EXPECT_EQ(t.node->output(0)->type.shape.to_string(), ir::PartialShape(naive_out_shape(c)).to_string());
      expect_near(out[0], want, dt == DType::f64 ? 1e-9 : 1e-4);
    }
  }
}

TEST(OpsNn, ConvFloat16AndNoBias) {
  ConvCfg c{{1, 2, 4, 4}, {3, 2, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  std::vector<float> x = random_vec(32, 11), w = random_vec(54, 12);
  // round inputs to f16 first so the reference sees the same values
  std::vector<float16> xh(x.begin(), x.end()), wh(w.begin(), w.end());
  for (size_t i = 0; i < x.size(); ++i) x[i] = xh[i];
  for (size_t i = 0; i < w.size(); ++i) w[i] = wh[i];
  OneNode t;
  t.input(Tensor::from_vector<float16>(xh, c.x)).input(Tensor::from_vector<float16>(wh, c.w));
  conv_node(t, c);
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::f16);
  expect_near(out[0], naive_conv(c, x, w, {}), 1e-2);
}

TEST(OpsNn, ConvAutoPadSameAndSymbolicDims) {
  // SAME_LOWER, stride 2: out = ceil(5/2) = 3, total pad 2 -> begin 1, end 1.
  OneNode t;
  t.input(f32(iota(25), {1, 1, 5, 5})).constant(f32(std::vector<float>(9, 1.f), {1, 1, 3, 3}));
  ir::Node* n = t.make("Conv");
  n->attrs["auto_pad"] = "SAME_LOWER";
  n->attrs["strides"] = std::vector<int64_t>{2, 2};
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 1, 3, 3}));
  expect_near(out[0], {12, 27, 24, 63, 108, 81, 72, 117, 84});

  // symbolic spatial dims pass through a size-preserving conv
  OneNode s;
  s.input_typed(f32(random_vec(2 * 3 * 6 * 5, 3), {2, 3, 6, 5}),
                ir::PartialShape({ir::Dim::sym("N"), 3, ir::Dim::sym("H"), ir::Dim::sym("W")}))
      .constant(f32(random_vec(4 * 3 * 9, 4), {4, 3, 3, 3}));
  ir::Node* sn = s.make("Conv");
  sn->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto o2 = s.run();
  EXPECT_EQ(sn->output(0)->type.shape.to_string(), "[N,4,H,W]");
  EXPECT_EQ(o2[0].shape(), (Shape{2, 4, 6, 5}));
}

TEST(OpsNn, ConvErrors) {
  {  // channel mismatch
    OneNode t;
    t.input(f32(iota(50), {1, 2, 5, 5})).input(f32(std::vector<float>(27, 1.f), {1, 3, 3, 3}));
    t.make("Conv");
    EXPECT_THROW(t.run(), Error);
  }
  {  // bad auto_pad value
    OneNode t;
    t.input(f32(iota(25), {1, 1, 5, 5})).input(f32(std::vector<float>(9, 1.f), {1, 1, 3, 3}));
    t.make("Conv")->attrs["auto_pad"] = "SAME";
    EXPECT_THROW(t.run(), Error);
  }
  {  // kernel larger than input
    OneNode t;
    t.input(f32(iota(4), {1, 1, 2, 2})).input(f32(std::vector<float>(9, 1.f), {1, 1, 3, 3}));
    t.make("Conv");
    EXPECT_THROW(t.run(), Error);
  }
  {  // bias of the wrong size
    OneNode t;
    t.input(f32(iota(25), {1, 1, 5, 5})).input(f32(std::vector<float>(9, 1.f), {1, 1, 3, 3}));
    t.input(f32({1, 2}, {2}));
    t.make("Conv");
    EXPECT_THROW(t.run(), Error);
  }
  {  // integer input is not supported by Conv
    OneNode t;
    t.input(i64({1, 2, 3, 4}, {1, 1, 2, 2})).input(i64({1}, {1, 1, 1, 1}));
    t.make("Conv");
    EXPECT_THROW(t.run(), Error);
  }
}

// ----------------------------------------------------------------------------- ConvTranspose

TEST(OpsNn, ConvTransposeMatchesScatterReference) {
  // x [1,2,3,3], w [2,3,3,3] (C, M/g, k), strides 2, pads 1,0,0,1, output_padding 1,0
  Shape xs{1, 2, 3, 3}, ws{2, 3, 3, 3};
  std::vector<float> x = random_vec(18, 21), w = random_vec(54, 22), b = random_vec(3, 23);
  const int64_t s = 2, k = 3, pb[2] = {1, 0}, pe[2] = {0, 1}, op[2] = {1, 0};
  int64_t out[2];
  for (int i = 0; i < 2; ++i) out[i] = s * (3 - 1) + op[i] + k - pb[i] - pe[i];
  std::vector<double> want(static_cast<size_t>(3 * out[0] * out[1]));
  for (int m = 0; m < 3; ++m)
    for (int64_t i = 0; i < out[0] * out[1]; ++i) want[m * out[0] * out[1] + i] = b[m];
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 3; ++m)
      for (int ih = 0; ih < 3; ++ih)
        for (int iw = 0; iw < 3; ++iw)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              int64_t oh = ih * s + kh - pb[0], ow = iw * s + kw - pb[1];
              if (oh < 0 || oh >= out[0] || ow < 0 || ow >= out[1]) continue;
              want[(m * out[0] + oh) * out[1] + ow] +=
                  static_cast<double>(x[(c * 3 + ih) * 3 + iw]) * w[((c * 3 + m) * 3 + kh) * 3 + kw];
            }
  OneNode t;
  t.input(f32(x, xs)).input(f32(w, ws)).input(f32(b, {3}));
  ir::Node* n = t.make("ConvTranspose");
  n->attrs["strides"] = std::vector<int64_t>{2, 2};
  n->attrs["pads"] = std::vector<int64_t>{1, 0, 0, 1};
  n->attrs["output_padding"] = std::vector<int64_t>{1, 0};
  auto res = t.run();
  EXPECT_EQ(res[0].shape(), (Shape{1, 3, out[0], out[1]}));
  EXPECT_EQ(n->output(0)->type.shape.to_string(), cat("[1,3,", out[0], ",", out[1], "]"));
  expect_near(res[0], want);
}

TEST(OpsNn, ConvTransposeOutputShapeAndGroups) {
  // ONNX test_convtranspose_1d: x [1,1,3] = 0,1,2; w [1,2,3] ones -> [0,1,3,3,2] per channel.
  OneNode t;
  t.input(f32({0, 1, 2}, {1, 1, 3})).input(f32(std::vector<float>(6, 1.f), {1, 2, 3}));
  t.make("ConvTranspose");
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 2, 5}));
  expect_near(out[0], {0, 1, 3, 3, 2, 0, 1, 3, 3, 2});

  // output_shape larger than the natural size with stride 2 (pads are derived)
  OneNode u;
  u.input(f32({1, 2, 3}, {1, 1, 3})).input(f32({1, 1}, {1, 1, 2}));
  ir::Node* n = u.make("ConvTranspose");
  n->attrs["strides"] = std::vector<int64_t>{2};
  n->attrs["output_shape"] = std::vector<int64_t>{7};
  auto o2 = u.run();
  EXPECT_EQ(o2[0].shape(), (Shape{1, 1, 7}));
  // natural output [1,1,2,2,3,3] (6), total pad -1 -> clamp: extra output stays 0
  expect_near(o2[0], {1, 1, 2, 2, 3, 3, 0});

  // groups: 2 groups of one channel each, identity kernels
  OneNode v;
  v.input(f32({1, 2, 3, 4}, {1, 2, 2})).input(f32({1, 2}, {2, 1, 1}));
  v.make("ConvTranspose")->attrs["group"] = int64_t{2};
  auto o3 = v.run();
  EXPECT_EQ(o3[0].shape(), (Shape{1, 2, 2}));
  expect_near(o3[0], {1, 2, 6, 8});
}

// ----------------------------------------------------------------------------- integer convs

TEST(OpsNn, ConvIntegerWithZeroPoint) {
  // ONNX test_basic_convinteger: x = 2..10 (3x3), x_zp = 1, w = ones 2x2 -> [12,16,24,28]
  std::vector<uint8_t> x = {2, 3, 4, 5, 6, 7, 8, 9, 10};
  OneNode t;
  t.input(Tensor::from_vector<uint8_t>(x, {1, 1, 3, 3}))
      .input(Tensor::from_vector<uint8_t>({1, 1, 1, 1}, {1, 1, 2, 2}))
      .constant(Tensor::scalar<uint8_t>(1));
  t.make("ConvInteger");
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::i32);
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{12, 16, 24, 28}));
}

TEST(OpsNn, QLinearConvRequantizes) {
  // y = round((x - 10) * (w - 0) * (0.5 * 0.25 / 0.1)) + 5, with int32 bias 2
  OneNode t;
  t.input(Tensor::from_vector<uint8_t>({10, 12, 14, 20}, {1, 1, 2, 2}))
      .constant(Tensor::scalar<float>(0.5f))
      .constant(Tensor::scalar<uint8_t>(10))
      .input(Tensor::from_vector<int8_t>({2, -3}, {2, 1, 1, 1}))
      .constant(Tensor::from_vector<float>({0.25f, 0.25f}, {2}))
      .constant(Tensor::from_vector<int8_t>({0, 0}, {2}))
      .constant(Tensor::scalar<float>(0.1f))
      .constant(Tensor::scalar<uint8_t>(5))
      .constant(Tensor::from_vector<int32_t>({2, 0}, {2}));
  t.make("QLinearConv");
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::u8);
  // channel 0: acc = (x-10)*2 + 2 = 2, 6, 10, 22 -> *1.25 = 2.5, 7.5, 12.5, 27.5 -> half-even 2, 8, 12, 28 -> +5
  // channel 1: acc = (x-10)*-3 = 0, -6, -12, -30 -> *1.25 = 0, -7.5, -15, -37.5 -> 0, -8, -15, -38 -> +5, clamp 0
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{7, 13, 17, 33, 5, 0, 0, 0}));
}

// ----------------------------------------------------------------------------- pools

TEST(OpsNn, MaxPoolWithIndicesAndStorageOrder) {
  // 1x1x3x3 iota with a 2x2 window, stride 1
  for (int64_t order : {0, 1}) {
    OneNode t;
    t.input(f32({1, 9, 3, 4, 5, 6, 7, 8, 2}, {1, 1, 3, 3}));
    ir::Node* n = t.make("MaxPool", 2);
    n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
    n->attrs["storage_order"] = order;
    auto out = t.run();
    expect_near(out[0], {9, 9, 8, 8});
    EXPECT_EQ(out[1].dtype(), DType::i64);
    // positions (0,1), (0,1), (2,1), (2,1)
    if (order == 0)
      EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{1, 1, 7, 7}));
    else
      EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{3, 3, 5, 5}));
  }
}

TEST(OpsNn, MaxPoolCeilDilationsUint8) {
  OneNode t;
  std::vector<uint8_t> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<uint8_t>(i);
  t.input(Tensor::from_vector<uint8_t>(x, {1, 1, 4, 4}));
  ir::Node* n = t.make("MaxPool");
  n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  n->attrs["dilations"] = std::vector<int64_t>{2, 2};
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::u8);
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{10, 11, 14, 15}));

  OneNode c;
  c.input(f32(iota(16), {1, 1, 4, 4}));
  ir::Node* cn = c.make("MaxPool");
  cn->attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  cn->attrs["strides"] = std::vector<int64_t>{2, 2};
  cn->attrs["ceil_mode"] = int64_t{1};
  auto o2 = c.run();
  EXPECT_EQ(o2[0].shape(), (Shape{1, 1, 2, 2}));
  expect_near(o2[0], {10, 11, 14, 15});
}

TEST(OpsNn, AveragePoolCountIncludePad) {
  for (int64_t inc : {0, 1}) {
    OneNode t;
    t.input(f32(iota(9), {1, 1, 3, 3}));
    ir::Node* n = t.make("AveragePool");
    n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
    n->attrs["pads"] = std::vector<int64_t>{1, 1, 0, 0};
    n->attrs["strides"] = std::vector<int64_t>{2, 2};
    n->attrs["count_include_pad"] = inc;
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), (Shape{1, 1, 2, 2}));
    if (inc == 0)
      expect_near(out[0], {0, 1.5, 4.5, 6});
    else
      expect_near(out[0], {0, 0.75, 2.25, 6});
  }
}

TEST(OpsNn, GlobalPoolsAndLpPool) {
  Tensor x = f32({1, -2, 3, 4, 5, 6, -7, 8}, {1, 2, 2, 2});
  {
    OneNode t;
    t.input(x);
    t.make("GlobalAveragePool");
    auto out = t.run();
    EXPECT_EQ(out[0].shape(), (Shape{1, 2, 1, 1}));
    expect_near(out[0], {1.5, 3});
  }
  {
    OneNode t;
    t.input(x);
    t.make("GlobalMaxPool");
    expect_near(t.run()[0], {4, 8});
  }
  {
    OneNode t;
    t.input(x);
    t.make("GlobalLpPool");
    expect_near(t.run()[0], {std::sqrt(30.0), std::sqrt(174.0)});
  }
  {
    OneNode t;
    t.input(f32({3, -4, 1, 1}, {1, 1, 4}));
    ir::Node* n = t.make("LpPool");
    n->attrs["kernel_shape"] = std::vector<int64_t>{2};
    n->attrs["strides"] = std::vector<int64_t>{2};
    n->attrs["p"] = int64_t{1};
    expect_near(t.run()[0], {7, 2});
  }
}

TEST(OpsNn, PoolErrors) {
  {  // kernel_shape missing
    OneNode t;
    t.input(f32(iota(9), {1, 1, 3, 3}));
    t.make("MaxPool");
    EXPECT_THROW(t.run(), Error);
  }
  {  // wrong kernel rank
    OneNode t;
    t.input(f32(iota(9), {1, 1, 3, 3}));
    t.make("AveragePool")->attrs["kernel_shape"] = std::vector<int64_t>{2};
    EXPECT_THROW(t.run(), Error);
  }
  {  // negative stride
    OneNode t;
    t.input(f32(iota(9), {1, 1, 3, 3}));
    ir::Node* n = t.make("MaxPool");
    n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
    n->attrs["strides"] = std::vector<int64_t>{0, 1};
    EXPECT_THROW(t.run(), Error);
  }
}

TEST(OpsNn, MaxUnpool) {
  OneNode t;
  t.input(f32({5, 6, 7, 8}, {1, 1, 2, 2})).input(i64({5, 7, 13, 15}, {1, 1, 2, 2}));
  ir::Node* n = t.make("MaxUnpool");
  n->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  n->attrs["strides"] = std::vector<int64_t>{2, 2};
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 1, 4, 4}));
  expect_near(out[0], {0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8});

  OneNode bad;
  bad.input(f32({5, 6, 7, 8}, {1, 1, 2, 2})).input(i64({5, 7, 13, 16}, {1, 1, 2, 2}));
  ir::Node* bn = bad.make("MaxUnpool");
  bn->attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
  bn->attrs["strides"] = std::vector<int64_t>{2, 2};
  EXPECT_THROW(bad.run(), Error);
}

// ----------------------------------------------------------------------------- normalisations

TEST(OpsNn, BatchNormInference) {
  OneNode t;
  t.input(f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}))
      .constant(f32({1, 2}, {2}))
      .constant(f32({0, 1}, {2}))
      .constant(f32({2, 6}, {2}))
      .constant(f32({4, 1}, {2}));
  t.make("BatchNormalization")->attrs["epsilon"] = 0.f;
  auto out = t.run();
  // c0: (x-2)/2*1+0 ; c1: (x-6)/1*2+1
  expect_near(out[0], {-0.5, 0, -5, -3, 1.5, 2, 3, 5});
}

TEST(OpsNn, BatchNormTrainingMode) {
  OneNode t(15);
  t.input(f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}))
      .constant(f32({1, 1}, {2}))
      .constant(f32({0, 0}, {2}))
      .constant(f32({0, 0}, {2}))
      .constant(f32({1, 1}, {2}));
  ir::Node* n = t.make("BatchNormalization", 3);
  n->attrs["epsilon"] = 0.f;
  n->attrs["momentum"] = 0.5f;
  n->attrs["training_mode"] = int64_t{1};
  auto out = t.run();
  // channel 0 values 1,2,5,6: mean 3.5, var 4.25; channel 1 values 3,4,7,8: mean 5.5, var 4.25
  const double sd = std::sqrt(4.25);
  expect_near(out[0], {-2.5 / sd, -1.5 / sd, -2.5 / sd, -1.5 / sd, 1.5 / sd, 2.5 / sd, 1.5 / sd, 2.5 / sd});
  expect_near(out[1], {1.75, 2.75});
  expect_near(out[2], {2.625, 2.625});
}

TEST(OpsNn, BatchNormErrors) {
  OneNode t;
  t.input(f32({1, 2, 3, 4}, {1, 2, 2}))
      .constant(f32({1, 1, 1}, {3}))
      .constant(f32({0, 0}, {2}))
      .constant(f32({0, 0}, {2}))
      .constant(f32({1, 1}, {2}));
  t.make("BatchNormalization");
  EXPECT_THROW(t.run(), Error);
}

TEST(OpsNn, InstanceNormLrnMvn) {
  {
    OneNode t;
    t.input(f32({1, 3, 2, 4}, {1, 2, 2})).constant(f32({2, 1}, {2})).constant(f32({0, 1}, {2}));
    t.make("InstanceNormalization")->attrs["epsilon"] = 0.f;
    expect_near(t.run()[0], {-2, 2, 0, 2});
  }
  {
    // size 3: channel c sums squares of c-1..c+1
    OneNode t;
    t.input(f32({1, 2, 3}, {1, 3, 1}));
    ir::Node* n = t.make("LRN");
    n->attrs["size"] = int64_t{3};
    n->attrs["alpha"] = 3.f;
    n->attrs["beta"] = 1.f;
    n->attrs["bias"] = 1.f;
    // y = x / (1 + sumsq)
    expect_near(t.run()[0], {1.0 / 6, 2.0 / 15, 3.0 / 14});
  }
  {
    OneNode t;
    t.input(f32({1, 3, 5, 5}, {2, 2}));
    t.make("MeanVarianceNormalization")->attrs["axes"] = std::vector<int64_t>{1};
    expect_near(t.run()[0], {-1, 1, 0, 0}, 1e-6);
  }
}

// ----------------------------------------------------------------------------- Dropout / Identity

TEST(OpsNn, DropoutAndIdentity) {
  {
    OneNode t;
    t.input(f32({1, 2, 3}, {3}));
    t.make("Dropout", 2);
    auto out = t.run();
    expect_near(out[0], {1, 2, 3});
    EXPECT_EQ(out[1].dtype(), DType::boolean);
    EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{1, 1, 1}));
  }
  {
    OneNode t;
    t.input(f32({1, 2, 3}, {3})).constant(Tensor::scalar<float>(0.5f)).constant(Tensor::scalar<bool>(true));
    t.make("Dropout");
    EXPECT_THROW(t.run(), Error);
  }
  {
    OneNode t;
    t.input(f32({1, 2, 3}, {3})).constant(Tensor::scalar<float>(0.f)).constant(Tensor::scalar<bool>(true));
    t.make("Dropout");
    expect_near(t.run()[0], {1, 2, 3});
  }
  {
    OneNode t;
    t.input(i64({4, 5}, {2}));
    t.make("Identity");
    auto out = t.run();
    EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{4, 5}));
  }
}

}  // namespace test_ops_nn
