// Unit tests of the shape / data-movement family (src/ops/shape_*.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "op_test_util.hpp"

namespace test_ops_shape {

using namespace kiln;
using namespace kiln::test;

namespace {

// A one-node graph builder: graph inputs are fed by the tensors given to in().
struct OneOp {
  std::shared_ptr<ir::Graph> g = std::make_shared<ir::Graph>();
  std::vector<Tensor> feeds;
  explicit OneOp(int opset = 17) { g->opset_imports[""] = opset; }
  ir::Value* in(const Tensor& t) {
    feeds.push_back(t);
    return g->add_input("in" + std::to_string(feeds.size()), {t.dtype(), ir::PartialShape(t.shape())});
  }
  ir::Value* in_sym(DType dt, std::vector<ir::Dim> dims) {
    return g->add_input("sym" + std::to_string(g->inputs().size()), {dt, ir::PartialShape(std::move(dims))});
  }
  ir::Value* c(const Tensor& t) { return g->add_constant(g->unique_name("c"), t); }
  ir::Node* node(const std::string& op, const std::vector<ir::Value*>& ins, size_t nout = 1) {
    ir::Node* n = g->add_node(op, ins, nout);
    for (auto* o : n->outputs()) g->add_output(o);
    return n;
  }
  std::vector<Tensor> run() { return run_graph(g, feeds); }
};

Tensor i64v(std::vector<int64_t> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Tensor::from_vector<int64_t>(v, s);
}
std::vector<float> vals(const Tensor& t) {
  std::vector<float> out;
  for (double d : t.to_f64()) out.push_back(static_cast<float>(d));
  return out;
}
Tensor iota_f32(Shape s) {
  Tensor t(DType::f32, s);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST(ShapeOps, ReshapeZeroAndMinusOne) {
  OneOp t;
  auto* n = t.node("Reshape", {t.in(iota_f32({2, 3, 4})), t.c(i64v({0, -1}))});
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(n->output(0)->type.shape.to_string(), "[2,12]");
  EXPECT_EQ(vals(out[0])[13], 13.f);
}

TEST(ShapeOps, ReshapeSymbolicInference) {
  OneOp t;
  auto* x = t.in_sym(DType::f32, {ir::Dim::sym("batch"), 3, 4});
  auto* n = t.node("Reshape", {x, t.c(i64v({0, -1}))});
  ir::infer_shapes(*t.g);
  EXPECT_EQ(n->output(0)->type.shape.dims[0], ir::Dim::sym("batch"));
  auto* n2 = t.node("Reshape", {x, t.c(i64v({-1, 12}))});
  ir::infer_shapes(*t.g);
  EXPECT_EQ(n2->output(0)->type.shape.rank(), 2u);
  EXPECT_EQ(n2->output(0)->type.shape.dims[1], ir::Dim(12));
}

TEST(ShapeOps, ReshapeBadSizeThrows) {
  OneOp t;
  t.node("Reshape", {t.in(iota_f32({2, 3})), t.in(i64v({4, 2}))});
  EXPECT_THROW(t.run(), Error);
}

TEST(ShapeOps, TransposeDefaultAndPerm) {
  OneOp t;
  auto* x = t.in(iota_f32({2, 3, 4}));
  t.node("Transpose", {x});
  auto* n = t.node("Transpose", {x});
  n->attrs["perm"] = std::vector<int64_t>{1, 0, 2};
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{4, 3, 2}));
  // out0[k, j, i] = x[i, j, k] = i*12 + j*4 + k ; element [1,2,1] = 12 + 8 + 1
  EXPECT_EQ(vals(out[0])[1 * 6 + 2 * 2 + 1], 21.f);
  EXPECT_EQ(out[1].shape(), (Shape{3, 2, 4}));
  // out1[j, i, k] = x[i, j, k]; [2,1,3] = 12 + 8 + 3
  EXPECT_EQ(vals(out[1])[2 * 8 + 1 * 4 + 3], 23.f);
}

TEST(ShapeOps, TransposeBadPermThrows) {
  OneOp t;
  auto* n = t.node("Transpose", {t.in(iota_f32({2, 3}))});
  n->attrs["perm"] = std::vector<int64_t>{0, 0};
  EXPECT_THROW(t.run(), Error);
}

TEST(ShapeOps, SqueezeUnsqueeze) {
  OneOp t;
  auto* x = t.in(iota_f32({1, 3, 1}));
  t.node("Squeeze", {x, t.c(i64v({-1}))});
  t.node("Unsqueeze", {x, t.c(i64v({0, 4}))});
  t.node("Squeeze", {x});
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(out[1].shape(), (Shape{1, 1, 3, 1, 1}));
  EXPECT_EQ(out[2].shape(), (Shape{3}));
  EXPECT_EQ(vals(out[2]), (std::vector<float>{0, 1, 2}));
}

TEST(ShapeOps, SqueezeNonUnitThrows) {
  OneOp t;
  t.node("Squeeze", {t.in(iota_f32({2, 3})), t.in(i64v({0}))});
  EXPECT_THROW(t.run(), Error);
}

TEST(ShapeOps, ConcatAndSplit) {
  OneOp t;
  auto* a = t.in(f32({1, 2, 3, 4}, {2, 2}));
  auto* b = t.in(f32({5, 6}, {2, 1}));
  auto* cc = t.node("Concat", {a, b});
  cc->attrs["axis"] = 1;
  auto* sp = t.g->add_node("Split", {cc->output(0), t.c(i64v({1, 2}))}, 2);
  sp->attrs["axis"] = -1;
  t.g->add_output(sp->output(0));
  t.g->add_output(sp->output(1));
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{1, 3}));
  EXPECT_EQ(vals(out[2]), (std::vector<float>{2, 5, 4, 6}));
  EXPECT_EQ(cc->output(0)->type.shape.to_string(), "[2,3]");
}

