#pragma once
// ONNX TensorProto <-> kiln::Tensor.
#include <kiln/tensor.hpp>

#include <string>

namespace onnx {
class TensorProto;
}

namespace kiln::frontend {

// ONNX TensorProto.DataType -> DType; throws kiln::Error for types kiln does not
// support (string, complex, ...), naming `what`.
DType dtype_from_onnx(int onnx_type, const std::string& what);
int dtype_to_onnx(DType t);

// Converts a TensorProto; external data (data_location = EXTERNAL) is read from a file
// that must resolve inside `base_dir` (no absolute paths, no escaping with "..").
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir);
// Same, but moves raw_data out of `proto` instead of copying it (the proto is left
// without its data). Used for initializers: a model's weights are never held twice.
Tensor take_tensor_from_proto(onnx::TensorProto& proto, const std::string& base_dir);
// Reads a serialized TensorProto file (.pb, as in the ONNX backend test data).
Tensor tensor_from_proto_file(const std::string& path);

// A serialized value of kind `kind` (ONNX's SequenceProto / OptionalProto for sequences and
// optionals, a TensorProto for a tensor), as a kiln::Tensor of that kind. `elem` is the element
// type to use for an empty sequence or optional (they carry none); `of`, what an optional
// holds (a plain SequenceProto is read as an optional sequence that has its value).
Tensor value_from_proto_file(const std::string& path, ValueKind kind, DType elem, ValueKind of = ValueKind::tensor);
// Fills a TensorProto (raw_data form) from a tensor.
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);

}  // namespace kiln::frontend
