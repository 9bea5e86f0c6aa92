// The values besides dense numeric tensors: string tensors, sequences and optionals
// (kiln::Tensor's kinds), as the API and the .npy / .pb readers give them, and the guard that
// keeps a sequence or an optional out of the kernels that take tensors.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

#include <filesystem>

#include "error_util.hpp"
#include "onnx_builder.hpp"
#include "precision_util.hpp"
#include "tools/common/npy.hpp"

namespace kiln::test::test_values {
namespace {

TEST(Values, StringTensorsOwnTheirStrings) {
  Tensor t = Tensor::from_vector<std::string>({"a", "long string that is not small-string optimised", ""}, {3});
  EXPECT_EQ(t.dtype(), DType::string);
  Tensor c = t.clone();
  t.data<std::string>()[0] = "changed";
  EXPECT_EQ(c.data<std::string>()[0], "a");  // a deep copy
  EXPECT_EQ(c.data<std::string>()[1], "long string that is not small-string optimised");
  EXPECT_EQ(Tensor(DType::string, {2, 2}).data<std::string>()[3], "");  // constructed empty
  EXPECT_NE(error_of([&] { (void)t.to_f64(); }), "<no error>");  // not numbers
}

TEST(Values, SequencesAndOptionalsHoldTensors) {
  Tensor a = Tensor::from_vector<float>({1, 2}, {2}), b = Tensor::from_vector<float>({3}, {1});
  Tensor s = Tensor::sequence(DType::f32, {a, b});
  EXPECT_EQ(s.kind(), ValueKind::sequence);
  EXPECT_EQ(s.items().size(), 2u);
  EXPECT_EQ(s.size(), 0);  // no elements of its own
  EXPECT_NE(error_of([&] { (void)s.data<float>(); }).find("sequence"), std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::sequence(DType::i64, {a}); }), "<no error>");  // item of another type
  Tensor none = Tensor::optional(DType::f32, std::nullopt);
  EXPECT_TRUE(none.items().empty());
  Tensor some = Tensor::optional(DType::f32, s, ValueKind::sequence);
  EXPECT_EQ(some.element_kind(), ValueKind::sequence);
  EXPECT_EQ(some.items()[0].items()[1].data<float>()[0], 3.0f);
  EXPECT_NE(error_of([&] { Tensor::optional(DType::f32, some, ValueKind::optional); }), "<no error>");
  EXPECT_NE(error_of([&] { (void)a.items(); }), "<no error>");
}

TEST(Values, UnicodeNpyRoundTrips) {
  Tensor t = Tensor::from_vector<std::string>({"plain", "ünï-cødé ✓", "", "\xF0\x9F\x98\x80"}, {2, 2});
  const std::string bytes = tools::npy_to_bytes(t);
  EXPECT_NE(bytes.find("'descr': '<U10'"), std::string::npos);  // the longest, in code points
  Tensor back = tools::npy_from_bytes(bytes, "test");
  ASSERT_EQ(back.dtype(), DType::string);
  ASSERT_EQ(back.shape(), (Shape{2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.data<std::string>()[i], t.data<std::string>()[i]);
}

TEST(Values, ASequenceNeverReachesATensorKernel) {
  // a crafted model feeding a sequence into Relu: an error naming the node, not a crash
  OnnxBuilder b(18);
  b.input("x", {2});
  b.node("SequenceConstruct", {"x", "x"}, {"s"}, "make_seq");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y");
  const std::string msg = error_of([&] {
    Core core;
    auto req = core.compile_model(core.read_model_from_memory(b.bytes()), f32_properties()).create_infer_request();
    req.set_input_tensor(Tensor::from_vector<float>({1, -1}, {2}));
    req.infer();
  });
  EXPECT_NE(msg.find("'relu'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is a sequence, this op takes tensors"), std::string::npos) << msg;
}

TEST(Values, SequenceModelsRunThroughTheApi) {
  // x -> SplitToSequence -> SequenceAt(1): the value in the middle is a sequence; the model
  // runs on the reference kernels (the fast path has no sequences) and gives the tensor
  OnnxBuilder b(18);
  b.input("x", {3, 2});
  b.initializer("one", Tensor::scalar<int64_t>(1));
  b.node("SplitToSequence", {"x"}, {"s"}, "split");
  b.node("SequenceAt", {"s", "one"}, {"y"}, "at");
  b.output("y");
  Core core;
  auto req = core.compile_model(core.read_model_from_memory(b.bytes()), f32_properties()).create_infer_request();
  req.set_input_tensor(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  req.infer();
  const Tensor y = req.get_output_tensor();
  ASSERT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_EQ(y.data<float>()[0], 3.0f);
  EXPECT_EQ(y.data<float>()[1], 4.0f);
}

TEST(Values, RegexFullMatchIsLinearAndRefusesBadPatterns) {
  // (a|aa)*b on 5000 'a's: exponential for a backtracking matcher (std::regex would run for
  // ages or overflow its stack); RE2 answers at once
  auto model = [](const std::string& pattern) {
    OnnxBuilder b(20);
    b.input("x", {3}, onnx::TensorProto::STRING);
    auto* n = b.node("RegexFullMatch", {"x"}, {"y"}, "match");
    OnnxBuilder::attr_s(n, "pattern", pattern);
    b.output("y", onnx::TensorProto::BOOL);
    return b.bytes();
  };
  Core core;
  auto req = core.compile_model(core.read_model_from_memory(model("(a|aa)*b")), f32_properties()).create_infer_request();
  req.set_input_tensor(Tensor::from_vector<std::string>({std::string(5000, 'a'), std::string(5000, 'a') + "b", "b"}, {3}));
  req.infer();
  const Tensor y = req.get_output_tensor();
  EXPECT_FALSE(y.data<bool>()[0]);
  EXPECT_TRUE(y.data<bool>()[1]);
  EXPECT_TRUE(y.data<bool>()[2]);
  const std::string msg = error_of([&] { core.read_model_from_memory(model("a(b")); });
  EXPECT_NE(msg.find("'match'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a valid RE2 regular expression"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::test::test_values
