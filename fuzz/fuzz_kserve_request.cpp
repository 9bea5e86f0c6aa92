// Fuzz target: a KServe v2 inference request as kiln serve receives it (src/serve/kserve_codec):
// the JSON, the binary tensor extension's header length and appended bytes, checked against a
// model's inputs (an FP32 [batch,16] input, or two INT64 [batch,seq] inputs and a BYTES one),
// then the decoded tensors encoded back as a response (JSON and binary).
//
// Byte 0 chooses the model (bit 0) and whether an Inference-Header-Content-Length is given
// (bit 1: bytes 1-2, little-endian, capped at the body's size); the rest is the body.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "serve/kserve_codec.hpp"

namespace {

kiln::PortInfo port(const char* name, kiln::DType dtype, std::vector<int64_t> shape) {
  kiln::PortInfo p;
  p.name = name;
  p.dtype = dtype;
  p.shape = std::move(shape);
  p.dim_names.assign(p.shape.size(), "");
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const bool second = data[0] & 1;
  const std::vector<kiln::PortInfo> inputs =
      second ? std::vector<kiln::PortInfo>{port("ids", kiln::DType::i64, {-1, -1}), port("mask", kiln::DType::i64, {-1, -1}),
                                           port("text", kiln::DType::string, {-1})}
             : std::vector<kiln::PortInfo>{port("input", kiln::DType::f32, {-1, 16})};
  const std::vector<kiln::PortInfo> outputs = {port("output", kiln::DType::f32, {-1, 10})};
  const std::string body(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::optional<size_t> header_length;
  if (data[0] & 2) header_length = std::min<size_t>(data[1] | (size_t(data[2]) << 8), body.size());
  try {
    const kiln::serve::InferRequestData r = kiln::serve::decode_infer_request(body, header_length, inputs, outputs);
    std::vector<std::pair<std::string, kiln::Tensor>> echoed;
    for (const auto& in : r.inputs) {
      kiln::fuzz::touch(in.tensor);
      echoed.emplace_back("output", in.tensor);
    }
    kiln::serve::InferRequestData all = r;
    all.outputs.clear();
    (void)kiln::serve::encode_infer_response("m", all, echoed);
    all.binary_output = true;
    (void)kiln::serve::encode_infer_response("m", all, echoed);
  } catch (const kiln::serve::RequestError&) {
    // a bad request, said clearly: what every malformed body must get
  }
  return 0;
}
