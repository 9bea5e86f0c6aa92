#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "op_test_util.hpp"

namespace test_ops_quant {

using namespace kiln;
using namespace kiln::test;

TEST(OpsQuant, QuantizeLinearPerTensorAndAxis) {
  Tensor x = f32({0, 2, 3, 1000, -254, -1000, 2.5f, -2.5f}, {8});
  auto y = run_op("QuantizeLinear", {x, f32({2}, {}), Tensor::from_vector<uint8_t>({128}, {})});
  EXPECT_EQ(vals<uint8_t>(y[0]), (std::vector<uint8_t>{128, 129, 130, 255, 1, 0, 129, 127}));
  // default: uint8, zero point 0
  auto d = run_op("QuantizeLinear", {f32({-1, 1, 300}, {3}), f32({1}, {})});
  EXPECT_EQ(d[0].dtype(), DType::u8);
  EXPECT_EQ(vals<uint8_t>(d[0]), (std::vector<uint8_t>{0, 1, 255}));
  // per axis (axis 1), int8
  Tensor x2 = f32({1, 2, 3, 4, 5, 6}, {1, 3, 2});
  auto p = run_op("QuantizeLinear", {x2, f32({1, 2, 4}, {3}), Tensor::from_vector<int8_t>({0, 1, -1}, {3})});
  EXPECT_EQ(vals<int8_t>(p[0]), (std::vector<int8_t>{1, 2, 3, 3, 0, 1}));
  EXPECT_THROW(run_op("QuantizeLinear", {x2, f32({1, 2}, {2}), Tensor::from_vector<int8_t>({0, 1}, {2})}), Error);
}

TEST(OpsQuant, DequantizeLinear) {
  auto y = run_op("DequantizeLinear", {Tensor::from_vector<uint8_t>({0, 3, 128, 255}, {4}), f32({2}, {}),
                                       Tensor::from_vector<uint8_t>({128}, {})});
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{-256, -250, 0, 254}));
  auto i = run_op("DequantizeLinear", {Tensor::from_vector<int32_t>({-5, 7}, {2}), f32({0.5f}, {})});
  EXPECT_EQ(vals<float>(i[0]), (std::vector<float>{-2.5f, 3.5f}));
  auto ax = run_op("DequantizeLinear", {Tensor::from_vector<int8_t>({1, 2, 3, 4}, {2, 2}), f32({1, 10}, {2}),
                                        Tensor::from_vector<int8_t>({0, 1}, {2})},
                   {{"axis", 0}});
  EXPECT_EQ(vals<float>(ax[0]), (std::vector<float>{1, 2, 20, 30}));
  EXPECT_THROW(run_op("DequantizeLinear", {f32({1}, {1}), f32({1}, {})}), Error);
  EXPECT_THROW(run_op("DequantizeLinear", {Tensor::from_vector<int8_t>({1, 2}, {2}), f32({1}, {}),
                                           Tensor::from_vector<uint8_t>({0}, {})}),
               Error);
}

TEST(OpsQuant, DynamicQuantizeLinear) {
  // test_dynamicquantizelinear from the ONNX suite.
  auto y = run_op("DynamicQuantizeLinear", {f32({0, 2, -3, -2.5f, 1.34f, 0.5f}, {6})}, {}, 3);
  EXPECT_NEAR(vals<float>(y[1])[0], 0.0196078438f, 1e-9);
  EXPECT_EQ(vals<uint8_t>(y[2])[0], 153);
  EXPECT_EQ(vals<uint8_t>(y[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  auto z = run_op("DynamicQuantizeLinear", {f32({0, 0}, {2})}, {}, 3);
  EXPECT_EQ(vals<uint8_t>(z[0]), (std::vector<uint8_t>{0, 0}));
  EXPECT_THROW(run_op("DynamicQuantizeLinear", {Tensor::from_vector<double>({1.0}, {1})}, {}, 3), Error);
}

}  // namespace test_ops_quant
