#pragma once
// oneDNN glue: the process-wide CPU engine, dtype mapping, plain (row-major) descriptors,
// what the CPU runs natively.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

namespace kiln::cpu {

dnnl::engine& cpu_engine();

// oneDNN's data type for a kiln dtype, if oneDNN has one (f32, bf16, f16, i32, i8, u8).
std::optional<dnnl::memory::data_type> dnnl_type(DType t);

dnnl::memory::dims to_dims(const Shape& s);

// Dense row-major descriptor of a shape (rank 1..DNNL_MAX_NDIMS, oneDNN dtype); nullopt otherwise.
std::optional<dnnl::memory::desc> plain_desc(const Shape& s, DType t);

// The instruction set oneDNN uses on this CPU (dnnl::get_effective_cpu_isa(): the CPU's own,
// capped by ONEDNN_MAX_CPU_ISA), e.g. "avx512_core_bf16".
std::string cpu_isa_name();

// True when oneDNN computes bf16 with native instructions here (avx512_bf16, or AMX-BF16);
// elsewhere its bf16 kernels emulate them (slower than f32). Decides the default of the
// property inference_precision.
bool native_bf16();

}  // namespace kiln::cpu
