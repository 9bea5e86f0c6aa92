#pragma once
// kiln's scaled dot-product attention for Attention nodes wherever the CPU runs it: the sequence
// lengths are call arguments, so nothing is made per shape (oneDNN 2.6 makes two matmul
// primitives and a softmax for every new length: BERT-6 paid 0.87 ms per new length), and it
// runs about twice as fast as those three primitives (BERT-6, L = 64).
// Per (batch, query head, run of query rows), on one thread of the team (a head's rows split
// into runs where the heads are too few for the team to share evenly):
//   K^T of its kv head packed in the GEMM's panels, times the scale (16x16 transposes)
//   keys at the end that the mask removes from every row of the item dropped (a padded batch:
//   attended_keys; their probabilities would be exactly 0: the same result, but for the order
//   in which gemm_f32 sums the other keys' terms, which follows their count)
//   scores[rows, T] = Q K^T                       (gemm_f32::run_serial)
//   scores += mask (float, or bool: false -> -inf), causal keys -> -inf
//   softmax over T in place; a row with every key masked becomes zeros (as ONNX wants);
//   the probabilities quantized and dequantized when the model does (ProbsQuant); on AVX2
//   without that, the rows stay e^(x - max) and Y's rows are scaled by 1 / sum instead
//   Y[rows, Dv] = scores V                        (V packed the same way, gemm_f32::run_serial)
// Q / K / V / Y packed [B, seq, heads * size] or [B, heads, seq, size]; query head h reads kv
// head h / (Hq / Hkv). AVX-512, or AVX2 (8-lane transposes and softmax; gemm_f32 picks its own
// kernel) where the CPU has no AVX-512 (available()); below AVX2 oneDNN runs the node. No softcap.
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::attention_f32 {

// The probabilities quantized to 8 bits and back (a QDQ model's QuantizeLinear ->
// DequantizeLinear between Softmax and the second MatMul): p = (clamp(round_half_even(p / scale)
// + zero_point, qmin, qmax) - zero_point) * scale, as those two ops compute it in f32.
struct ProbsQuant {
  bool on = false;
  float scale = 1.0f, zero_point = 0.0f, qmin = 0.0f, qmax = 255.0f;
  float apply(float p) const;  // the scalar form, for the other kernels and tests
};

struct Geometry {
  int64_t B = 0, Hq = 0, Hkv = 0, S = 0, T = 0, D = 0, Dv = 0;
  bool packed = true;  // [B, seq, heads * size]; else [B, heads, seq, size]
  float scale = 1.0f;
  bool causal = false;  // key t > query s masked (no past keys)
  ProbsQuant probs;     // off: the probabilities stay f32
  // Keys at the end of the sequence whose probabilities are provably exactly 0 for every query
  // row are left out of the products and the softmax (attended_keys); off: every key computed
  // (the same results to rounding: tests compare the two)
  bool skip_masked_keys = true;
};

// A mask broadcast to [B, Hq, S, T] from `dims` (each 1 or the full size); null data: none.
struct Mask {
  const void* data = nullptr;
  bool boolean = false;  // bytes, true = attend; else f32 added to the scores
  int64_t dims[4] = {1, 1, 1, 1};
};

// Whether the ISA in use (cpu/isa.hpp, with its cap) runs the kernel.
bool available();
// The implementation name profiles show.
const char* impl_name();

// Working memory for a team of `threads`.
size_t scratch_bytes(const Geometry& g, int threads);

// Runs on the calling thread's OpenMP team (at most `threads` of it: the count scratch_bytes
// was asked for). available() must hold.
void run(const Geometry& g, const float* q, const float* k, const float* v, const Mask& mask, float* y, void* scratch,
         int threads);

// How many keys, from the start, the query rows [s0, s1) of head h of batch b compute: T, less the
// keys at the end whose probabilities are exactly 0 in every one of those rows (a padded batch's
// mask), 0 when no row attends to any key. A mask of a row per key ([.., .., 1 or S, T]; no other
// broadcast) drops the keys that every row of the item drops:
//   bool: the keys after a row's last true one (their scores are -inf);
//   float: the trailing keys whose mask is at least 104 + 2 D |scale| max|q| max|k| (plus the
//   rounding of the additions) below the row's largest mask value: a key there scores at least 104
//   below that key's, and e^-104 is 0 in f32. Not with a causal limit (the largest-mask key may be
//   in the future of a row), nor where a value is not finite;
//   both: the dropped keys' V rows finite (0 * inf would be NaN), quantized probabilities keep 0.
int64_t attended_keys(const Geometry& g, const float* q, const float* k, const float* v, const Mask& mask, int64_t b,
                      int64_t h, int64_t s0, int64_t s1);

// For tests: out[j * ld_out + i] = alpha * in[i * ld_in + j], i < rows, j < cols, as the
// K^T packing does it.
void transpose(const float* in, int64_t rows, int64_t cols, int64_t ld_in, float alpha, float* out, int64_t ld_out);

}  // namespace kiln::cpu::attention_f32
