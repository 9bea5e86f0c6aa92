// ONNX frontend: parsing, opset normalisation, external data confinement, and the
// errors a user gets for bad models and bad inputs.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/onnx_frontend.hpp"
#include "ir/onnx_versions.hpp"
#include "ir/op_registry.hpp"
#include "error_util.hpp"
#include "onnx_builder.hpp"
#include "precision_util.hpp"
#include "temp_dir.hpp"

namespace test_frontend {

namespace fs = std::filesystem;
using kiln::test::error_of;
using kiln::test::OnnxBuilder;
using namespace kiln;

namespace {


void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// y = Relu(x + w), w an initializer.
OnnxBuilder add_relu_model(int opset = 13) {
  OnnxBuilder b(opset);
  b.input("x", {2, 3});
  b.initializer("w", Tensor::from_vector<float>({1, -1, 2, -2, 3, -3}, {2, 3}));
  b.node("Add", {"x", "w"}, {"s"}, "add_0");
  b.node("Relu", {"s"}, {"y"}, "relu_0");
  b.output("y");
  return b;
}

}  // namespace

TEST(Frontend, LoadsAndRunsASmallModel) {
  Core core;
  auto model = core.read_model_from_memory(add_relu_model().bytes());
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].name, "x");
  EXPECT_EQ(model->outputs()[0].shape_string(), "[2,3]");
  auto req = core.compile_model(model, test::f32_properties()).create_infer_request();
  std::vector<float> x = {0, 0, 0, 0, 0, 0};
  req.set_input_tensor(Tensor::wrap(DType::f32, {2, 3}, x.data()));
  req.infer();
  auto y = req.get_output_tensor();
  std::vector<float> want = {1, 0, 2, 0, 3, 0};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[static_cast<size_t>(i)]);
}

TEST(Frontend, ConstantNodesBecomeConstants) {
  OnnxBuilder b;
  b.input("x", {3});
  auto* c = b.node("Constant", {}, {"k"}, "const_0");
  OnnxBuilder::attr_f(c, "value_float", 2.0f);
  b.node("Mul", {"x", "k"}, {"y"}, "mul_0");
  b.output("y");
  auto g = frontend::load_onnx_bytes(b.bytes(), ".");
  EXPECT_EQ(g->num_nodes(), 1u);
  ASSERT_TRUE(g->find_value("k")->is_constant());
  EXPECT_FLOAT_EQ(g->find_value("k")->constant().data<float>()[0], 2.0f);
}

TEST(Frontend, OldOpsetAttributesBecomeInputs) {
  OnnxBuilder b(11);
  b.input("x", {1, 3, 1});
  auto* sq = b.node("Squeeze", {"x"}, {"y"}, "squeeze_0");
  OnnxBuilder::attr_ints(sq, "axes", {0, 2});
  b.output("y");
  auto g = frontend::load_onnx_bytes(b.bytes(), ".");
  ir::Node* n = g->find_node("squeeze_0");
  ASSERT_EQ(n->num_inputs(), 2u);
  EXPECT_FALSE(n->has_attr("axes"));
  ASSERT_TRUE(n->input(1)->is_constant());
  EXPECT_EQ(n->input(1)->constant().to_i64(), (std::vector<int64_t>{0, 2}));
}

TEST(Frontend, SymbolicDimsRunWithAnyConcreteShape) {
  OnnxBuilder b;
  b.input("x", {-1, 4}, onnx::TensorProto::FLOAT, {"batch", ""});
  b.node("Relu", {"x"}, {"y"}, "relu_0");
  b.output("y");
  Core core;
  auto model = core.read_model_from_memory(b.bytes());
  EXPECT_EQ(model->inputs()[0].shape_string(), "[batch,4]");
  EXPECT_EQ(model->outputs()[0].shape_string(), "[batch,4]");
  auto req = core.compile_model(model, test::f32_properties()).create_infer_request();
  for (int64_t batch : {1, 5}) {
    Tensor x(DType::f32, {batch, 4});
    x.data<float>()[0] = -1.0f;
    x.data<float>()[1] = 2.0f;
    req.set_input_tensor(x);
    req.infer();
    auto y = req.get_output_tensor();
    EXPECT_EQ(y.shape(), (Shape{batch, 4}));
    EXPECT_FLOAT_EQ(y.data<float>()[0], 0.0f);
    EXPECT_FLOAT_EQ(y.data<float>()[1], 2.0f);
  }
}

