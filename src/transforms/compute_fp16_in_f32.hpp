#pragma once
// ComputeFp16InF32: a model stored in half precision computes in f32, as the CPU plugin's
// ConvertPrecision(f16 -> f32) and ONNX Runtime's CPU InsertCastTransformer do for a CPU
// without fp16 arithmetic. Such models come from float16 converters: weights in fp16, a Cast
// to fp16 after each f32 input, the network in fp16, a Cast back to f32 before each output,
// with a few ops kept in f32 between Cast pairs. Without this pass every fp16 op runs on the
// reference kernels.
//
//   every fp16 value inside the graph   -> f32 (fp16 constants converted once, exactly)
//   Cast(to = FLOAT16)                   -> Cast(to = FLOAT): an identity RemoveIdentityOps drops
//   ConstantOfShape / Constant / EyeLike / Random* making fp16 -> make f32
//   an fp16 graph input                  stays fp16; a Cast to f32 after it feeds its readers
//   an fp16 graph output                 stays fp16 under its name; a Cast to fp16 makes it
//
// Numerics: the ops compute in f32 instead of rounding each result to fp16, so results move by
// fp16 rounding (about 1e-3 relative) towards the exact ones, as they do in ONNX Runtime.
// Not applied (logged as skipped) when the graph holds no fp16 value, or holds If / Loop / Scan
// bodies (they read outer values by name, which would change type under them).
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kComputeFp16InF32 = "ComputeFp16InF32";

// Returns the number of fp16 values (including constants) made f32; `log` may be null.
size_t compute_fp16_in_f32(ir::Graph& g, PassLog* log);

// Whether any input, constant or node output of `g` is fp16 (the pass has work).
bool has_fp16_values(const ir::Graph& g);

}  // namespace kiln::transforms