TEST(ShapeOps, ConcatMismatchThrows) {
  OneOp t;
  auto* cc = t.node("Concat", {t.in(iota_f32({2, 2})), t.in(iota_f32({3, 1}))});
  cc->attrs["axis"] = 1;
  EXPECT_THROW(t.run(), Error);
}

TEST(ShapeOps, SliceNegativeStepAndClamp) {
  OneOp t;
  auto* x = t.in(iota_f32({3, 5}));
  // rows 2..0 reversed, columns 1..end (end clamped) step 2
  t.node("Slice", {x, t.c(i64v({-1, 1})), t.c(i64v({INT64_MIN, 1000})), t.c(i64v({0, 1})), t.c(i64v({-1, 2}))});
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(out[0]), (std::vector<float>{11, 13, 6, 8, 1, 3}));
  EXPECT_EQ(t.g->outputs()[0]->type.shape.to_string(), "[3,2]");
}

TEST(ShapeOps, GatherNegativeIndexAndRange) {
  OneOp t;
  auto* g = t.node("Gather", {t.in(iota_f32({3, 2})), t.in(i64({-1, 0}, {2}))});
  g->attrs["axis"] = 0;
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{4, 5, 0, 1}));

  OneOp bad;
  bad.node("Gather", {bad.in(iota_f32({3, 2})), bad.in(i64({3}, {1}))});
  EXPECT_THROW(bad.run(), Error);
}

// From 256 KiB of output the rows are copied in parallel (an embedding lookup): every row is
// the indexed one, negative indices wrap, and a gather along axis 1 (outer rows > 1) too.
TEST(ShapeOps, GatherOfManyRowsCopiesEachIndexedRow) {
  const int64_t rows = 1000, width = 96;  // 384 bytes a row
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < 900; ++i) idx.push_back((i * 7919) % rows - (i % 3 == 0 ? rows : 0));  // some negative
  OneOp t;
  auto* g = t.node("Gather", {t.in(iota_f32({rows, width})), t.in(i64(idx, {3, 300}))});
  g->attrs["axis"] = 0;
  const std::vector<float> got = vals(t.run()[0]);
  ASSERT_EQ(got.size(), idx.size() * static_cast<size_t>(width));
  for (size_t r = 0; r < idx.size(); ++r) {
    const int64_t src = idx[r] < 0 ? idx[r] + rows : idx[r];
    for (int64_t c = 0; c < width; ++c)
      ASSERT_EQ(got[r * width + static_cast<size_t>(c)], static_cast<float>(src * width + c)) << "row " << r;
  }

  // axis 1 of [4, 1000, 24]: rows of 96 bytes, 4 x 900 of them (337 KiB)
  OneOp t1;
  auto* g1 = t1.node("Gather", {t1.in(iota_f32({4, rows, 24})), t1.in(i64(idx, {900}))});
  g1->attrs["axis"] = 1;
  const std::vector<float> got1 = vals(t1.run()[0]);
  ASSERT_EQ(got1.size(), 4 * idx.size() * 24);
  for (int64_t o = 0; o < 4; ++o)
    for (size_t r = 0; r < idx.size(); ++r) {
      const int64_t src = idx[r] < 0 ? idx[r] + rows : idx[r];
      for (int64_t c = 0; c < 24; ++c)
        ASSERT_EQ(got1[(static_cast<size_t>(o) * idx.size() + r) * 24 + static_cast<size_t>(c)],
                  static_cast<float>((o * rows + src) * 24 + c))
            << o << ", " << r;
    }
}