// ---------------- bad models ----------------

TEST(FrontendErrors, NotAnOnnxFile) {
  const kiln::test::ScopedTempDir tmp("notonnx");
  const fs::path& d = tmp.path();
  write_file(d / "a.onnx", "this is plain text, not a protobuf\n");
  Core core;
  EXPECT_NE(error_of([&] { core.read_model((d / "a.onnx").string()); }).find("not an ONNX model"), std::string::npos);
  write_file(d / "empty.onnx", "");
  EXPECT_NE(error_of([&] { core.read_model((d / "empty.onnx").string()); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([&] { core.read_model((d / "missing.onnx").string()); }).find("no such file"), std::string::npos);
}

TEST(FrontendErrors, TruncatedProtobuf) {
  std::string bytes = add_relu_model().bytes();
  Core core;
  // every truncation either fails to parse or yields an incomplete model: always an Error
  for (size_t cut : {bytes.size() / 4, bytes.size() / 2, bytes.size() - 3}) {
    std::string msg = error_of([&] { core.read_model_from_memory(bytes.substr(0, cut)); });
    EXPECT_NE(msg, "<no error>") << "cut at " << cut;
  }
}

TEST(FrontendErrors, UnknownOpNamesOpDomainOpsetAndNode) {
  OnnxBuilder b(13);
  b.input("x", {2});
  b.node("FrobnicateTensor", {"x"}, {"y"}, "frob_7");
  b.output("y");
  Core core;
  std::string msg = error_of([&] { core.read_model_from_memory(b.bytes()); });
  EXPECT_NE(msg.find("FrobnicateTensor"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ai.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("frob_7"), std::string::npos) << msg;
}

TEST(FrontendErrors, UnknownDomain) {
  OnnxBuilder b(13);
  b.input("x", {2});
  auto* n = b.node("Relu", {"x"}, {"y"}, "relu_0");
  n->set_domain("com.example");
  b.output("y");
  std::string msg = error_of([&] { frontend::load_onnx_bytes(b.bytes(), "."); });
  EXPECT_NE(msg.find("com.example"), std::string::npos) << msg;
}

TEST(FrontendErrors, UnsupportedOpset) {
  OnnxBuilder b(99);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  std::string msg = error_of([&] { frontend::load_onnx_bytes(b.bytes(), "."); });
  EXPECT_NE(msg.find("opset 99"), std::string::npos) << msg;
}

TEST(OperatorVersions, ModelsOfOpsets18To23LoadAndRun) {
  // a model exported today: opset 23, ops whose versions changed after 17 (ReduceMean-18 with
  // axes as an input, Pad-23) and ones that did not (Relu-14)
  OnnxBuilder b(23);
  b.input("x", {2, 3, 4});
  b.initializer("axes", Tensor::from_vector<int64_t>({-1}, {1}));
  b.initializer("pads", Tensor::from_vector<int64_t>({0, 0, 1, 0, 0, 1}, {6}));
  b.node("ReduceMean", {"x", "axes"}, {"m"}, "mean");
  b.node("Pad", {"m", "pads"}, {"p"}, "pad");
  b.node("Relu", {"p"}, {"y"}, "relu");
  b.output("y");
  Core core;
  auto req = core.compile_model(core.read_model_from_memory(b.bytes()), test::f32_properties()).create_infer_request();
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 10.0f;
  req.set_input_tensor(Tensor::from_vector<float>(x, {2, 3, 4}));
  req.infer();
  const Tensor y = req.get_output_tensor();
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3}));
  // row means of 0..23 - 10 are -8.5, -4.5, ...: padded with a 0 each side, then Relu
  EXPECT_EQ(y.data<float>()[0], 0.0f);
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_FLOAT_EQ(y.data<float>()[3 * 3 + 1], 3.5f);  // row 3: mean(12..15) - 10
  // opset 24 is past what kiln reads
  OnnxBuilder c(24);
  c.input("x", {2});
  c.node("Relu", {"x"}, {"y"});
  c.output("y");
  const std::string msg = error_of([&] { core.read_model_from_memory(c.bytes()); });
  EXPECT_NE(msg.find("opset 24; kiln supports opsets 1 to 23"), std::string::npos) << msg;
}

