#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "op_test_util.hpp"

namespace test_ops_linalg {

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<float> naive_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t M, int64_t K,
                                int64_t N) {
  std::vector<float> c(static_cast<size_t>(M * N), 0.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(a[i * K + k]) * b[k * N + j];
      c[i * N + j] = static_cast<float>(s);
    }
  return c;
}

}  // namespace

TEST(OpsLinalg, MatMul2D) {
  auto y = run_op("MatMul", {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 0, 0, 1, 1, 1}, {3, 2})});
  EXPECT_EQ(y[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{4, 5, 10, 11}));
}

TEST(OpsLinalg, MatMulLargeBlockedMatchesNaive) {
  // Larger than the kernel's blocks in every dimension, with ragged edges.
  const int64_t M = 7, K = 300, N = 530;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> a(M * K), b(K * N);
  for (auto& v : a) v = d(rng);
  for (auto& v : b) v = d(rng);
  auto y = run_op("MatMul", {f32(a, {1, M, K}), f32(b, {K, N})});
  EXPECT_EQ(y[0].shape(), (Shape{1, M, N}));
  auto ref = naive_matmul(a, b, M, K, N);
  auto got = vals<float>(y[0]);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4) << i;
}

TEST(OpsLinalg, MatMulVectorPromotionAndBatchBroadcast) {
  // [3] x [3,2] -> [2]
  auto y = run_op("MatMul", {f32({1, 2, 3}, {3}), f32({1, 0, 0, 1, 1, 1}, {3, 2})});
  EXPECT_EQ(y[0].shape(), (Shape{2}));
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{4, 5}));
  // [2,1,1,2] x [3,2,1] -> [2,3,1,1] ; batch broadcast
  std::vector<float> a{1, 2, 3, 4}, b{1, 1, 2, 0, 0, 3};
  auto z = run_op("MatMul", {f32(a, {2, 1, 1, 2}), f32(b, {3, 2, 1})});
  EXPECT_EQ(z[0].shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(vals<float>(z[0]), (std::vector<float>{3, 2, 6, 7, 6, 12}));
  // [2,3] x [3] -> [2]
  auto w = run_op("MatMul", {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 1, 1}, {3})});
  EXPECT_EQ(w[0].shape(), (Shape{2}));
  EXPECT_EQ(vals<float>(w[0]), (std::vector<float>{6, 15}));
}

TEST(OpsLinalg, MatMulIntAndHalf) {
  auto y = run_op("MatMul", {Tensor::from_vector<int64_t>({1, -2, 3, 4}, {2, 2}),
                             Tensor::from_vector<int64_t>({5, 6, 7, 8}, {2, 2})});
  EXPECT_EQ(vals<int64_t>(y[0]), (std::vector<int64_t>{-9, -10, 43, 50}));
  auto h = run_op("MatMul", {Tensor::from_vector<float16>({1, 2, 3, 4}, {2, 2}),
                             Tensor::from_vector<float16>({1, 1, 1, 1}, {2, 2})});
  EXPECT_EQ(h[0].dtype(), DType::f16);
  EXPECT_EQ(float(vals<float16>(h[0])[3]), 7.0f);
}

TEST(OpsLinalg, MatMulErrors) {
  EXPECT_THROW(run_op("MatMul", {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2, 3, 4}, {2, 2})}), Error);
  EXPECT_THROW(run_op("MatMul", {f32({1, 2}, {1, 2}), Tensor::from_vector<int32_t>({1, 2}, {2, 1})}), Error);
  EXPECT_THROW(run_op("MatMul", {Tensor::from_vector<bool>({true}, {1, 1}), Tensor::from_vector<bool>({true}, {1, 1})}),
               Error);
}

TEST(OpsLinalg, GemmAllAttributes) {
  // A^T (A is [K=2, M=3]), B^T (B is [N=2, K=2]), C is a row vector [N].
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({1, 0, 1, 1}, {2, 2});
  Tensor c = f32({10, 20}, {2});
  auto y = run_op("Gemm", {a, b, c}, {{"transA", 1}, {"transB", 1}, {"alpha", 2.0f}, {"beta", 0.5f}});
  // A^T = [[1,4],[2,5],[3,6]], B^T = [[1,1],[0,1]] -> A^T B^T = [[1,5],[2,7],[3,9]]
  EXPECT_EQ(y[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{7, 20, 9, 24, 11, 28}));
}

TEST(OpsLinalg, GemmNoBiasScalarBiasAndErrors) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2});
  Tensor b = f32({1, 0, 0, 1}, {2, 2});
  auto y = run_op("Gemm", {a, b});
  EXPECT_EQ(vals<float>(y[0]), (std::vector<float>{1, 2, 3, 4}));
  auto z = run_op("Gemm", {a, b, f32({1}, {})});
  EXPECT_EQ(vals<float>(z[0]), (std::vector<float>{2, 3, 4, 5}));
  auto col = run_op("Gemm", {a, b, f32({1, 2}, {2, 1})});
  EXPECT_EQ(vals<float>(col[0]), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_THROW(run_op("Gemm", {a, f32({1, 2, 3}, {3, 1})}), Error);            // K mismatch
  EXPECT_THROW(run_op("Gemm", {a, b, f32({1, 2, 3}, {3})}), Error);            // bad C
  EXPECT_THROW(run_op("Gemm", {f32({1, 2}, {2}), b}), Error);                  // A not 2-D
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"gamma", 1.0f}}), Error);              // unknown attribute
}

