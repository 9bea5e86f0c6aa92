// Linear algebra ops: Gemm, MatMul, MatMulInteger, QLinearMatMul, com.microsoft MatMulIntegerToFloat, Det (Einsum lives in
// linalg_einsum.cpp).
//
// All matrix products go through matmul_accumulate(): C[M,N] += A[M,K] * B[K,N] on
// contiguous row-major buffers, written as a blocked i-k-j loop whose inner loop runs
// over contiguous rows of B and C (the compiler vectorises it). Accumulation types:
// float for f32 / f16 / bf16 (the 16-bit types are converted to float first), double
// for f64, and wrapping uint64 arithmetic for integers (cast back to T at the end, so
// overflow wraps modulo 2^bits like C unsigned arithmetic instead of being UB).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "ops/quant_util.hpp"

namespace kiln::ops {

void register_einsum_op(ir::OpRegistry& r);  // linalg_einsum.cpp

namespace {

using ir::Dim;
using ir::PartialShape;

// ---------------------------------------------------------------------------------
// Kernels

// C[M,N] += A[M,K] * B[K,N]; all row-major and contiguous.
template <typename In, typename Acc>
void matmul_accumulate(const In* __restrict A, const In* __restrict B, Acc* __restrict C, int64_t M,
                       int64_t N, int64_t K) {
  // Blocks of B (KB x NB) stay in L2 while every row of A streams over them.
  constexpr int64_t KB = 128, NB = 512;
  for (int64_t j0 = 0; j0 < N; j0 += NB) {
    const int64_t j1 = std::min(N, j0 + NB);
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB);
      for (int64_t i = 0; i < M; ++i) {
        Acc* __restrict c = C + i * N;
        const In* a = A + i * K;
        int64_t k = k0;
        // Four rows of B per pass: C is loaded and stored a quarter as often.
        for (; k + 4 <= k1; k += 4) {
          const Acc a0 = static_cast<Acc>(a[k]), a1 = static_cast<Acc>(a[k + 1]);
          const Acc a2 = static_cast<Acc>(a[k + 2]), a3 = static_cast<Acc>(a[k + 3]);
          const In* __restrict b0 = B + k * N;
          const In* __restrict b1 = b0 + N;
          const In* __restrict b2 = b1 + N;
          const In* __restrict b3 = b2 + N;
          for (int64_t j = j0; j < j1; ++j)
            c[j] += a0 * static_cast<Acc>(b0[j]) + a1 * static_cast<Acc>(b1[j]) + a2 * static_cast<Acc>(b2[j]) +
                    a3 * static_cast<Acc>(b3[j]);
        }
        for (; k < k1; ++k) {
          const Acc av = static_cast<Acc>(a[k]);
          const In* __restrict b = B + k * N;
          for (int64_t j = j0; j < j1; ++j) c[j] += av * static_cast<Acc>(b[j]);
        }
      }
    }
  }
}

// The type the kernel computes in for element type T.
template <typename T>
struct compute_type {
  using type = T;  // float, double
};
template <>
struct compute_type<float16> {
  using type = float;
};
template <>
struct compute_type<bfloat16> {
  using type = float;
};
// Accumulator type for the compute type.
template <typename C>
using acc_type = std::conditional_t<std::is_floating_point_v<C>, C, uint64_t>;

// Copies n values of T into a buffer of the compute type when they differ.
template <typename C, typename T>
const C* as_compute(const T* p, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<C, T>) {
    (void)n;
    (void)buf;
    return p;
  } else {
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<C>(static_cast<float>(p[i]));
    return buf.data();
  }
}

template <typename T>
std::vector<T> transpose2d(const T* p, int64_t rows, int64_t cols) {
  std::vector<T> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = p[r * cols + c];
  return t;
}