TEST(OperatorVersions, ImplementedVersionsFollowTheSchemaAndTheOnnxHistory) {
  ir::OpSchema s;
  s.name = "Pad";
  EXPECT_EQ(ir::implemented_versions(s), (std::vector<int>{1, 2, 11, 13}));  // default: up to opset 17
  s.max_version = 19;
  EXPECT_EQ(ir::implemented_versions(s), (std::vector<int>{1, 2, 11, 13, 18, 19}));
  s.domain = "com.microsoft";
  EXPECT_TRUE(ir::implemented_versions(s).empty());  // other domains have no ONNX history
  EXPECT_EQ(ir::onnx_op_version("Pad", 17), 13);
  EXPECT_EQ(ir::onnx_op_version("Pad", 20), 19);
  EXPECT_EQ(ir::onnx_op_version("Attention", 22), 0);  // not in ONNX before 23
  EXPECT_EQ(ir::onnx_op_version("NoSuchOp", 23), 0);
  // every registered default-domain op is in the history and implements its newest revision
  // up to opset 23, except where listed here with why
  for (const ir::OpSchema* op : ir::OpRegistry::instance().all()) {
    if (!op->domain.empty() || op->name == "Upsample" || op->name == "Scatter") continue;  // deprecated
    const auto& hist = ir::onnx_op_versions();
    ASSERT_TRUE(hist.count(op->name)) << op->name << " is not an ONNX operator";
    const std::vector<int> v = ir::implemented_versions(*op);
    ASSERT_FALSE(v.empty()) << op->name << " implements no version";
    EXPECT_EQ(v.back(), hist.at(op->name).back()) << op->name;
  }
}

TEST(OperatorVersions, AVersionKilnDoesNotImplementIsRefusedByName) {
  // MaxRoiPool (versions 1 and 22) registered for this test implementing only version 1
  ir::OpSchema s;
  s.name = "MaxRoiPool";
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"pooled_shape", ir::AttrType::ints}, {"spatial_scale", ir::AttrType::f}};
  s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, DType::f32, ir::PartialShape::unknown_rank()); };
  ir::OpRegistry::instance().add(s);
  for (int opset : {21, 22, 23}) {
    OnnxBuilder b(opset);
    b.input("x", {1, 1, 4, 4});
    b.input("rois", {1, 5});
    b.node("MaxRoiPool", {"x", "rois"}, {"y"}, "roi_pool");
    b.output("y");
    const std::string msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
    if (opset < 22) {
      EXPECT_EQ(msg, "<no error>");
    } else {
      EXPECT_NE(msg.find("'roi_pool'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("version 22 of MaxRoiPool (the model imports opset " + std::to_string(opset) +
                         ") is not implemented; kiln implements MaxRoiPool versions 1"),
                std::string::npos)
          << msg;
    }
  }
}

