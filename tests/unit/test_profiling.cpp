// Performance counters: InferRequest::get_profiling_info() with enable_profiling (PERF_COUNT).
#include <gtest/gtest.h>

#include <kiln/core.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "cpu_test_util.hpp"
#include "ir/graph.hpp"
#include "ir/op_registry.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x[1,4,8,8] -> Conv -> Relu -> Erf (a Reference node) -> output
std::shared_ptr<Model> conv_relu_erf() {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 4, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({8, 4, 3, 3}, 1))}, 1, "conv");
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "relu");
  auto* e = g->add_node("Erf", {r->output(0)}, 1, "erf");
  g->add_output(e->output(0));
  ir::infer_shapes(*g);
  return std::make_shared<Model>(g);
}

}  // namespace

TEST(Profiling, OneExecutedRowPerRuntimeNodeWithTypesAndTimes) {
  Core core;
  for (const char* key : {"enable_profiling", "PERF_COUNT"}) {
    CompiledModel cm = core.compile_model(conv_relu_erf(), {{key, "YES"}});
    InferRequest req = cm.create_infer_request();
    req.set_input_tensor(random_tensor({1, 4, 8, 8}, 2));
    req.infer();
    auto rows = req.get_profiling_info();
    std::set<std::string> names, types;
    for (auto& r : rows) {
      if (r.status == ProfilingInfo::Status::optimized_out) {
        // relu went into the convolution as a post-op
        EXPECT_EQ(r.node_name, "relu");
        EXPECT_EQ(r.fused_into, "conv");
        EXPECT_EQ(r.real_time_us, 0.0);
        continue;
      }
      names.insert(r.node_name);
      types.insert(r.node_type);
      EXPECT_EQ(r.status, ProfilingInfo::Status::executed);
      EXPECT_GE(r.real_time_us, 0.0);
      EXPECT_FALSE(r.exec_type.empty());
      EXPECT_NE(r.exec_type.find("_f32"), std::string::npos) << r.exec_type;
    }
    EXPECT_TRUE(names.count("conv") && names.count("erf") && !names.count("relu")) << key;
    EXPECT_TRUE(types.count("Convolution") && types.count("Reference") && !types.count("Eltwise")) << key;
    EXPECT_EQ(rows.size(), names.size() + 1);
    // a second run replaces the rows instead of appending
    req.infer();
    EXPECT_EQ(req.get_profiling_info().size(), rows.size());
  }
}

TEST(Profiling, WithFusionsDisabledEveryLayerRuns) {
  CompiledModel cm = Core().compile_model(conv_relu_erf(), {{"PERF_COUNT", "YES"}, {"kiln_disable_passes", "all-fusions"}});
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({1, 4, 8, 8}, 2));
  req.infer();
  for (auto& r : req.get_profiling_info()) EXPECT_EQ(r.status, ProfilingInfo::Status::executed) << r.node_name;
  EXPECT_THROW(Core().compile_model(conv_relu_erf(), {{"kiln_disable_passes", "NoSuchPass"}}), Error);
}

TEST(Profiling, ReferenceExecutorGivesOneRowPerOp) {
  CompiledModel cm = Core().compile_model(conv_relu_erf(), {{"enable_profiling", "true"}, {"kiln_executor", "reference"}});
  InferRequest req = cm.create_infer_request();
  req.set_input_tensor(random_tensor({1, 4, 8, 8}, 2));
  req.infer();
  auto rows = req.get_profiling_info();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].node_type, "Conv");
  EXPECT_EQ(rows[0].exec_type, "ref_any_f32");
  EXPECT_EQ(rows[2].node_name, "erf");
}