// double -> integer without UB: NaN -> 0, out-of-range values saturate.
template <typename T>
T saturate_cast(double v) {
  if (!(v == v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// ---------------------------------------------------------------------------------
// numpy matmul shape logic (shared by MatMul, MatMulInteger, QLinearMatMul)

PartialShape infer_matmul_shape(const PartialShape& a, const PartialShape& b, const ir::Node& n) {
  if (!a.rank_known || !b.rank_known) return PartialShape::unknown_rank();
  if (a.rank() == 0 || b.rank() == 0)
    throw Error(cat(n.describe(), ": matmul operands must have rank >= 1, got ", a.to_string(), " and ",
                    b.to_string()));
  std::vector<Dim> ad = a.dims, bd = b.dims;
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), Dim(1));
  if (b_vec) bd.push_back(Dim(1));
  const Dim& ka = ad.back();
  const Dim& kb = bd[bd.size() - 2];
  if (ka.is_static() && kb.is_static() && ka.value != kb.value)
    throw Error(cat(n.describe(), ": matmul inner dimensions differ: ", a.to_string(), " x ", b.to_string()));
  PartialShape ba(std::vector<Dim>(ad.begin(), ad.end() - 2));
  PartialShape bb(std::vector<Dim>(bd.begin(), bd.end() - 2));
  PartialShape out = ir::broadcast_shapes({ba, bb}, n);
  if (!a_vec) out.dims.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.dims.push_back(bd.back());
  return out;
}

struct MatMulPlan {
  int64_t M = 0, N = 0, K = 0;
  Shape a_batch, b_batch, batch;  // batch dims (after 1-D promotion)
  Shape out;                      // output shape
  // Offsets (in matrices) of A and B for each output batch entry.
  std::vector<int64_t> a_mat, b_mat;
};

MatMulPlan plan_matmul(const Shape& as, const Shape& bs, const RunContext& ctx) {
  if (as.empty() || bs.empty())
    throw ctx.error("matmul operands must have rank >= 1, got ", shape_to_string(as), " and ",
                    shape_to_string(bs));
  Shape a = as, b = bs;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  MatMulPlan p;
  p.M = a[a.size() - 2];
  p.K = a.back();
  p.N = b.back();
  if (b[b.size() - 2] != p.K)
    throw ctx.error("matmul inner dimensions differ: ", shape_to_string(as), " x ", shape_to_string(bs));
  p.a_batch.assign(a.begin(), a.end() - 2);
  p.b_batch.assign(b.begin(), b.end() - 2);
  p.batch = broadcast_shape({p.a_batch, p.b_batch}, ctx.node());
  p.out = p.batch;
  if (!a_vec) p.out.push_back(p.M);
  if (!b_vec) p.out.push_back(p.N);
  const int64_t nb = shape_size(p.batch);
  p.a_mat.resize(static_cast<size_t>(nb));
  p.b_mat.resize(static_cast<size_t>(nb));
  if (nb > 0) {
    for_each_broadcast<2>(p.batch, {p.a_batch, p.b_batch}, [&](int64_t i, const std::array<int64_t, 2>& off) {
      p.a_mat[i] = off[0];
      p.b_mat[i] = off[1];
    });
  }
  return p;
}

// C (out-shaped, zeroed) += A x B for every batch entry. When B is a single matrix
// shared by all batches and A's batches are laid out in output order, the whole batch
// folds into one tall matrix product (the BERT [1,128,768] x [768,3072] case).
template <typename In, typename Acc>
void batched_matmul(const MatMulPlan& p, const In* A, const In* B, Acc* C) {
  const int64_t nb = shape_size(p.batch);
  if (nb == 0 || p.M == 0 || p.N == 0) return;
  if (shape_size(p.b_batch) == 1 && shape_size(p.a_batch) == nb) {
    matmul_accumulate(A, B, C, nb * p.M, p.N, p.K);
    return;
  }
  for (int64_t i = 0; i < nb; ++i)
    matmul_accumulate(A + p.a_mat[i] * p.M * p.K, B + p.b_mat[i] * p.K * p.N, C + i * p.M * p.N, p.M, p.N,
                      p.K);
}

// ---------------------------------------------------------------------------------
// Quantisation helpers (QLinearMatMul)

bool is_int8(DType t) { return t == DType::i8 || t == DType::u8; }

template <typename Fn>
decltype(auto) dispatch_int8(DType t, Fn&& fn, const char* what) {
  switch (t) {
    case DType::i8: return fn(TypeTag<int8_t>{});
    case DType::u8: return fn(TypeTag<uint8_t>{});
    default: throw_unsupported_dtype(t, what);
  }
}

// Expands a per-tensor / per-row (of A) / per-column (of B) quantisation parameter to
// one value per row of every A matrix (rows = true, result size batch(A)*M) or per
// column of every B matrix (rows = false, size batch(B)*N).
// Accepted shapes: one element; 1-D [M] (rows) / [N] (columns); or an N-D shape that
// broadcasts to A's shape with the last dim 1 ([..., M, 1]) / B's with dim -2 one ([..., 1, N]).
std::vector<double> expand_qparam(const Tensor& t, const Shape& mat_shape, bool rows, const RunContext& ctx,
                                  const char* what) {
  std::vector<double> v = t.to_f64();
  Shape ms = mat_shape;  // A or B shape after 1-D promotion
  Shape target = ms;
  if (rows)
    target.back() = 1;
  else
    target[target.size() - 2] = 1;
  const int64_t total = shape_size(target);
  std::vector<double> out(static_cast<size_t>(total));
  if (v.size() == 1) {
    std::fill(out.begin(), out.end(), v[0]);
    return out;
  }
  Shape ts = t.shape();
  if (ts.size() == 1) ts = rows ? Shape{ts[0], 1} : Shape{1, ts[0]};
  bool ok = ts.size() <= target.size();
  for (size_t i = 0; ok && i < ts.size(); ++i) {
    int64_t d = ts[ts.size() - 1 - i], o = target[target.size() - 1 - i];
    ok = d == o || d == 1;
  }
  if (!ok)
    throw ctx.error(what, " has shape ", shape_to_string(t.shape()), " which is neither per-tensor nor per-",
                    rows ? "row" : "column", " for an operand of shape ", shape_to_string(mat_shape));
  for_each_broadcast<1>(target, {ts}, [&](int64_t i, const std::array<int64_t, 1>& off) { out[i] = v[off[0]]; });
  return out;
}

Shape promote_a(Shape s) {
  if (s.size() == 1) s.insert(s.begin(), 1);
  return s;
}
Shape promote_b(Shape s) {
  if (s.size() == 1) s.push_back(1);
  return s;
}

// A - zp(row) as int32 for every element of A (promoted shape [..., M, K]).
template <typename Q>
std::vector<int32_t> center_rows(const Tensor& a, const std::vector<double>& zp, int64_t K) {
  const Q* p = a.data<Q>();
  std::vector<int32_t> out(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) out[i] = static_cast<int32_t>(p[i]) - static_cast<int32_t>(zp[i / K]);
  return out;
}
// B - zp(column) as int32 (promoted shape [..., K, N]).
template <typename Q>
std::vector<int32_t> center_cols(const Tensor& b, const std::vector<double>& zp, int64_t K, int64_t N) {
  const Q* p = b.data<Q>();
  std::vector<int32_t> out(static_cast<size_t>(b.size()));
  for (int64_t i = 0; i < b.size(); ++i) {
    int64_t mat = i / (K * N), col = i % N;
    out[i] = static_cast<int32_t>(p[i]) - static_cast<int32_t>(zp[mat * N + col]);
  }
  return out;
}

// Shared by MatMulInteger and QLinearMatMul: int32 accumulators of (A-azp) x (B-bzp).
std::vector<int32_t> integer_matmul(const RunContext& ctx, const Tensor& a, const Tensor& b,
                                    const std::vector<double>& azp, const std::vector<double>& bzp,
                                    const MatMulPlan& p) {
  std::vector<int32_t> ac = dispatch_int8(
      a.dtype(), [&](auto tag) { return center_rows<typename decltype(tag)::type>(a, azp, p.K); },
      "integer matmul input A");
  std::vector<int32_t> bc = dispatch_int8(
      b.dtype(), [&](auto tag) { return center_cols<typename decltype(tag)::type>(b, bzp, p.K, p.N); },
      "integer matmul input B");
  (void)ctx;
  std::vector<uint32_t> acc(static_cast<size_t>(shape_size(p.out)), 0u);
  // int32 operands with wrapping uint32 accumulation ("accumulation may overflow in 32 bits").
  batched_matmul<int32_t, uint32_t>(p, ac.data(), bc.data(), acc.data());
  std::vector<int32_t> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<int32_t>(acc[i]);
  return out;
}

// MatMulInteger's and MatMulIntegerToFloat's output: A x B of 8-bit A and B, of type `out`.
void infer_integer_matmul(ir::InferContext& ctx, DType out) {
  for (size_t i : {size_t(0), size_t(1)}) {
    DType t = ctx.input_dtype(i);
    if (t != DType::undefined && !is_int8(t)) throw ctx.error("input ", i, " must be int8 or uint8, got ", dtype_name(t));
  }
  ctx.set_output(0, out, infer_matmul_shape(ctx.input_shape(0), ctx.input_shape(1), ctx.node()));
}

// What integer_matmul takes of A (input 0), B (input 1) and their zero points (inputs `ia` and
// `ib`, absent: 0): the plan, the promoted shapes, a zero point per row of A and per column of B.
struct IntegerMatMulOperands {
  MatMulPlan p;
  Shape as, bs;
  std::vector<double> azp, bzp;
};
IntegerMatMulOperands integer_matmul_operands(const RunContext& ctx, size_t ia, size_t ib) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!is_int8(a.dtype()) || !is_int8(b.dtype()))
    throw ctx.error("A and B must be int8 or uint8, got ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  IntegerMatMulOperands o{plan_matmul(a.shape(), b.shape(), ctx), promote_a(a.shape()), promote_b(b.shape()), {}, {}};
  o.azp.assign(static_cast<size_t>(shape_size(o.as) / std::max<int64_t>(o.p.K, 1)), 0.0);
  o.bzp.assign(static_cast<size_t>(shape_size(o.bs) / std::max<int64_t>(o.p.K, 1)), 0.0);
  if (ctx.has_input(ia)) {
    if (ctx.input(ia).dtype() != a.dtype()) throw ctx.error("a_zero_point must have the element type of A");
    o.azp = expand_qparam(ctx.input(ia), o.as, true, ctx, "a_zero_point");
  }
  if (ctx.has_input(ib)) {
    if (ctx.input(ib).dtype() != b.dtype()) throw ctx.error("b_zero_point must have the element type of B");
    o.bzp = expand_qparam(ctx.input(ib), o.bs, false, ctx, "b_zero_point");
  }
  return o;
}