// The data-movement ops on strings copy the string objects, never their bytes: a byte copy
// made two tensors own one heap buffer (strings past the small-string size), freed twice. Each
// op runs on a string tensor whose element i reads "... #i" and on floats i, whose output says
// where each string must have gone.
TEST(ShapeOps, DataMovementCopiesStringsAsObjects) {
  struct Case {
    std::string op;
    std::function<std::vector<ir::Value*>(OneOp&, ir::Value*)> extra;  // the inputs after x
    std::function<void(ir::Node*)> attrs;
  };
  const Shape xs{3, 2};
  const std::vector<Case> cases = {
      {"Gather", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64({2, 0, 2}, {3}))}; },
       [](ir::Node* n) { n->attrs["axis"] = 0; }},
      {"Transpose", [](OneOp&, ir::Value* x) { return std::vector<ir::Value*>{x}; },
       [](ir::Node* n) { n->attrs["perm"] = std::vector<int64_t>{1, 0}; }},
      {"Concat", [](OneOp&, ir::Value* x) { return std::vector<ir::Value*>{x, x}; },
       [](ir::Node* n) { n->attrs["axis"] = 1; }},
      {"Slice", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64v({1})), t.c(i64v({3})), t.c(i64v({0}))}; },
       [](ir::Node*) {}},
      {"Tile", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64v({2, 2}))}; }, [](ir::Node*) {}},
      {"Expand", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64v({2, 3, 2}))}; },
       [](ir::Node*) {}},
      {"Split", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64v({1, 2}))}; },
       [](ir::Node*) {}},
      {"GatherElements", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64({1, 0, 0, 1}, {2, 2}))}; },
       [](ir::Node* n) { n->attrs["axis"] = 1; }},
      {"GatherND", [](OneOp& t, ir::Value* x) { return std::vector<ir::Value*>{x, t.c(i64({2, 0}, {2, 1}))}; },
       [](ir::Node*) {}},
  };
  const std::string prefix = "a string longer than the inline buffer #";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Tensor strings(DType::string, xs);
    for (int i = 0; i < 6; ++i) strings.data<std::string>()[i] = prefix + std::to_string(i);
    OneOp ts, tf;
    const size_t outs = c.op == "Split" ? 2 : 1;
    c.attrs(ts.node(c.op, c.extra(ts, ts.in(strings)), outs));
    c.attrs(tf.node(c.op, c.extra(tf, tf.in(iota_f32(xs))), outs));
    std::vector<Tensor> ys;
    try {
      ys = ts.run();
    } catch (const Error& e) {
      ADD_FAILURE() << c.op << ": " << e.what();
      continue;
    }
    const auto yf = tf.run();
    for (int i = 0; i < 6; ++i) strings.data<std::string>()[i] = "changed";  // the outputs hold their own copies
    ASSERT_EQ(ys.size(), outs);
    for (size_t o = 0; o < outs; ++o) {
      ASSERT_EQ(ys[o].dtype(), DType::string);
      ASSERT_EQ(ys[o].shape(), yf[o].shape());
      const std::vector<float> where = vals(yf[o]);
      for (size_t i = 0; i < where.size(); ++i)
        ASSERT_EQ(ys[o].data<std::string>()[i], prefix + std::to_string(static_cast<int>(where[i]))) << o << " " << i;
    }
  }
}

