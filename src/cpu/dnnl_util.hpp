#pragma once
// oneDNN glue: the process-wide CPU engine, dtype mapping, plain (row-major) descriptors,
// padded layouts.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

namespace kiln::cpu {

// The process's CPU engine. Its first use applies KILN_MAX_CPU_ISA (cpu/isa.hpp) to oneDNN,
// and throws kiln::Error for a bad value of it.
dnnl::engine& cpu_engine();

// oneDNN's data type for a kiln dtype, if oneDNN has one (f32, bf16, f16, i32, i8, u8).
std::optional<dnnl::memory::data_type> dnnl_type(DType t);

dnnl::memory::dims to_dims(const Shape& s);

// Dense row-major descriptor of a shape (rank 1..DNNL_MAX_NDIMS, oneDNN dtype); nullopt otherwise.
std::optional<dnnl::memory::desc> plain_desc(const Shape& s, DType t);

// True when a layout pads some dim (e.g. 17 channels in nChw16c hold 32): the padding
// must stay zero, and some oneDNN 2.6 kernels mishandle the last, partial block.
bool has_padding(const dnnl::memory::desc& d);

}  // namespace kiln::cpu