// Row index (into the A-side per-row table) and column index (B-side) of output element i.
struct OutIndexer {
  const MatMulPlan& p;
  int64_t row_of(int64_t i) const {
    int64_t mat = i / (p.M * p.N);
    int64_t r = (i / p.N) % p.M;
    return p.a_mat[mat] * p.M + r;
  }
  int64_t col_of(int64_t i) const {
    int64_t mat = i / (p.M * p.N);
    return p.b_mat[mat] * p.N + i % p.N;
  }
};

// ---------------------------------------------------------------------------------
// Det

template <typename T>
void det_kernel(const Tensor& x, Tensor& y, int64_t n) {
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const int64_t batches = y.size();
  std::vector<double> m(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < batches; ++b) {
    const T* src = px + b * n * n;
    for (int64_t i = 0; i < n * n; ++i) m[i] = static_cast<double>(src[i]);
    // LU decomposition with partial pivoting.
    double det = 1.0;
    for (int64_t c = 0; c < n; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (std::fabs(m[r * n + c]) > std::fabs(m[piv * n + c])) piv = r;
      if (m[piv * n + c] == 0.0) {
        det = 0.0;
        break;
      }
      if (piv != c) {
        for (int64_t k = 0; k < n; ++k) std::swap(m[c * n + k], m[piv * n + k]);
        det = -det;
      }
      const double d = m[c * n + c];
      det *= d;
      for (int64_t r = c + 1; r < n; ++r) {
        const double f = m[r * n + c] / d;
        if (f == 0.0) continue;
        for (int64_t k = c + 1; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
      }
    }
    py[b] = static_cast<T>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(det));
  }
}

