// Fuzz target: an ONNX model from untrusted bytes, through everything a user's model meets
// before and during its first inference: parsing (protobuf, TensorProto data, external-data
// references), opset normalisation, shape inference, the compile pipeline, and one inference
// on small generated inputs.
//
// Expected outcomes: a model, or a kiln::Error. A crash, a sanitizer report, an uncaught
// exception or a kiln::Error that says "internal error" (an exception kiln did not expect,
// wrapped by the API) is a finding: the target aborts on it.
#include <kiln/core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_util.hpp"

namespace {

// Inputs kiln is asked to build for a fuzzed model stay small: the fuzzer looks for crashes,
// not for the memory limit (kiln_max_tensor_bytes is exercised by the unit tests).
constexpr int64_t kMaxInputElements = 1 << 12;

// One inference with small inputs: symbolic dims become 1 or 2, values a fixed pattern.
void run_once(const kiln::CompiledModel& compiled, uint32_t seed) {
  kiln::InferRequest req = compiled.create_infer_request();
  const auto& inputs = compiled.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const kiln::PortInfo& in = inputs[i];
    if (in.kind != kiln::ValueKind::tensor || !in.rank_known || in.dtype == kiln::DType::string ||
        kiln::is_narrow(in.dtype) || in.dtype == kiln::DType::undefined)
      return;  // sequences, optionals, strings: the conformance tests cover them
    kiln::Shape shape;
    int64_t elements = 1;
    for (int64_t d : in.shape) {
      const int64_t dim = d >= 0 ? d : 1 + static_cast<int64_t>((seed >> (shape.size() % 16)) & 1);
      shape.push_back(dim);
      elements = dim == 0 ? 0 : (elements > kMaxInputElements / dim ? kMaxInputElements + 1 : elements * dim);
    }
    if (elements > kMaxInputElements) return;
    kiln::Tensor t(in.dtype, shape);
    kiln::fuzz::fill_pattern(t, seed + static_cast<uint32_t>(i));
    req.set_input_tensor(i, t);
  }
  req.infer();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  kiln::Core core;
  std::shared_ptr<kiln::Model> model;
  // external data may only resolve inside base_dir: a folder that does not exist
  if (!kiln::fuzz::expect_kiln_error([&] { model = core.read_model_from_memory(bytes, "/nonexistent/kiln-fuzz"); }))
    return 0;
  kiln::CompiledModel compiled;
  const kiln::AnyMap properties = {
      {"inference_precision", "f32"},
      {"inference_num_threads", "1"},
      {"kiln_max_tensor_bytes", "67108864"},  // 64 MiB: a crafted shape is refused, not allocated
  };
  if (!kiln::fuzz::expect_kiln_error([&] { compiled = core.compile_model(model, properties); })) return 0;
  uint32_t seed = 0;
  for (size_t i = 0; i < size && i < 16; ++i) seed = seed * 31 + data[i];
  kiln::fuzz::expect_kiln_error([&] { run_once(compiled, seed); });
  return 0;
}