TEST(FrontendErrors, DanglingInputAndCycle) {
  OnnxBuilder b;
  b.input("x", {2});
  b.node("Relu", {"nowhere"}, {"y"}, "relu_0");
  b.output("y");
  EXPECT_NE(error_of([&] { frontend::load_onnx_bytes(b.bytes(), "."); }).find("'nowhere'"), std::string::npos);

  OnnxBuilder c;
  c.input("x", {2});
  c.node("Add", {"x", "b"}, {"a"}, "add_0");
  c.node("Relu", {"a"}, {"b"}, "relu_0");
  c.output("b");
  EXPECT_NE(error_of([&] { frontend::load_onnx_bytes(c.bytes(), "."); }).find("cycle"), std::string::npos);
}

TEST(FrontendErrors, AttributeOfWrongType) {
  OnnxBuilder b;
  b.input("x", {2});
  auto* n = b.node("LeakyRelu", {"x"}, {"y"}, "lrelu_3");
  OnnxBuilder::attr_i(n, "alpha", 2);  // must be a float
  b.output("y");
  Core core;
  std::string msg = error_of([&] { core.read_model_from_memory(b.bytes()); });
  EXPECT_NE(msg.find("lrelu_3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("alpha"), std::string::npos) << msg;
}

TEST(FrontendErrors, RawDataSizeMismatch) {
  OnnxBuilder b = add_relu_model();
  b.graph->mutable_initializer(0)->mutable_raw_data()->resize(5);
  std::string msg = error_of([&] { frontend::load_onnx_bytes(b.bytes(), "."); });
  EXPECT_NE(msg.find("raw_data"), std::string::npos) << msg;
}

// ---------------- external data ----------------

namespace {
OnnxBuilder external_model(const std::string& location) {
  OnnxBuilder b = add_relu_model();
  auto* w = b.graph->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  return b;
}
}  // namespace

TEST(ExternalData, LoadsFromTheModelFolder) {
  const kiln::test::ScopedTempDir tmp("ext_ok");
  const fs::path& d = tmp.path();
  std::vector<float> w = {1, -1, 2, -2, 3, -3};
  write_file(d / "weights.bin", std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  write_file(d / "m.onnx", external_model("weights.bin").bytes());
  auto g = frontend::load_onnx_file((d / "m.onnx").string());
  EXPECT_FLOAT_EQ(g->find_value("w")->constant().data<float>()[2], 2.0f);
}

TEST(ExternalData, RefusesPathsOutsideTheModelFolder) {
  const kiln::test::ScopedTempDir tmp("ext_bad");
  const fs::path& d = tmp.path();
  fs::create_directories(d / "model");
  for (const std::string loc : {"../../etc/passwd", "/etc/passwd", "sub/../../outside.bin"}) {
    write_file(d / "model" / "m.onnx", external_model(loc).bytes());
    std::string msg = error_of([&] { frontend::load_onnx_file((d / "model" / "m.onnx").string()); });
    EXPECT_TRUE(msg.find("escapes") != std::string::npos || msg.find("absolute") != std::string::npos)
        << loc << ": " << msg;
  }
  // a symlink inside the folder that points outside is refused too
  write_file(d / "secret.bin", std::string(24, 'x'));
  fs::create_symlink(d / "secret.bin", d / "model" / "link.bin");
  write_file(d / "model" / "m.onnx", external_model("link.bin").bytes());
  std::string msg = error_of([&] { frontend::load_onnx_file((d / "model" / "m.onnx").string()); });
  EXPECT_NE(msg.find("escapes"), std::string::npos) << msg;
}

// ---------------- bad inputs at infer time ----------------

TEST(InferErrors, MissingExtraWrongDtypeRankDim) {
  Core core;
  auto compiled = core.compile_model(core.read_model_from_memory(add_relu_model().bytes()));
  auto req = compiled.create_infer_request();
  EXPECT_NE(error_of([&] { req.infer(); }).find("'x' was not set"), std::string::npos);
  EXPECT_NE(error_of([&] { req.set_input_tensor(1, Tensor(DType::f32, {2, 3})); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { req.set_tensor("nope", Tensor(DType::f32, {2, 3})); }).find("no input named"),
            std::string::npos);
  req.set_input_tensor(Tensor(DType::i64, {2, 3}));
  EXPECT_NE(error_of([&] { req.infer(); }).find("element type"), std::string::npos);
  req.set_input_tensor(Tensor(DType::f32, {6}));
  EXPECT_NE(error_of([&] { req.infer(); }).find("rank"), std::string::npos);
  req.set_input_tensor(Tensor(DType::f32, {2, 4}));
  EXPECT_NE(error_of([&] { req.infer(); }).find("dim 1 must be 3"), std::string::npos);
  EXPECT_NE(error_of([&] { req.get_output_tensor(); }).find("has not run"), std::string::npos);
}

// ---------------- control flow: bodies that read outer values ----------------

namespace {
onnx::GraphProto* graph_attr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}
void body_io(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int elem,
             const std::vector<int64_t>& dims) {
  auto* vi = list->Add();
  vi->set_name(name);
  OnnxBuilder::set_type(vi, elem, dims, {});
}
}  // namespace

TEST(ControlFlow, IfBranchesReadOuterValues) {
  OnnxBuilder b(13);
  b.input("x", {3});
  b.input("cond", {}, onnx::TensorProto::BOOL);
  auto* n = b.node("If", {"cond"}, {"y"}, "if_0");
  auto* then_g = graph_attr(n, "then_branch");
  auto* t = then_g->add_node();
  t->set_op_type("Relu");
  t->add_input("x");  // outer value
  t->add_output("t_out");
  body_io(then_g->mutable_output(), "t_out", onnx::TensorProto::FLOAT, {3});
  auto* else_g = graph_attr(n, "else_branch");
  auto* e = else_g->add_node();
  e->set_op_type("Neg");
  e->add_input("x");
  e->add_output("e_out");
  body_io(else_g->mutable_output(), "e_out", onnx::TensorProto::FLOAT, {3});
  b.output("y");

  Core core;
  auto model = core.read_model_from_memory(b.bytes());
  EXPECT_EQ(model->outputs()[0].shape_string(), "[3]");
  auto req = core.compile_model(model, test::f32_properties()).create_infer_request();
  req.set_tensor("x", Tensor::from_vector<float>({-1, 0, 2}, {3}));
  req.set_tensor("cond", Tensor::scalar<bool>(true));
  req.infer();
  auto y = req.get_output_tensor();
  EXPECT_EQ(y.to_f64(), (std::vector<double>{0, 0, 2}));
  req.set_tensor("cond", Tensor::scalar<bool>(false));
  req.infer();
  EXPECT_EQ(req.get_output_tensor().to_f64(), (std::vector<double>{1, 0, -2}));
}

TEST(ControlFlow, LoopAccumulatesACapturedValue) {
  OnnxBuilder b(13);
  b.input("x", {2});
  b.initializer("trips", Tensor::scalar<int64_t>(3));
  b.initializer("zero", Tensor::from_vector<float>({0, 0}, {2}));
  auto* n = b.node("Loop", {"trips", "", "zero"}, {"acc", "partials"}, "loop_0");
  auto* body = graph_attr(n, "body");
  body_io(body->mutable_input(), "i", onnx::TensorProto::INT64, {});
  body_io(body->mutable_input(), "c", onnx::TensorProto::BOOL, {});
  body_io(body->mutable_input(), "acc_in", onnx::TensorProto::FLOAT, {2});
  auto* add = body->add_node();
  add->set_op_type("Add");
  add->add_input("acc_in");
  add->add_input("x");  // captured from the outer graph
  add->add_output("acc_out");
  auto* id = body->add_node();
  id->set_op_type("Identity");
  id->add_input("c");
  id->add_output("c_out");
  auto* cp = body->add_node();
  cp->set_op_type("Identity");
  cp->add_input("acc_out");
  cp->add_output("scan_out");
  body_io(body->mutable_output(), "c_out", onnx::TensorProto::BOOL, {});
  body_io(body->mutable_output(), "acc_out", onnx::TensorProto::FLOAT, {2});
  body_io(body->mutable_output(), "scan_out", onnx::TensorProto::FLOAT, {2});
  b.output("acc");
  b.output("partials");

  Core core;
  auto req = core.compile_model(core.read_model_from_memory(b.bytes()), test::f32_properties()).create_infer_request();
  req.set_input_tensor(Tensor::from_vector<float>({1, -2}, {2}));
  req.infer();
  EXPECT_EQ(req.get_output_tensor(0).to_f64(), (std::vector<double>{3, -6}));
  Tensor partials = req.get_output_tensor(1);
  EXPECT_EQ(partials.shape(), (Shape{3, 2}));
  EXPECT_EQ(partials.to_f64(), (std::vector<double>{1, -2, 2, -4, 3, -6}));
}

// torchvision's Mask R-CNN pastes its masks in a Loop whose carried tensor grows by one row
// each iteration (a Concat), declared with the shape the exporter saw first ([0, 2]): the
// declared dims are hints, as in ONNX Runtime (the element type and rank are still checked)
TEST(ControlFlow, LoopCarriesATensorThatGrowsEachIteration) {
  OnnxBuilder b(13);
  b.input("x", {1, 2});
  b.initializer("trips", Tensor::scalar<int64_t>(3));
  b.initializer("none", Tensor(DType::f32, Shape{0, 2}));
  auto* n = b.node("Loop", {"trips", "", "none"}, {"rows"}, "paste");
  auto* body = graph_attr(n, "body");
  body_io(body->mutable_input(), "i", onnx::TensorProto::INT64, {});
  body_io(body->mutable_input(), "c", onnx::TensorProto::BOOL, {});
  body_io(body->mutable_input(), "rows_in", onnx::TensorProto::FLOAT, {0, 2});
  auto* cat_ = body->add_node();
  cat_->set_op_type("Concat");
  cat_->add_input("rows_in");
  cat_->add_input("x");  // captured
  cat_->add_output("rows_out");
  auto* axis = cat_->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  auto* id = body->add_node();
  id->set_op_type("Identity");
  id->add_input("c");
  id->add_output("c_out");
  body_io(body->mutable_output(), "c_out", onnx::TensorProto::BOOL, {});
  body_io(body->mutable_output(), "rows_out", onnx::TensorProto::FLOAT, {0, 2});
  b.output("rows");

  Core core;
  auto req = core.compile_model(core.read_model_from_memory(b.bytes()), test::f32_properties()).create_infer_request();
  req.set_input_tensor(Tensor::from_vector<float>({1, -2}, {1, 2}));
  req.infer();
  const Tensor rows = req.get_output_tensor();
  EXPECT_EQ(rows.shape(), (Shape{3, 2}));
  EXPECT_EQ(rows.to_f64(), (std::vector<double>{1, -2, 1, -2, 1, -2}));
}

TEST(ControlFlow, BodyReadingAnUndefinedNameIsAnError) {
  OnnxBuilder b(13);
  b.input("cond", {}, onnx::TensorProto::BOOL);
  auto* n = b.node("If", {"cond"}, {"y"}, "if_bad");
  for (const char* br : {"then_branch", "else_branch"}) {
    auto* g = graph_attr(n, br);
    auto* r = g->add_node();
    r->set_op_type("Relu");
    r->add_input("ghost");
    r->add_output("o");
    body_io(g->mutable_output(), "o", onnx::TensorProto::FLOAT, {1});
  }
  b.output("y");
  std::string msg = error_of([&] { frontend::load_onnx_bytes(b.bytes(), "."); });
  EXPECT_NE(msg.find("'ghost'"), std::string::npos) << msg;
}

}  // namespace test_frontend