// ---------------------------------------------------------------------------------
// Registration

void check_same_dtype(const RunContext& ctx, DType a, DType b, const char* what) {
  if (a != b) throw ctx.error(what, " element types differ: ", dtype_name(a), " vs ", dtype_name(b));
}

void register_matmul(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MatMul";
  s.since_version = 1;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    DType a = ctx.input_dtype(0), b = ctx.input_dtype(1);
    if (a != DType::undefined && b != DType::undefined && a != b)
      throw ctx.error("input element types differ: ", dtype_name(a), " vs ", dtype_name(b));
    ctx.set_output(0, a, infer_matmul_shape(ctx.input_shape(0), ctx.input_shape(1), ctx.node()));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    check_same_dtype(ctx, a.dtype(), b.dtype(), "MatMul input");
    MatMulPlan p = plan_matmul(a.shape(), b.shape(), ctx);
    Tensor& y = ctx.allocate_output(0, a.dtype(), p.out);
    dispatch_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = typename compute_type<T>::type;
      using Acc = acc_type<C>;
      std::vector<C> abuf, bbuf;
      const C* pa = as_compute<C>(a.data<T>(), a.size(), abuf);
      const C* pb = as_compute<C>(b.data<T>(), b.size(), bbuf);
      T* py = y.data<T>();
      if constexpr (std::is_same_v<Acc, T>) {
        batched_matmul<C, Acc>(p, pa, pb, py);
      } else {
        std::vector<Acc> acc(static_cast<size_t>(y.size()), Acc(0));
        batched_matmul<C, Acc>(p, pa, pb, acc.data());
        for (int64_t i = 0; i < y.size(); ++i) py[i] = static_cast<T>(acc[i]);
      }
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

void register_gemm(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Gemm";
  s.since_version = 1;
  s.min_inputs = 2;  // C is optional since opset 11 (accepted as optional throughout)
  s.max_inputs = 3;
  s.attrs = {{"alpha", ir::AttrType::f},
             {"beta", ir::AttrType::f},
             {"transA", ir::AttrType::i},
             {"transB", ir::AttrType::i},
             {"broadcast", ir::AttrType::i}};  // opset < 7; C is always broadcast here
  s.infer = [](ir::InferContext& ctx) {
    const auto& n = ctx.node();
    DType dt = ctx.input_dtype(0);
    if (ctx.input_dtype(1) != DType::undefined && dt != DType::undefined && ctx.input_dtype(1) != dt)
      throw ctx.error("A and B element types differ: ", dtype_name(dt), " vs ", dtype_name(ctx.input_dtype(1)));
    const PartialShape& a = ctx.input_shape(0);
    const PartialShape& b = ctx.input_shape(1);
    Dim M = Dim::unknown(), N = Dim::unknown();
    if (a.rank_known) {
      if (a.rank() != 2) throw ctx.error("A must be 2-D, got ", a.to_string());
      M = a.dims[n.attr_i("transA", 0) ? 1 : 0];
    }
    if (b.rank_known) {
      if (b.rank() != 2) throw ctx.error("B must be 2-D, got ", b.to_string());
      N = b.dims[n.attr_i("transB", 0) ? 0 : 1];
    }
    if (a.rank_known && b.rank_known) {
      const Dim& ka = a.dims[n.attr_i("transA", 0) ? 0 : 1];
      const Dim& kb = b.dims[n.attr_i("transB", 0) ? 1 : 0];
      if (ka.is_static() && kb.is_static() && ka.value != kb.value)
        throw ctx.error("inner dimensions differ: A ", a.to_string(), " B ", b.to_string());
    }
    ctx.set_output(0, dt, PartialShape(std::vector<Dim>{M, N}));
  };
  s.run = [](ir::RunContext& ctx) {
    const auto& n = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    check_same_dtype(ctx, a.dtype(), b.dtype(), "Gemm A/B");
    if (a.rank() != 2 || b.rank() != 2)
      throw ctx.error("A and B must be 2-D, got ", shape_to_string(a.shape()), " and ", shape_to_string(b.shape()));
    const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
    const float alpha = n.attr_f("alpha", 1.0f), beta = n.attr_f("beta", 1.0f);
    const int64_t M = ta ? a.shape()[1] : a.shape()[0];
    const int64_t K = ta ? a.shape()[0] : a.shape()[1];
    const int64_t N = tb ? b.shape()[0] : b.shape()[1];
    const int64_t Kb = tb ? b.shape()[1] : b.shape()[0];
    if (K != Kb)
      throw ctx.error("inner dimensions differ: A ", shape_to_string(a.shape()), (ta ? " (transposed)" : ""),
                      ", B ", shape_to_string(b.shape()), (tb ? " (transposed)" : ""));
    const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    Shape out{M, N};
    if (c) {
      check_same_dtype(ctx, a.dtype(), c->dtype(), "Gemm A/C");
      // Unidirectional broadcast of C to (M, N).
      bool ok = c->rank() <= 2;
      for (size_t i = 0; ok && i < c->rank(); ++i) {
        int64_t d = c->shape()[c->rank() - 1 - i], o = out[1 - i];
        ok = d == o || d == 1;
      }
      if (!ok)
        throw ctx.error("C of shape ", shape_to_string(c->shape()), " cannot be broadcast to ",
                        shape_to_string(out));
    }
    Tensor& y = ctx.allocate_output(0, a.dtype(), out);
    dispatch_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = typename compute_type<T>::type;
      using Acc = acc_type<C>;
      std::vector<C> abuf, bbuf, at, bt;
      const C* pa = as_compute<C>(a.data<T>(), a.size(), abuf);
      const C* pb = as_compute<C>(b.data<T>(), b.size(), bbuf);
      if (ta) {
        at = transpose2d(pa, K, M);
        pa = at.data();
      }
      if (tb) {
        bt = transpose2d(pb, N, K);
        pb = bt.data();
      }
      std::vector<Acc> acc(static_cast<size_t>(M * N), Acc(0));
      matmul_accumulate<C, Acc>(pa, pb, acc.data(), M, N, K);
      // Bias: C broadcast over (M, N).
      std::vector<C> cvals;
      int64_t cs_m = 0, cs_n = 0;  // strides of C in (M, N) (0 where broadcast)
      if (c) {
        const C* pc = as_compute<C>(c->data<T>(), c->size(), cvals);
        if (cvals.empty()) cvals.assign(pc, pc + c->size());
        Shape cshape = c->shape();
        while (cshape.size() < 2) cshape.insert(cshape.begin(), 1);
        cs_m = cshape[0] == 1 ? 0 : cshape[1];
        cs_n = cshape[1] == 1 ? 0 : 1;
      }
      T* py = y.data<T>();
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          const Acc v = acc[i * N + j];
          if constexpr (std::is_floating_point_v<Acc>) {
            Acc r = static_cast<Acc>(alpha) * v;
            if (c) r += static_cast<Acc>(beta) * static_cast<Acc>(cvals[i * cs_m + j * cs_n]);
            py[i * N + j] = static_cast<T>(r);
          } else {
            // Integer Gemm: exact when alpha == beta == 1, else computed in double.
            const T prod = static_cast<T>(v);
            if (alpha == 1.0f && beta == 1.0f) {
              uint64_t r = static_cast<uint64_t>(prod);
              if (c) r += static_cast<uint64_t>(cvals[i * cs_m + j * cs_n]);
              py[i * N + j] = saturate_cast<T>(r);
            } else {
              double r = static_cast<double>(alpha) * static_cast<double>(prod);
              if (c) r += static_cast<double>(beta) * static_cast<double>(cvals[i * cs_m + j * cs_n]);
              py[i * N + j] = saturate_cast<T>(r);
            }
          }
        }
      }
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

void register_matmul_integer(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MatMulInteger";
  s.since_version = 10;
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](ir::InferContext& ctx) { infer_integer_matmul(ctx, DType::i32); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const auto [p, as, bs, azp, bzp] = integer_matmul_operands(ctx, 2, 3);
    if (p.K == 0) {  // avoid dividing by K in the centring helpers
      ctx.allocate_output(0, DType::i32, p.out);
      return;
    }
    std::vector<int32_t> acc = integer_matmul(ctx, a.reshaped(as), b.reshaped(bs), azp, bzp, p);
    Tensor& y = ctx.allocate_output(0, DType::i32, p.out);
    std::copy(acc.begin(), acc.end(), y.data<int32_t>());
  };
  r.add(std::move(s));
}

