// Fuzz target: the bytes of a NumPy .npy file (`kiln run --input x=file.npy`, the Python-free
// way users hand kiln tensors): magic, version, header length, the header's Python-literal
// dict (descr, fortran_order, shape), and the data against the shape.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tools/common/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_kiln_error([&] {
    kiln::Tensor t = kiln::tools::npy_from_bytes(bytes, "fuzz input");
    kiln::fuzz::touch(t);
    // what was read writes back to the same tensor
    kiln::Tensor again = kiln::tools::npy_from_bytes(kiln::tools::npy_to_bytes(t), "round trip");
    if (again.shape() != t.shape() || again.dtype() != t.dtype()) std::abort();
  });
  return 0;
}
