#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tools/common/run_util.hpp"

namespace test_cli {

using namespace kiln;
using namespace kiln::tools;

TEST(CliUtil, DataShapeGroups) {
  PortInfo ids, mask;
  ids.name = "ids";
  mask.name = "mask";
  using Groups = std::vector<std::vector<std::string>>;
  // the i-th shapes go together; one shape is kept in every group
  EXPECT_EQ(parse_data_shape("ids[1,8][2,12], mask[1,8][2,12]", {ids, mask}),
            (Groups{{"ids=[1,8]", "mask=[1,8]"}, {"ids=[2,12]", "mask=[2,12]"}}));
  EXPECT_EQ(parse_data_shape("ids[1,8][1,9][1,10],mask[1,4]", {ids, mask}),
            (Groups{{"ids=[1,8]", "mask=[1,4]"}, {"ids=[1,9]", "mask=[1,4]"}, {"ids=[1,10]", "mask=[1,4]"}}));
  EXPECT_EQ(parse_data_shape("[3][4]", {ids}), (Groups{{"ids=[3]"}, {"ids=[4]"}}));  // the only input
  auto error_of = [](const std::string& spec, const std::vector<PortInfo>& ports) {
    try {
      parse_data_shape(spec, ports);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("[3][4]", {ids, mask}).find("name each"), std::string::npos);
  EXPECT_NE(error_of("ids[1][2],mask[1][2][3]", {ids, mask}).find("has 2 shapes, others 3"), std::string::npos);
  EXPECT_NE(error_of("idz[1]", {ids, mask}).find("no input named 'idz'"), std::string::npos);
  EXPECT_NE(error_of("ids[1],ids[2]", {ids, mask}).find("given twice"), std::string::npos);
  EXPECT_NE(error_of("ids[1,2", {ids}).find("missing ']'"), std::string::npos);
  EXPECT_NE(error_of("ids[1,x]", {ids}).find("x"), std::string::npos);
  EXPECT_NE(error_of("ids[1] mask[2]", {ids, mask}).find("expected ','"), std::string::npos);
  EXPECT_NE(error_of("ids[1],", {ids, mask}).find("nothing after"), std::string::npos);
  EXPECT_NE(error_of("", {ids}).find("no shapes"), std::string::npos);
}

TEST(CliUtil, DefaultedDynamicDimsAreNamedWithTheirValuesAndHowToGiveThem) {
  PortInfo ids, mask, img;
  ids.name = "ids";
  ids.dtype = DType::i64;
  ids.shape = {-1, -1};
  ids.dim_names = {"batch", "sequence"};
  mask = ids;
  mask.name = "mask";
  img.name = "img";
  img.dtype = DType::f32;
  img.shape = {1, 3, -1};
  img.dim_names = {"", "", ""};
  PreparedInputs in = prepare_inputs({ids, mask, img}, {}, {"sequence=7"}, true, 0);
  EXPECT_EQ(in.tensors[0].shape(), (Shape{1, 7}));
  EXPECT_EQ(in.defaulted_dims, (std::vector<std::string>{"batch"}));  // once, though two inputs have it
  EXPECT_EQ(in.defaulted_unnamed, (std::vector<std::string>{"img dim 2"}));
  EXPECT_EQ(in.defaulted_dims_hint,
            "no --shape gave the dynamic dims, so 'batch' = 1, the unnamed img dim 2 = 64 (compile_model's probe: a "
            "leading dim 1, an image's height and width 224, any other dim 64); give them: --shape batch=N "
            "--shape img=[d0,d1,...]");
  // a sequence's length: 64, as compile_model probes (one token timed a BERT at nothing like its use)
  EXPECT_EQ(prepare_inputs({ids, mask}, {}, {}, true, 0).tensors[1].shape(), (Shape{1, 64}));
  EXPECT_EQ(prepare_inputs({ids, mask}, {}, {"batch=1"}, true, 0).defaulted_dims_hint,
            "no --shape gave the dynamic dim, so 'sequence' = 64 (compile_model's probe: a leading dim 1, an image's "
            "height and width 224, any other dim 64); give it: --shape sequence=N");
  // an image's height and width: 224, one value a symbol wherever it appears
  PortInfo image, side;
  image.name = "image";
  image.dtype = DType::f32;
  image.shape = {-1, 3, -1, -1};
  image.dim_names = {"batch", "", "height", "width"};
  side.name = "side";
  side.dtype = DType::f32;
  side.shape = {-1, -1};
  side.dim_names = {"batch", "width"};
  PreparedInputs im = prepare_inputs({image, side}, {}, {}, true, 0);
  EXPECT_EQ(im.tensors[0].shape(), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(im.tensors[1].shape(), (Shape{1, 224}));
  EXPECT_EQ(im.defaulted_dims, (std::vector<std::string>{"batch", "height", "width"}));
  EXPECT_EQ(im.defaulted_dims_hint,
            "no --shape gave the dynamic dims, so 'batch' = 1, 'height' = 224, 'width' = 224 (compile_model's probe: "
            "a leading dim 1, an image's height and width 224, any other dim 64); give them: --shape batch=N "
            "--shape height=N --shape width=N");
  EXPECT_EQ(prepare_inputs({image}, {}, {"height=48"}, true, 0).tensors[0].shape(), (Shape{1, 3, 48, 224}));
  // channels dynamic too: 64 x 224 x 224 is past kProbeMaxElements, so every dim but the batch 64,
  // the other inputs' included, as compile_model's probe falls back
  PortInfo any = image;
  any.shape = {-1, -1, -1, -1};
  any.dim_names = {"batch", "channels", "height", "width"};
  PreparedInputs big = prepare_inputs({any, side}, {}, {}, true, 0);
  EXPECT_EQ(big.tensors[0].shape(), (Shape{1, 64, 64, 64}));
  EXPECT_EQ(big.tensors[1].shape(), (Shape{1, 64}));
  EXPECT_EQ(big.defaulted_dims, (std::vector<std::string>{"batch", "channels", "height", "width"}));
  EXPECT_EQ(prepare_inputs({any}, {}, {"channels=3"}, true, 0).tensors[0].shape(), (Shape{1, 3, 224, 224}));
  // every dim given: nothing to say
  EXPECT_EQ(prepare_inputs({ids, mask, img}, {}, {"batch=2", "sequence=3", "img=[1,3,5]"}, true, 0).defaulted_dims_hint,
            "");
  // an error then says what was defaulted; without defaulted dims it stays as it was
  EXPECT_EQ(in.explain(Error("too small")), "too small\n  (" + in.defaulted_dims_hint + ")");
  EXPECT_EQ(prepare_inputs({img}, {}, {"img=[1,3,5]"}, true, 0).explain(Error("too small")), "too small");
}

TEST(CliUtil, LatencyStats) {
  const LatencyStats s = latency_stats({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.total, 10);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(latency_stats({}).total, 0);
}

TEST(CliUtil, ShapeSpecs) {
  EXPECT_EQ(parse_shape_spec("x=[1,128]"), (std::pair<std::string, Shape>{"x", {1, 128}}));
  EXPECT_EQ(parse_shape_spec("x=1, 3 ,224"), (std::pair<std::string, Shape>{"x", {1, 3, 224}}));
  EXPECT_EQ(parse_shape_spec("s=[]"), (std::pair<std::string, Shape>{"s", {}}));
  EXPECT_EQ(parse_shape_spec("batch=4"), (std::pair<std::string, Shape>{"batch", {4}}));
  EXPECT_THROW(parse_shape_spec("[1,2]"), Error);
  EXPECT_THROW(parse_shape_spec("x=[1,-2]"), Error);
  EXPECT_THROW(parse_shape_spec("x=[1,,2]"), Error);
  EXPECT_THROW(parse_shape_spec("x=[1,2"), Error);
  EXPECT_THROW(parse_shape_spec("x=[a]"), Error);
  EXPECT_THROW(parse_shape_spec("x=[99999999999999999999]"), Error);
  EXPECT_EQ(split_assignment("a=b=c"), (std::pair<std::string, std::string>{"a", "b=c"}));
  EXPECT_EQ(split_assignment("file.npy"), (std::pair<std::string, std::string>{"", "file.npy"}));
}

TEST(CliUtil, ConcreteShapeAndRandom) {
  PortInfo p;
  p.name = "input_ids";
  p.dtype = DType::i64;
  p.shape = {-1, -1, 3};
  p.dim_names = {"batch", "", ""};
  EXPECT_EQ(concrete_shape(p, {}), (Shape{1, 64, 3}));
  EXPECT_EQ(concrete_shape(p, {{"batch", 4}}), (Shape{4, 64, 3}));
  PortInfo img = p;  // 4-D: the last two dims an image's height and width
  img.shape = {-1, 3, -1, -1};
  img.dim_names = {"", "", "", "w"};
  EXPECT_EQ(concrete_shape(img, {}), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(concrete_shape(img, {{"w", 96}}), (Shape{1, 3, 224, 96}));
  EXPECT_EQ(concrete_shape(img, {}, /*image_sizes=*/false), (Shape{1, 3, 64, 64}));
  p.rank_known = false;
  EXPECT_THROW(concrete_shape(p, {}), Error);

  std::mt19937 rng(1);
  Tensor ids = random_tensor("input_ids", DType::i64, {2, 50}, rng);
  for (int64_t v : ids.to_i64()) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 100);
  }
  Tensor mask = random_tensor("attention_mask", DType::i64, {2, 5}, rng);
  for (int64_t v : mask.to_i64()) EXPECT_EQ(v, 1);
  Tensor x = random_tensor("x", DType::f16, {1000}, rng);
  double mn = 1, mx = -1;
  for (double v : x.to_f64()) mn = std::min(mn, v), mx = std::max(mx, v);
  EXPECT_GE(mn, -1.0);
  EXPECT_LE(mx, 1.0);
  EXPECT_LT(mn, -0.5);
  EXPECT_GT(mx, 0.5);
  Tensor b = random_tensor("flag", DType::boolean, {100}, rng);
  int64_t trues = 0;
  for (int64_t v : b.to_i64()) trues += v;
  EXPECT_GT(trues, 10);
  EXPECT_LT(trues, 90);
  // Same seed, same data.
  std::mt19937 r1(7), r2(7);
  Tensor a = random_tensor("x", DType::f32, {16}, r1), b2 = random_tensor("x", DType::f32, {16}, r2);
  EXPECT_EQ(std::memcmp(a.raw(), b2.raw(), a.byte_size()), 0);
}

TEST(CliUtil, SummaryAndNames) {
  Tensor t = Tensor::from_vector<float>({1.f, NAN, -3.f, 5.f}, {2, 2});
  TensorStats s = tensor_stats(t);
  EXPECT_EQ(s.nan, 1);
  EXPECT_DOUBLE_EQ(s.min, -3.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.mean, 1.0);
  std::string line = summarize_tensor("y", t);
  EXPECT_EQ(line, "y  [2,2]  f32  min=-3 max=5 mean=1  nan=1");
  EXPECT_EQ(summarize_tensor("e", Tensor(DType::i32, {0, 3})), "e  [0,3]  i32  (empty)");
  EXPECT_EQ(sanitize_file_name("a/b:c d.1-x_y"), "a_b_c_d.1-x_y");
  EXPECT_EQ(sanitize_file_name(".."), "_..");
  EXPECT_EQ(sanitize_file_name(""), "_");
}

}  // namespace test_cli
