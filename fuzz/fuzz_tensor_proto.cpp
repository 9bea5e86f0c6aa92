// Fuzz target: a serialized ONNX TensorProto (the .pb tensors `kiln run --input` and the
// conformance driver read, and every initializer of a model) converted to a kiln::Tensor:
// declared dims against the data present, every data field and element type, packed 4-bit
// and float8 values, external-data references (confined to a folder that does not exist).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "frontend/onnx/tensor_proto.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::fuzz::expect_kiln_error([&] {
    kiln::Tensor t = kiln::frontend::tensor_from_proto(proto, "/nonexistent/kiln-fuzz");
    kiln::fuzz::touch(t);
  });
  return 0;
}
