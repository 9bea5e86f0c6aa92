#pragma once
// Loading tensors from files for the command line and tests: NumPy .npy or a serialized
// ONNX TensorProto (.pb, as in the ONNX backend test data).
#include <kiln/tensor.hpp>

#include <string>

namespace kiln::tools {

// By extension (.npy / .pb); other names are sniffed (the .npy magic, else TensorProto).
// Throws kiln::Error for a missing, unreadable or malformed file.
Tensor load_tensor_file(const std::string& path);

}  // namespace kiln::tools