TEST(OpsLinalg, GemmInt32) {
  auto y = run_op("Gemm", {Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2}),
                           Tensor::from_vector<int32_t>({1, 1, 1, 1}, {2, 2}),
                           Tensor::from_vector<int32_t>({100, 200}, {2})});
  EXPECT_EQ(vals<int32_t>(y[0]), (std::vector<int32_t>{103, 203, 107, 207}));
}

TEST(OpsLinalg, MatMulIntegerZeroPoints) {
  Tensor a = Tensor::from_vector<uint8_t>({11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}, {4, 3});
  Tensor b = Tensor::from_vector<uint8_t>({1, 4, 2, 5, 3, 6}, {3, 2});
  Tensor azp = Tensor::from_vector<uint8_t>({12}, {});
  Tensor bzp = Tensor::from_vector<uint8_t>({0}, {});
  auto y = run_op("MatMulInteger", {a, b, azp, bzp});
  EXPECT_EQ(y[0].dtype(), DType::i32);
  EXPECT_EQ(vals<int32_t>(y[0]), (std::vector<int32_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
  // per-row A zero point, per-column B zero point (int8)
  Tensor a2 = Tensor::from_vector<int8_t>({1, 2, 3, 4}, {2, 2});
  Tensor b2 = Tensor::from_vector<int8_t>({1, 2, 3, 4}, {2, 2});
  auto z = run_op("MatMulInteger", {a2, b2, Tensor::from_vector<int8_t>({1, 3}, {2}),
                                    Tensor::from_vector<int8_t>({0, 2}, {2})});
  // A-zp = [[0,1],[0,1]], B-zp = [[1,0],[3,2]] -> [[3,2],[3,2]]
  EXPECT_EQ(vals<int32_t>(z[0]), (std::vector<int32_t>{3, 2, 3, 2}));
  EXPECT_THROW(run_op("MatMulInteger", {a, b, Tensor::from_vector<uint8_t>({1, 2, 3}, {3})}), Error);
  EXPECT_THROW(run_op("MatMulInteger", {f32({1}, {1, 1}), f32({1}, {1, 1})}), Error);
}

TEST(OpsLinalg, QLinearMatMul2D) {
  // test_qlinearmatmul_2D from the ONNX suite.
  Tensor a = Tensor::from_vector<uint8_t>({208, 236, 0, 238, 3, 214, 255, 29}, {2, 4});
  Tensor b = Tensor::from_vector<uint8_t>({152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247}, {4, 3});
  auto y = run_op("QLinearMatMul",
                  {a, f32({0.0066f}, {}), Tensor::from_vector<uint8_t>({113}, {}), b, f32({0.00705f}, {}),
                   Tensor::from_vector<uint8_t>({114}, {}), f32({0.0107f}, {}), Tensor::from_vector<uint8_t>({118}, {})});
  EXPECT_EQ(vals<uint8_t>(y[0]), (std::vector<uint8_t>{168, 115, 255, 1, 66, 151}));
}

TEST(OpsLinalg, Det) {
  auto y = run_op("Det", {f32({1, 2, 3, 4, 2, 0, 0, 3}, {2, 2, 2})});
  EXPECT_EQ(y[0].shape(), (Shape{2}));
  auto v = vals<float>(y[0]);
  EXPECT_NEAR(v[0], -2.0f, 1e-6);
  EXPECT_NEAR(v[1], 6.0f, 1e-6);
  auto s = run_op("Det", {f32({0, 1, 0, 1, 0, 0, 0, 0, 2}, {3, 3})});
  EXPECT_EQ(s[0].shape(), (Shape{}));
  EXPECT_NEAR(vals<float>(s[0])[0], -2.0f, 1e-6);
  EXPECT_THROW(run_op("Det", {f32({1, 2, 3, 4, 5, 6}, {2, 3})}), Error);
}

TEST(OpsLinalg, EinsumBasics) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  // transpose
  auto t = run_op("Einsum", {a}, {{"equation", "ij->ji"}});
  EXPECT_EQ(t[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(vals<float>(t[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // implicit output: "ij" -> "ij"; "ji" implicit -> "ij" (transposed)
  auto imp = run_op("Einsum", {a}, {{"equation", "ji"}});
  EXPECT_EQ(imp[0].shape(), (Shape{3, 2}));
  // full sum and row sum
  auto sum = run_op("Einsum", {a}, {{"equation", "ij->"}});
  EXPECT_EQ(vals<float>(sum[0]), (std::vector<float>{21}));
  auto rows = run_op("Einsum", {a}, {{"equation", "ij->i"}});
  EXPECT_EQ(vals<float>(rows[0]), (std::vector<float>{6, 15}));
  // matmul with spaces
  auto mm = run_op("Einsum", {a, f32({1, 0, 0, 1, 1, 1}, {3, 2})}, {{"equation", "ij, jk -> ik"}});
  EXPECT_EQ(vals<float>(mm[0]), (std::vector<float>{4, 5, 10, 11}));
  // inner product, implicit scalar
  auto ip = run_op("Einsum", {f32({1, 2, 3}, {3}), f32({4, 5, 6}, {3})}, {{"equation", "i,i"}});
  EXPECT_EQ(ip[0].shape(), (Shape{}));
  EXPECT_EQ(vals<float>(ip[0]), (std::vector<float>{32}));
}

TEST(OpsLinalg, EinsumDiagonalEllipsisAndErrors) {
  Tensor m = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  auto diag = run_op("Einsum", {m}, {{"equation", "ii->i"}});
  EXPECT_EQ(vals<float>(diag[0]), (std::vector<float>{1, 5, 9}));
  auto trace = run_op("Einsum", {m}, {{"equation", "ii"}});
  EXPECT_EQ(vals<float>(trace[0]), (std::vector<float>{15}));
  // batch diagonal with ellipsis: [2,2,2] -> [2,2]
  Tensor b = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto bd = run_op("Einsum", {b}, {{"equation", "...ii->...i"}});
  EXPECT_EQ(bd[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<float>(bd[0]), (std::vector<float>{1, 4, 5, 8}));
  // broadcasting ellipsis batch matmul: [2,1,2] x [2,1] with "...ij,jk->...ik"
  auto bm = run_op("Einsum", {f32({1, 2, 3, 4}, {2, 1, 2}), f32({1, 1}, {2, 1})}, {{"equation", "...ij,jk->...ik"}});
  EXPECT_EQ(bm[0].shape(), (Shape{2, 1, 1}));
  EXPECT_EQ(vals<float>(bm[0]), (std::vector<float>{3, 7}));
  // integer einsum
  auto ii = run_op("Einsum", {Tensor::from_vector<int32_t>({1, -2, 3}, {3}), Tensor::from_vector<int32_t>({2, 2}, {2})},
                   {{"equation", "i,j->ij"}});
  EXPECT_EQ(vals<int32_t>(ii[0]), (std::vector<int32_t>{2, 2, -4, -4, 6, 6}));
  EXPECT_THROW(run_op("Einsum", {m}, {{"equation", "ijk->i"}}), Error);   // rank mismatch
  EXPECT_THROW(run_op("Einsum", {m}, {{"equation", "ij->k"}}), Error);    // unknown output label
  EXPECT_THROW(run_op("Einsum", {m}, {{"equation", "i1->i"}}), Error);    // bad character
  EXPECT_THROW(run_op("Einsum", {m, f32({1, 2}, {2})}, {{"equation", "ij,j->i"}}), Error);  // size mismatch
}

TEST(OpsLinalg, InferSymbolicShapes) {
  ir::Graph g;
  auto* x = g.add_input("x", {DType::f32, ir::PartialShape({ir::Dim::sym("batch"), ir::Dim::sym("seq"), ir::Dim(8)})});
  auto* w = g.add_constant("w", Tensor(DType::f32, {8, 4}));
  auto* mm = g.add_node("MatMul", {x, w}, 1, "mm");
  auto* es = g.add_node("Einsum", {mm->output(0)}, 1, "es");
  es->attrs["equation"] = "bsd->bds";
  auto* gm = g.add_node("Gemm", {g.add_input("a", {DType::f32, ir::PartialShape({ir::Dim::sym("n"), ir::Dim(8)})}), w},
                        1, "gm");
  for (auto* n : {mm, es, gm}) n->set_opset(17);
  ir::infer_shapes(g);
  EXPECT_EQ(mm->output(0)->type.shape.to_string(), "[batch,seq,4]");
  EXPECT_EQ(es->output(0)->type.shape.to_string(), "[batch,4,seq]");
  EXPECT_EQ(gm->output(0)->type.shape.to_string(), "[n,4]");
  EXPECT_EQ(gm->output(0)->type.dtype, DType::f32);
}

TEST(OpsLinalg, MatMulIntegerBatchedPerRowZeroPoint) {
  // A [2,2,2] with zero point of shape [2,2,1] (per row of every batch).
  Tensor a = Tensor::from_vector<uint8_t>({5, 5, 7, 7, 9, 9, 2, 2}, {2, 2, 2});
  Tensor b = Tensor::from_vector<uint8_t>({1, 0, 0, 1}, {2, 2});
  Tensor azp = Tensor::from_vector<uint8_t>({1, 2, 3, 4}, {2, 2, 1});
  auto y = run_op("MatMulInteger", {a, b, azp}, {}, 1, {});
  EXPECT_EQ(y[0].shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vals<int32_t>(y[0]), (std::vector<int32_t>{4, 4, 5, 5, 6, 6, -2, -2}));
}

}  // namespace test_ops_linalg