void register_qlinear_matmul(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "QLinearMatMul";
  s.since_version = 10;
  s.min_inputs = s.max_inputs = 8;
  s.infer = [](ir::InferContext& ctx) {
    for (size_t i : {size_t(0), size_t(3), size_t(7)}) {
      DType t = ctx.input_dtype(i);
      if (t != DType::undefined && !is_int8(t))
        throw ctx.error("input ", i, " must be int8 or uint8, got ", dtype_name(t));
    }
    ctx.set_output(0, ctx.input_dtype(7), infer_matmul_shape(ctx.input_shape(0), ctx.input_shape(3), ctx.node()));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const Tensor& yzp_t = ctx.input(7);
    if (!is_int8(a.dtype()) || !is_int8(b.dtype()) || !is_int8(yzp_t.dtype()))
      throw ctx.error("a, b and y_zero_point must be int8 or uint8, got ", dtype_name(a.dtype()), ", ",
                      dtype_name(b.dtype()), ", ", dtype_name(yzp_t.dtype()));
    if (ctx.input(2).dtype() != a.dtype()) throw ctx.error("a_zero_point must have the element type of a");
    if (ctx.input(5).dtype() != b.dtype()) throw ctx.error("b_zero_point must have the element type of b");
    for (size_t i : {size_t(1), size_t(4), size_t(6)})
      if (!is_floating(ctx.input(i).dtype()))
        throw ctx.error("input ", i, " (scale) must be float, got ", dtype_name(ctx.input(i).dtype()));
    MatMulPlan p = plan_matmul(a.shape(), b.shape(), ctx);
    const Shape as = promote_a(a.shape()), bs = promote_b(b.shape());
    std::vector<double> azp = expand_qparam(ctx.input(2), as, true, ctx, "a_zero_point");
    std::vector<double> asc = expand_qparam(ctx.input(1), as, true, ctx, "a_scale");
    std::vector<double> bzp = expand_qparam(ctx.input(5), bs, false, ctx, "b_zero_point");
    std::vector<double> bsc = expand_qparam(ctx.input(4), bs, false, ctx, "b_scale");
    // y_scale / y_zero_point: per tensor or per output row.
    Shape ys = p.batch;  // the output with both 1-D promotions kept: [batch..., M, N]
    ys.push_back(p.M);
    ys.push_back(p.N);
    std::vector<double> ysc = expand_qparam(ctx.input(6), ys, true, ctx, "y_scale");
    std::vector<double> yzp = expand_qparam(yzp_t, ys, true, ctx, "y_zero_point");
    std::vector<int32_t> acc(static_cast<size_t>(shape_size(p.out)), 0);
    if (p.K > 0) acc = integer_matmul(ctx, a.reshaped(as), b.reshaped(bs), azp, bzp, p);
    Tensor& y = ctx.allocate_output(0, yzp_t.dtype(), p.out);
    OutIndexer ix{p};
    dispatch_int8(yzp_t.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      Q* py = y.data<Q>();
      for (int64_t i = 0; i < y.size(); ++i) {
        const int64_t row = ix.row_of(i), col = ix.col_of(i);
        const int64_t yrow = i / p.N;  // output row, in ysc / yzp layout
        const float scale = static_cast<float>(asc[row]) * static_cast<float>(bsc[col]) /
                            static_cast<float>(ysc[yrow]);
        const float v = static_cast<float>(acc[i]) * scale;
        py[i] = saturate_round<Q>(std::nearbyint(v) + static_cast<float>(yzp[yrow]));
      }
    }, "QLinearMatMul output");
  };
  r.add(std::move(s));
}