// Where picks string objects from both branches; Pad without a constant pads strings with "".
TEST(ShapeOps, WhereAndPadOnStrings) {
  Tensor a(DType::string, {3}), b(DType::string, {3}), cond(DType::boolean, {3});
  for (int i = 0; i < 3; ++i) {
    a.data<std::string>()[i] = "first branch, a string past the inline buffer " + std::to_string(i);
    b.data<std::string>()[i] = "second branch, a string past the inline buffer " + std::to_string(i);
    cond.data<bool>()[i] = i != 1;
  }
  OneOp w;
  w.node("Where", {w.in(cond), w.in(a), w.in(b)});
  auto y = w.run();
  ASSERT_EQ(y[0].dtype(), DType::string);
  EXPECT_EQ(y[0].data<std::string>()[0], a.data<std::string>()[0]);
  EXPECT_EQ(y[0].data<std::string>()[1], b.data<std::string>()[1]);
  EXPECT_EQ(y[0].data<std::string>()[2], a.data<std::string>()[2]);

  OneOp mixed;  // a number among strings is refused, not read as an index
  mixed.node("Concat", {mixed.in(a), mixed.in(i64v({0, 1, 2}))})->attrs["axis"] = 0;
  EXPECT_THROW(mixed.run(), Error);

  OneOp p;
  p.node("Pad", {p.in(a), p.c(i64v({1, 1}))});
  auto z = p.run();
  ASSERT_EQ(z[0].shape(), (Shape{5}));
  EXPECT_EQ(z[0].data<std::string>()[0], "");
  EXPECT_EQ(z[0].data<std::string>()[1], a.data<std::string>()[0]);
  EXPECT_EQ(z[0].data<std::string>()[4], "");
}

TEST(ShapeOps, GatherElementsAndNd) {
  OneOp t;
  auto* x = t.in(f32({1, 2, 3, 4}, {2, 2}));
  auto* ge = t.node("GatherElements", {x, t.in(i64({0, 0, 1, 0}, {2, 2}))});
  ge->attrs["axis"] = 1;
  auto* gn = t.node("GatherND", {x, t.in(i64({1, 0, 0, 1}, {2, 2}))});
  (void)gn;
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{1, 1, 4, 3}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{3, 2}));
}

TEST(ShapeOps, GatherNdBatchDims) {
  OneOp t;
  auto* n = t.node("GatherND", {t.in(iota_f32({2, 2, 2})), t.in(i64({1, 0}, {2, 1}))});
  n->attrs["batch_dims"] = 1;
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(out[0]), (std::vector<float>{2, 3, 4, 5}));
}

TEST(ShapeOps, ScatterElementsAddAndNd) {
  OneOp t;
  auto* x = t.in(f32({1, 2, 3, 4, 5}, {1, 5}));
  auto* se = t.node("ScatterElements", {x, t.in(i64({1, 1}, {1, 2})), t.in(f32({1.1f, 2.1f}, {1, 2}))});
  se->attrs["axis"] = 1;
  se->attrs["reduction"] = std::string("add");
  auto out = t.run();
  auto v = vals(out[0]);
  EXPECT_FLOAT_EQ(v[1], 5.2f);
  EXPECT_FLOAT_EQ(v[0], 1.f);

  OneOp nd;
  nd.node("ScatterND", {nd.in(iota_f32({4})), nd.in(i64({3, 1}, {2, 1})), nd.in(f32({9, 10}, {2}))});
  EXPECT_EQ(vals(nd.run()[0]), (std::vector<float>{0, 10, 2, 9}));

  OneOp bad;
  bad.node("ScatterND", {bad.in(iota_f32({4})), bad.in(i64({4}, {1, 1})), bad.in(f32({9}, {1}))});
  EXPECT_THROW(bad.run(), Error);
}

TEST(ShapeOps, ShapeSizeConstantOfShape) {
  OneOp t;
  auto* x = t.in(iota_f32({2, 3, 4}));
  auto* sh = t.node("Shape", {x});
  sh->attrs["start"] = 1;
  t.node("Size", {x});
  auto* cs = t.node("ConstantOfShape", {t.c(i64v({2, 2}))});
  cs->attrs["value"] = Tensor::from_vector<int32_t>({7}, {1});
  auto out = t.run();
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{24}));
  EXPECT_EQ(out[2].dtype(), DType::i32);
  EXPECT_EQ(out[2].to_i64(), (std::vector<int64_t>{7, 7, 7, 7}));
  EXPECT_EQ(sh->output(0)->type.shape.to_string(), "[2]");
  EXPECT_EQ(cs->output(0)->type.shape.to_string(), "[2,2]");
}

