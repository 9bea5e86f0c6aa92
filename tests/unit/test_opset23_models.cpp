// Models as opset-23 exporters write them run on kiln's fused kernels: a decoder block with
// RMSNormalization, RotaryEmbedding and grouped-query causal Attention
// (tests/data/onnx_new/node/test_decoder_block_23, reference output from ONNX Runtime 1.30,
// written by tests/onnx_new/make_cases.py), and Attention in each form the fused node takes.
#include <gtest/gtest.h>
#include <kiln/core.hpp>

#include <map>
#include <string>

#include "cpu_test_util.hpp"
#include "frontend/onnx/tensor_proto.hpp"
#include "precision_util.hpp"

namespace kiln::test::test_opset23_models {
namespace {

const std::string kCases = std::string(KILN_SOURCE_DIR) + "/tests/data/onnx_new/node/";

// Runs a case of tests/data/onnx_new in f32 with profiling; compares output 0 with the
// reference; returns node name -> (type, exec type) of the executed rows.
std::map<std::string, std::pair<std::string, std::string>> run_case(const std::string& name, double rtol = 1e-3,
                                                                     double atol = 1e-4) {
  const std::string dir = kCases + name + "/";
  Core core;
  auto model = core.read_model(dir + "model.onnx");
  CompiledModel cm = core.compile_model(model, f32_properties({{"enable_profiling", "YES"}}));
  InferRequest req = cm.create_infer_request();
  for (size_t i = 0; i < model->inputs().size(); ++i)
    req.set_input_tensor(i, frontend::tensor_from_proto_file(dir + "test_data_set_0/input_" + std::to_string(i) + ".pb"));
  req.infer();
  expect_close(frontend::tensor_from_proto_file(dir + "test_data_set_0/output_0.pb"), req.get_output_tensor(0), rtol,
               atol);
  std::map<std::string, std::pair<std::string, std::string>> rows;
  for (const auto& r : req.get_profiling_info())
    if (r.status == ProfilingInfo::Status::executed) rows[r.node_name] = {r.node_type, r.exec_type};
  return rows;
}

TEST(Opset23Models, DecoderBlockRunsOnTheFusedKernelsAndMatchesOnnxRuntime) {
  const auto rows = run_case("test_decoder_block_23");
  size_t attention = 0, fc = 0, rms = 0;
  for (const auto& [name, t] : rows) {
    attention += t.first == "Attention";
    fc += t.first == "FullyConnected";
    rms += name.rfind("RMSNormalization", 0) == 0;
    // grouped-query causal attention in one node, on oneDNN's optimised matmuls
    if (t.first == "Attention") {
      EXPECT_EQ(t.second.rfind("ref", 0), std::string::npos) << t.second;
    }
  }
  EXPECT_EQ(attention, 1u);
  EXPECT_EQ(fc, 6u);  // the projections and the MLP (Gelu fused into the first)
  EXPECT_EQ(rms, 2u);  // each RMSNormalization one node
}

TEST(Opset23Models, AttentionFormsRunAsOneNode) {
  // 4-D and 3-D, multi-head / grouped / multi-query, causal, bool and float masks, softcap:
  // one Attention node each; past key-values and the qk output stay on the reference kernel
  for (const char* c : {"test_attention_mha_4d", "test_attention_gqa", "test_attention_mqa_causal",
                        "test_attention_mha_bool_mask", "test_attention_mha_additive_mask",
                        "test_attention_mha_scale_softcap", "test_attention_3d_heads_attr", "test_attention_past_kv"}) {
    SCOPED_TRACE(c);
    const auto rows = run_case(c);
    ASSERT_EQ(rows.size(), 1u);
    const bool past = std::string(c) == "test_attention_past_kv";
    EXPECT_EQ(rows.begin()->second.first, past ? "Reference" : "Attention");
  }
}

}  // namespace
}  // namespace kiln::test::test_opset23_models
