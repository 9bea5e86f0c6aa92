#pragma once
// The version history of ONNX's default-domain operators, up to opset 23 (ONNX 1.18): which
// revision of an operator a model importing a given opset means, so that kiln can say which
// revisions it implements and refuse the others by name.
#include <map>
#include <string>
#include <vector>

namespace kiln::ir {

// Newest opset kiln reads (the default domain).
inline constexpr int kMaxOnnxOpset = 23;

// Operator -> the opset versions that introduced or changed it, oldest first.
const std::map<std::string, std::vector<int>>& onnx_op_versions();

// The revision of `op` a model importing `opset` uses (the newest version <= opset), or 0
// when ONNX has no such operator at that opset.
int onnx_op_version(const std::string& op, int opset);

}  // namespace kiln::ir