TEST(ShapeOps, ExpandTileRange) {
  OneOp t;
  t.node("Expand", {t.in(f32({1, 2, 3}, {3, 1})), t.c(i64v({2, 1, 2}))});
  t.node("Tile", {t.in(f32({1, 2}, {1, 2})), t.c(i64v({2, 2}))});
  t.node("Range", {t.c(Tensor::scalar<int32_t>(10)), t.c(Tensor::scalar<int32_t>(4)), t.c(Tensor::scalar<int32_t>(-3))});
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals(out[0]), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(out[2].to_i64(), (std::vector<int64_t>{10, 7}));
}

TEST(ShapeOps, PadModes) {
  OneOp t;
  auto* x = t.in(f32({1, 2, 3}, {1, 3}));
  auto* pads = t.c(i64v({0, 2, 0, 1}));
  auto* p1 = t.node("Pad", {x, pads});
  p1->attrs["mode"] = std::string("reflect");
  auto* p2 = t.node("Pad", {x, pads});
  p2->attrs["mode"] = std::string("edge");
  t.node("Pad", {x, pads, t.c(Tensor::scalar<float>(9))});
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(vals(out[2]), (std::vector<float>{9, 9, 1, 2, 3, 9}));
}

TEST(ShapeOps, ResizeLinearAndNearest) {
  OneOp t;
  auto* x = t.in(f32({1, 2, 3, 4}, {1, 1, 2, 2}));
  auto* rl = t.node("Resize", {x, t.c(Tensor(DType::f32, {0})), t.c(f32({1, 1, 2, 2}, {4}))});
  rl->attrs["mode"] = std::string("linear");
  auto* rn = t.node("Resize", {x, nullptr, nullptr, t.c(i64v({1, 1, 1, 4}))});
  rn->attrs["mode"] = std::string("nearest");
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 1, 4, 4}));
  // half_pixel: output row 0 == input row 0 blended 1-D: [1, 1.25, 1.75, 2]
  auto v = vals(out[0]);
  EXPECT_FLOAT_EQ(v[0], 1.f);
  EXPECT_FLOAT_EQ(v[1], 1.25f);
  EXPECT_FLOAT_EQ(v[2], 1.75f);
  EXPECT_FLOAT_EQ(v[5], 1.25f + 0.25f * 2);  // row 1 = 0.75*row0 + 0.25*row1
  EXPECT_EQ(out[1].shape(), (Shape{1, 1, 1, 4}));
  EXPECT_EQ(rl->output(0)->type.shape.to_string(), "[1,1,4,4]");
}

TEST(ShapeOps, DepthToSpaceRoundTrip) {
  OneOp t;
  auto* x = t.in(iota_f32({1, 8, 2, 3}));
  auto* d = t.node("DepthToSpace", {x});
  d->attrs["blocksize"] = 2;
  auto* s = t.g->add_node("SpaceToDepth", {d->output(0)}, 1);
  s->attrs["blocksize"] = 2;
  t.g->add_output(s->output(0));
  auto out = t.run();
  EXPECT_EQ(out[0].shape(), (Shape{1, 2, 4, 6}));
  // DCR: y[0, c, h*2+i, w*2+j] = x[0, (i*2+j)*2 + c, h, w]; y[0,1,1,2] -> i=1,j=0,h=0,w=1 -> x[0,5,0,1]=31
  EXPECT_EQ(vals(out[0])[1 * 24 + 1 * 6 + 2], 31.f);
  EXPECT_EQ(vals(out[1]), vals(t.feeds[0]));
}