// com.microsoft MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?,
// bias?), ONNX Runtime's contrib op (and kiln's QdqToQLinear's): float((A - a_zp)(B - b_zp)) *
// (a_scale * b_scale) + bias, the product exact in int32; a_scale one value, b_scale one or one per
// column (B 2-D), bias one per column.
void register_matmul_integer_to_float(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "MatMulIntegerToFloat";
  s.since_version = 1;
  s.min_inputs = 4;
  s.max_inputs = 7;
  s.infer = [](ir::InferContext& ctx) { infer_integer_matmul(ctx, DType::f32); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const auto [p, as, bs, azp, bzp] = integer_matmul_operands(ctx, 4, 5);
    for (size_t i : {size_t(2), size_t(3)})
      if (ctx.input(i).dtype() != DType::f32) throw ctx.error("input ", i, " (scale) must be float32");
    const std::vector<double> asc = expand_qparam(ctx.input(2), as, true, ctx, "a_scale");
    const std::vector<double> bsc = expand_qparam(ctx.input(3), bs, false, ctx, "b_scale");
    std::vector<float> bias;
    if (ctx.has_input(6)) {
      const Tensor& t = ctx.input(6);
      if (t.dtype() != DType::f32 || t.size() != p.N)
        throw ctx.error("bias must be float32 with one value per column (", p.N, "), got ", dtype_name(t.dtype()), " ",
                        shape_to_string(t.shape()));
      bias.assign(t.data<float>(), t.data<float>() + t.size());
    }
    std::vector<int32_t> acc(static_cast<size_t>(shape_size(p.out)), 0);
    if (p.K > 0) acc = integer_matmul(ctx, a.reshaped(as), b.reshaped(bs), azp, bzp, p);
    Tensor& y = ctx.allocate_output(0, DType::f32, p.out);
    OutIndexer ix{p};
    float* py = y.data<float>();
    for (int64_t i = 0; i < y.size(); ++i) {
      const float scale = static_cast<float>(asc[ix.row_of(i)]) * static_cast<float>(bsc[ix.col_of(i)]);
      py[i] = static_cast<float>(acc[i]) * scale + (bias.empty() ? 0.0f : bias[static_cast<size_t>(i % p.N)]);
    }
  };
  r.add(std::move(s));
}