TEST(Profiling, OffByDefaultAndBadValuesAreErrors) {
  Core core;
  InferRequest req = core.compile_model(conv_relu_erf()).create_infer_request();
  req.set_input_tensor(random_tensor({1, 4, 8, 8}, 2));
  req.infer();
  try {
    req.get_profiling_info();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("enable_profiling"), std::string::npos) << e.what();
  }
  try {
    core.compile_model(conv_relu_erf(), {{"PERF_COUNT", "maybe"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PERF_COUNT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("YES"), std::string::npos) << e.what();
  }
  CompiledModel on = core.compile_model(conv_relu_erf(), {{"enable_profiling", "YES"}});
  EXPECT_THROW(on.create_infer_request().get_profiling_info(), Error);  // no infer() yet
}

TEST(UserPatterns, PatternFilesFromThePropertyRewriteTheModel) {
  // Relu(Relu(x)) -> Relu(x), given as a user pattern file
  const std::string path = testing::TempDir() + "kiln_user_pattern.json";
  {
    std::ofstream f(path);
    f << R"([{"name": "double_relu", "patterns": {"in": [[[0, "Relu"], [1, "Relu"]]], "out": [[[0, "Relu"]]]},
             "search_mode": "op_type", "node_names": {"0": 1},
             "input_tensors": {"0": [[{"0": [0]}], [[0], 1]]},
             "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}, "returns": []}])";
  }
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{2, 8})});
  auto* r = g->add_node("Relu", {g->add_node("Relu", {x}, 1, "r1")->output(0)}, 1, "r2");
  g->add_output(r->output(0));
  ir::infer_shapes(*g);
  auto model = std::make_shared<Model>(g);
  auto run = [&](const AnyMap& props) {
    CompiledModel cm = Core().compile_model(model, props);
    InferRequest req = cm.create_infer_request();
    Tensor in = random_tensor({2, 8}, 1);
    req.set_input_tensor(in);
    req.infer();
    size_t eltwise = 0;
    for (auto& row : req.get_profiling_info()) eltwise += row.node_type == "Eltwise";
    for (int64_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(req.get_output_tensor().data<float>()[i], std::max(0.0f, in.data<float>()[i]));
    return std::make_pair(eltwise, cm);
  };
  AnyMap base = {{"enable_profiling", "YES"}, {"kiln_disable_passes", "SnippetsTokenization"}};
  EXPECT_EQ(run(base).first, 2u);
  AnyMap with = base;
  with["kiln_pattern_files"] = path;
  auto [count, cm] = run(with);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(cm.get_property("kiln_pattern_files"), path);
  with["kiln_disable_passes"] = "SnippetsTokenization,UserPatterns";
  EXPECT_EQ(run(with).first, 2u);

  // files that are missing or not a valid config fail compile_model, naming the file
  for (const std::string& bad : {testing::TempDir() + "no_such_file.json", path + ".bad"}) {
    if (bad.find(".bad") != std::string::npos) std::ofstream(bad) << R"({"name": "x", "patterns": 3})";
    try {
      Core().compile_model(model, {{"kiln_pattern_files", bad}});
      FAIL() << "expected an error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(InferencePrecision, Bf16ConvolutionsAndFullyConnectedStayCloseToF32) {
  // conv -> relu -> flatten -> FC: bf16 activations and weights, f32 accumulation
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 13;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(Shape{1, 16, 8, 8})});
  auto* c = g->add_node("Conv", {x, g->add_constant("w", random_tensor({32, 16, 3, 3}, 1, 0.2f))}, 1, "conv");
  c->attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  auto* r = g->add_node("Relu", {c->output(0)}, 1, "relu");
  auto* f = g->add_node("Flatten", {r->output(0)}, 1, "flatten");
  auto* fc = g->add_node("Gemm", {f->output(0), g->add_constant("fw", random_tensor({32 * 64, 10}, 2, 0.05f))}, 1, "fc");
  g->add_output(fc->output(0));
  ir::infer_shapes(*g);
  auto model = std::make_shared<Model>(g);
  Tensor in = random_tensor({1, 16, 8, 8}, 3);
  auto run = [&](const AnyMap& props, std::string* conv_exec) {
    AnyMap p = props;
    p["enable_profiling"] = "YES";
    CompiledModel cm = Core().compile_model(model, p);
    InferRequest req = cm.create_infer_request();
    req.set_input_tensor(in);
    req.infer();
    for (auto& row : req.get_profiling_info())
      if (row.node_name == "conv") *conv_exec = row.exec_type;
    return std::make_pair(req.get_output_tensor().clone(), cm.get_property("inference_precision"));
  };
  std::string exec32, exec16, exec_old;
  auto [y32, p32] = run({}, &exec32);
  auto [y16, p16] = run({{"inference_precision", "bf16"}}, &exec16);
  auto [yold, pold] = run({{"ENFORCE_BF16", "YES"}}, &exec_old);
  EXPECT_EQ(p32, "f32");
  EXPECT_EQ(p16, "bf16");
  EXPECT_EQ(pold, "bf16");
  EXPECT_EQ(exec32.find("bf16"), std::string::npos) << exec32;
  EXPECT_NE(exec16.find("bf16"), std::string::npos) << exec16;  // oneDNN's bf16 kernel (native or emulated)
  // bf16 keeps 8 mantissa bits: about 3 significant digits per operand
  double max_abs = 0;
  for (int64_t i = 0; i < y32.size(); ++i) max_abs = std::max(max_abs, std::fabs(static_cast<double>(y32.data<float>()[i])));
  expect_close(y32, y16, 2e-2, 2e-2 * max_abs);
  expect_close(y16, yold, 0, 0);
  EXPECT_THROW(Core().compile_model(model, {{"inference_precision", "int4"}}), Error);
}