TEST(ShapeOps, TriluOneHotNonZero) {
  OneOp t;
  auto* x = t.in(iota_f32({3, 3}));
  auto* lo = t.node("Trilu", {x});
  lo->attrs["upper"] = 0;
  t.node("Trilu", {x, t.c(Tensor::scalar<int64_t>(1))});
  t.node("OneHot", {t.in(i64({1, -1}, {2})), t.c(Tensor::scalar<int64_t>(3)), t.c(f32({0, 5}, {2}))});
  t.node("NonZero", {t.in(f32({0, 1, 2, 0}, {2, 2}))});
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(vals(out[2]), (std::vector<float>{0, 5, 0, 0, 0, 5}));
  EXPECT_EQ(out[3].shape(), (Shape{2, 2}));
  EXPECT_EQ(out[3].to_i64(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(ShapeOps, UniqueUnsortedAndSorted) {
  OneOp t;
  auto* x = t.in(f32({2, 1, 1, 3, 4, 3}, {6}));
  auto* u = t.node("Unique", {x}, 4);
  u->attrs["sorted"] = 0;
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(out[2].to_i64(), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(out[3].to_i64(), (std::vector<int64_t>{1, 2, 2, 1}));

  OneOp s;
  s.node("Unique", {s.in(f32({2, 1, 1, 3, 4, 3}, {6}))}, 4);
  auto o2 = s.run();
  EXPECT_EQ(vals(o2[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(o2[2].to_i64(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
}

TEST(ShapeOps, CompressReverseSequenceEyeLike) {
  OneOp t;
  auto* c = t.node("Compress", {t.in(iota_f32({3, 2})), t.in(Tensor::from_vector<bool>({false, true, true}, {3}))});
  c->attrs["axis"] = 0;
  auto* rs = t.node("ReverseSequence", {t.in(iota_f32({3, 2})), t.in(i64({3, 1}, {2}))});
  rs->attrs["batch_axis"] = 1;
  rs->attrs["time_axis"] = 0;
  auto* e = t.node("EyeLike", {t.in(iota_f32({2, 3}))});
  e->attrs["k"] = 1;
  auto out = t.run();
  EXPECT_EQ(vals(out[0]), (std::vector<float>{2, 3, 4, 5}));
  // [T=3, B=2]: batch 0 reversed over 3 steps, batch 1 over 1 step
  EXPECT_EQ(vals(out[1]), (std::vector<float>{4, 1, 2, 3, 0, 5}));
  EXPECT_EQ(vals(out[2]), (std::vector<float>{0, 1, 0, 0, 0, 1}));
}

TEST(ShapeOps, BoolAndFloat16DataMovement) {
  OneOp t;
  auto* b = t.in(Tensor::from_vector<bool>({true, false, false, true}, {2, 2}));
  t.node("Transpose", {b});
  auto* h = t.in(Tensor::from_vector<float16>({float16(1.5f), float16(-2.f)}, {2}));
  t.node("Tile", {h, t.c(i64v({2}))});
  auto out = t.run();
  EXPECT_EQ(out[0].dtype(), DType::boolean);
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(vals(out[1]), (std::vector<float>{1.5f, -2.f, 1.5f, -2.f}));
}

TEST(ShapeOps, ErrorsNameTheNode) {
  OneOp t;
  auto* r = t.node("Resize", {t.in(iota_f32({1, 1, 2, 2})), nullptr, t.c(f32({1, 1, 2, 2}, {4}))});
  r->attrs["mode"] = std::string("bicubic");
  EXPECT_THROW(t.run(), Error);

  OneOp ge;
  auto* n = ge.node("GatherElements", {ge.in(iota_f32({2, 2})), ge.in(i64({0, 2, 0, 0}, {2, 2}))});
  n->attrs["axis"] = 1;
  expect_error([&] { ge.run(); }, "GatherElements");

  OneOp tile;
  tile.node("Tile", {tile.in(iota_f32({2})), tile.in(i64v({-1}))});
  EXPECT_THROW(tile.run(), Error);
}

TEST(ShapeOps, SliceAndFlattenInferenceKeepSymbols) {
  OneOp t;
  auto* x = t.in_sym(DType::f32, {ir::Dim::sym("N"), 6, 4});
  auto* s = t.node("Slice", {x, t.c(i64v({1})), t.c(i64v({-1})), t.c(i64v({1}))});
  auto* f = t.node("Flatten", {x});
  auto* fl = t.node("Flatten", {x});
  fl->attrs["axis"] = -1;
  ir::infer_shapes(*t.g);
  EXPECT_EQ(s->output(0)->type.shape.to_string(), "[N,4,4]");
  EXPECT_EQ(f->output(0)->type.shape.to_string(), "[N,24]");
  EXPECT_EQ(fl->output(0)->type.shape.dims[1], ir::Dim(4));
}

}  // namespace test_ops_shape
