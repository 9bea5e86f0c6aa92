#pragma once
// ONNX TensorProto.DataType codes <-> kiln::DType, as plain integers (no protobuf), so the
// frontend and the op kernels (Cast 'to', EyeLike 'dtype', ...) share one table.
#include <kiln/dtype.hpp>

#include <cstdint>
#include <string>

namespace kiln {

// ONNX TensorProto.DataType code -> DType. Codes kiln does not support (UNDEFINED,
// STRING, COMPLEX64, ..., unknown numbers) throw kiln::Error
//   "<what>: ONNX data type 8 (STRING) is not supported"
DType dtype_from_onnx_code(int64_t code, const std::string& what);

// DType -> ONNX TensorProto.DataType code (0 = UNDEFINED for DType::undefined).
int dtype_to_onnx_code(DType t);

}  // namespace kiln
