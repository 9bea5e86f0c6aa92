#pragma once
// NumPy .npy files <-> kiln::Tensor.
//
// Reads format versions 1.0, 2.0 and 3.0 (C order only; Fortran order is rejected),
// little- or big-endian data, every kiln dtype. bfloat16 has no NumPy dtype of its own:
// it is written as '<V2' (what ml_dtypes.bfloat16 arrays save as) and '<V2' reads back
// as bf16. Writes version 1.0 (2.0 when the header does not fit). Truncated or
// malformed files throw kiln::Error naming the file.
#include <kiln/tensor.hpp>

#include <string>

namespace kiln::tools {

// Parses the bytes of a .npy file; `what` names the source in error messages.
Tensor npy_from_bytes(const std::string& bytes, const std::string& what = "npy data");
std::string npy_to_bytes(const Tensor& t);

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// The NumPy dtype descriptor kiln writes for a dtype ("<f4", "|b1", ...).
std::string npy_descr(DType t);

}  // namespace kiln::tools