void register_det(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Det";
  s.since_version = 11;
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& x = ctx.input_shape(0);
    if (!x.rank_known) {
      ctx.set_output(0, ctx.input_dtype(0), PartialShape::unknown_rank());
      return;
    }
    if (x.rank() < 2) throw ctx.error("input must have rank >= 2, got ", x.to_string());
    const Dim& h = x.dims[x.rank() - 2];
    const Dim& w = x.dims[x.rank() - 1];
    if (h.is_static() && w.is_static() && h.value != w.value)
      throw ctx.error("input matrices must be square, got ", x.to_string());
    ctx.set_output(0, ctx.input_dtype(0), PartialShape(std::vector<Dim>(x.dims.begin(), x.dims.end() - 2)));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.shape()[x.rank() - 1] != x.shape()[x.rank() - 2])
      throw ctx.error("input must have shape [*, M, M], got ", shape_to_string(x.shape()));
    const int64_t n = x.shape().back();
    Tensor& y = ctx.allocate_output(0, x.dtype(), Shape(x.shape().begin(), x.shape().end() - 2));
    dispatch_float(x.dtype(), [&](auto tag) { det_kernel<typename decltype(tag)::type>(x, y, n); }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

}  // namespace

void register_linalg_ops(ir::OpRegistry& r) {
  register_matmul(r);
  register_gemm(r);
  register_matmul_integer(r);
  register_qlinear_matmul(r);
  register_matmul_integer_to_float(r);
  register_det(r);
  register_einsum_op(r);
}

}  // namespace kiln::ops
