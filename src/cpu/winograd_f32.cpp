#include "cpu/winograd_f32.hpp"

#include <omp.h>

#include <algorithm>

#include "cpu/gemm_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/work_share.hpp"
#include "cpu/simd_avx2.hpp"

namespace kiln::cpu::winograd_f32 {

namespace {

constexpr int64_t kLanes = 8;  // channels per vector: a block of nChw8c, half of one of nChw16c
constexpr int kTile = 6;       // input tile; output tile 4

int64_t round8(int64_t c) { return (c + kLanes - 1) / kLanes * kLanes; }

// Where the 8 channels [8 q, 8 q + 8) of image n start in a tensor of `channels` channels and
// `pixels` pixels in blocks of `block` (8 or 16) channels; pixel p is `block` floats further on.
int64_t lanes_at(int64_t block, int64_t channels, int64_t pixels, int64_t n, int64_t q) {
  const int64_t blocks = (channels + block - 1) / block, b = q * kLanes / block;
  return (n * blocks + b) * pixels * block + q * kLanes % block;
}

int64_t tile_count(const Geometry& g) { return g.batch * ((g.oh + 3) / 4) * ((g.ow + 3) / 4); }

// Tiles per block of work: whole 6-row GEMM blocks of 6, 12 or 18 tiles (16 at most where in
// and out channels pass 256), or the tiles split evenly over the team if fewer; of those, the
// one whose busiest thread has the least to do, a block counting 3 tiles more for its 36 GEMM
// calls and its weights. A block's transformed inputs and products (36 x tiles x (in + out)
// floats) stay a little over L2 at most.
// Measured on AVX2 (nChw8c; AMD Zen 2, 512 KiB of L2 a core; one convolution, 2 threads, tiles
// per block forced): 12 or 18 tiles were the fastest at every size measured. The rule used
// before, one block per thread where the weights pass 1 MiB (read once per thread instead of
// once per small block) or 48 tiles, ran 1.3-1.7x their time: GoogLeNet's 64 -> 192 over [2, 64,
// 50, 52], 174 tiles, 3.3-3.8 ms against 2.2 at 18; SqueezeNet's 16 -> 64 0.42 against 0.31 ms;
// the recogniser's 128 -> 256 layer 1.82-1.85 at 12 against 1.86-1.94. GoogLeNet's inception 4
// at batch 1 (16 tiles) is two blocks of 8, not one that leaves a thread idle (0.956x the
// model's time), at batch 2 two of 16 (0.34 against 0.37-0.40 ms for 8 or 12); 98 tiles are
// blocks of 12, not 13 (1.15x the time: a GEMM's 1-row tail). On AVX-512 (nChw16c; AMD Zen 4,
// 1 MiB of L2 a core) the same: GoogLeNet's 64 -> 192 at [2, 3, 200, 208] took 2.4 ms a run
// against 3.1 by the old rule (60 tiles a block).
int64_t tiles_per_block(const Geometry& g, int threads) {
  const int64_t icp = round8(g.ic), ocp = round8(g.oc);
  const int64_t most = icp + ocp <= 256 ? 18 : 16, tiles = tile_count(g), team = std::max(threads, 1);
  const int64_t even = (tiles + team - 1) / team;
  int64_t best = std::min(even, most), best_load = -1;
  for (int64_t tb : {even, int64_t{6}, int64_t{12}, int64_t{18}}) {
    if (tb > most || tb < 1) continue;
    const int64_t blocks = (tiles + tb - 1) / tb, load = (blocks + team - 1) / team * (tb + 3);
    if (best_load < 0 || load < best_load || (load == best_load && tb > best)) best = tb, best_load = load;
  }
  return best;
}

size_t slice_floats(const Geometry& g, int threads) {
  const int64_t icp = round8(g.ic), ocp = round8(g.oc), tb = tiles_per_block(g, threads);
  return static_cast<size_t>((36 * tb * (icp + ocp) + 15) / 16 * 16);  // 64-byte multiples
}

// B^T x over six vectors (the input transform along one axis), F(4x4, 3x3)'s points 0, +-1, +-2.
KILN_AVX2 inline void bt6(const __m256 x[6], __m256 r[6]) {
  const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f);
  r[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, x[2], _mm256_mul_ps(four, x[0])), x[4]);
  r[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(x[1], x[2]), _mm256_add_ps(x[3], x[4]));
  r[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(x[1], x[2]), _mm256_sub_ps(x[4], x[3]));
  r[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
  r[4] = _mm256_fnmadd_ps(two, _mm256_sub_ps(x[3], x[1]), _mm256_sub_ps(x[4], x[2]));
  r[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, x[3], _mm256_mul_ps(four, x[1])), x[5]);
}

// A^T m over six vectors (the output transform along one axis): four results.
KILN_AVX2 inline void at6(const __m256 m[6], __m256 r[4]) {
  const __m256 d12 = _mm256_sub_ps(m[1], m[2]), s12 = _mm256_add_ps(m[1], m[2]);
  const __m256 d34 = _mm256_sub_ps(m[3], m[4]), s34 = _mm256_add_ps(m[3], m[4]);
  r[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  r[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d34, d12);
  r[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), s34, s12);
  r[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d34, d12), m[5]);
}

struct TileAt {
  int64_t n, y0, x0;  // image, first output row and column
};

TileAt tile_at(const Geometry& g, int64_t t) {
  const int64_t th = (g.oh + 3) / 4, tw = (g.ow + 3) / 4;
  const int64_t n = t / (th * tw), r = t % (th * tw);
  return {n, r / tw * 4, r % tw * 4};
}

// Tiles [t0, t0 + count) of the input, transformed: v[k][tile][icp] for the 36 positions k.
KILN_AVX2 void transform_inputs(const Geometry& g, const float* src, int64_t t0, int64_t count, int64_t tb, float* v) {
  const int64_t icp = round8(g.ic), blocks = icp / kLanes, step = g.block;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t l = 0; l < count; ++l) {
    const TileAt at = tile_at(g, t0 + l);
    const int64_t h0 = at.y0 - g.pad_t, w0 = at.x0 - g.pad_l;
    const bool inside = h0 >= 0 && w0 >= 0 && h0 + kTile <= g.ih && w0 + kTile <= g.iw;
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const float* plane = src + lanes_at(g.block, g.ic, g.ih * g.iw, at.n, cb);
      __m256 d[kTile][kTile], t[kTile][kTile];
      for (int i = 0; i < kTile; ++i)
        for (int j = 0; j < kTile; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          d[i][j] = inside || (h >= 0 && h < g.ih && w >= 0 && w < g.iw)
                        ? _mm256_loadu_ps(plane + (h * g.iw + w) * step)
                        : zero;
        }
      for (int j = 0; j < kTile; ++j) {  // along the rows: t[.][j] = B^T d[.][j]
        __m256 col[kTile], r[kTile];
        for (int i = 0; i < kTile; ++i) col[i] = d[i][j];
        bt6(col, r);
        for (int i = 0; i < kTile; ++i) t[i][j] = r[i];
      }
      for (int i = 0; i < kTile; ++i) {  // along the columns: v = t B
        __m256 r[kTile];
        bt6(t[i], r);
        for (int j = 0; j < kTile; ++j) _mm256_storeu_ps(v + ((i * kTile + j) * tb + l) * icp + cb * kLanes, r[j]);
      }
    }
  }
}

// The products m[k][tile][ocp] of tiles [t0, t0 + count) back to 4x4 outputs, with the bias, the
// sum (dst's value added) and the ReLU, into dst (rows and columns past the output cut).
KILN_AVX2 void transform_outputs(const Geometry& g, const float* m, const float* bias, int64_t t0, int64_t count,
                                 int64_t tb, float* dst) {
  const int64_t ocp = round8(g.oc), blocks = ocp / kLanes, step = g.block;
  // nChw16c with a last block half used: its upper 8 lanes are padding, which must read 0
  const bool pad_half = g.block == 16 && ocp % 16 != 0;
  const __m256 alpha = _mm256_set1_ps(g.relu_alpha), zero = _mm256_setzero_ps();
  for (int64_t l = 0; l < count; ++l) {
    const TileAt at = tile_at(g, t0 + l);
    const int64_t rows = std::min<int64_t>(4, g.oh - at.y0), cols = std::min<int64_t>(4, g.ow - at.x0);
    for (int64_t ob = 0; ob < blocks; ++ob) {
      __m256 s[4][kTile];
      for (int j = 0; j < kTile; ++j) {  // along the rows
        __m256 col[kTile], r[4];
        for (int i = 0; i < kTile; ++i) col[i] = _mm256_loadu_ps(m + ((i * kTile + j) * tb + l) * ocp + ob * kLanes);
        at6(col, r);
        for (int a = 0; a < 4; ++a) s[a][j] = r[a];
      }
      __m256 b = zero;
      if (bias) b = simd::v_load8(bias + ob * kLanes, g.oc - ob * kLanes);  // padded lanes: 0
      float* plane = dst + (g.dst_image ? at.n * g.dst_image + lanes_at(g.block, g.oc, g.oh * g.ow, 0, ob)
                                        : lanes_at(g.block, g.oc, g.oh * g.ow, at.n, ob));
      for (int64_t a = 0; a < rows; ++a) {
        __m256 r[4];
        at6(s[a], r);
        for (int64_t c = 0; c < cols; ++c) {
          float* out = plane + ((at.y0 + a) * g.ow + at.x0 + c) * step;
          __m256 y = _mm256_add_ps(r[c], b);
          if (g.sum) y = _mm256_add_ps(y, _mm256_loadu_ps(out));  // padded lanes: 0 + 0
          if (g.relu) y = _mm256_fmadd_ps(alpha, _mm256_min_ps(y, zero), _mm256_max_ps(y, zero));
          _mm256_storeu_ps(out, y);
          if (pad_half && ob == blocks - 1) _mm256_storeu_ps(out + kLanes, zero);
        }
      }
    }
  }
}

}  // namespace

bool available() { return isa_at_least(Isa::avx2) && gemm_f32::available(); }

// AVX-512: its GEMMs on 16 lanes, in nChw16c (the transforms take 8 channels at a time either way)
const char* impl_name() { return isa_at_least(Isa::avx512_core) ? "kiln_wino_4x3:avx512_core_f32" : "kiln_wino_4x3:avx2_f32"; }

bool pays(const Geometry& g, bool against_im2col) {
  // Per layer against oneDNN's jit:avx2 direct kernel (AMD Zen 3, 2 threads, `-pc`, median of 2):
  // ResNet-50 56x56 and 28x28 layers 0.42-0.49 of its time, 14x14 with 256 channels 0.68-0.71,
  // 7x7 with 512 1.69; GoogLeNet 56x56 and 28x28 with 64-128 channels in 0.54-0.58, 28x28 with
  // 16 or 32 in 1.09-1.66, 14x14 0.94-0.99 (96-208 in) and 1.45-1.57 (16-32 in), 7x7 1.8-2.1;
  // DenseNet-121 (128 -> 32) 56x56 0.63, 28x28 0.93-0.99, 14x14 and 7x7 1.7-2.4; the recogniser
  // ([1, 32..128, 24..6, W]) 0.6-0.9. Few tiles make small GEMMs that read all 36 transformed
  // weight matrices for little work; few input channels leave the transforms' cost unpaid.
  // With AVX-512 (nChw16c) the same rule (AMD Zen 4, 2 threads, in the model at a shape's
  // graph before it turns hot, 12 inferences): against oneDNN's Winograd and direct kernels,
  // each made for every new shape, SqueezeNet-1.1's expansions at [1, 3, 176, 232] 0.67 ms
  // against 1.25 (its 16 -> 64 and 32 -> 128, refused by the rule AVX-512 had before: 32 input
  // channels at least, and 128 channels or 250 tiles); GoogLeNet level. (That rule came from
  // the recogniser's layers against oneDNN's jit_wino_4x3 alone, one shape at a time: 128 ->
  // 128 and 128 -> 256 0.92-0.98 of its time, 64 -> 128 1.07 at 150 tiles, 32 -> 64 1.19 at
  // 150; what a new shape's kernels cost to make and to bring into cache was not counted.)
  // AVX2 (AMD Zen 2, 2 threads, in the model at [2, 3, 200, 208], 12 inferences, against kiln's
  // im2col GEMM that a new shape's window takes, or oneDNN's direct kernel below 48 outputs):
  // SqueezeNet-1.1's 16 -> 64 over 338 tiles 0.82 of its time, 32 -> 128 over 84 0.62;
  // GoogLeNet's 32 -> 96 over 98 0.82, but its 16 -> 32 1.7: few outputs leave the input
  // transform unpaid. Against the im2col GEMM only: GoogLeNet's inception 4 (96-160 -> 208-320
  // over 13 x 13, 32 tiles) 0.56-0.69, at [1, 3, 232, 200] (14 x 12, 12 tiles) 0.77-0.93 (its
  // inception 5, 7 x 7 over 8 tiles, 1.4-1.6: GEMMs of 8 rows); against oneDNN's direct kernel
  // (fixed shapes, 224 x 224, 16 tiles) GoogLeNet level, SqueezeNet-1.1's 64 -> 256 over 13 x 13
  // 1.06 of the whole model's time.
  const int64_t tiles = tile_count(g), fewer = std::min(g.ic, g.oc);
  if (g.ic >= 16 && g.ic < 64 && g.oc >= 64 && tiles >= 40) return true;
  if (g.ic < 32 || g.oc < 32) return false;
  if (against_im2col && tiles >= 12 && fewer >= 64) return true;
  return tiles >= 100 || (tiles >= 40 && g.ic >= 64) || (tiles >= 16 && fewer >= 256);
}

size_t weights_floats(int64_t ic, int64_t oc) {
  return 36 * static_cast<size_t>(gemm_f32::packed_size(round8(ic), round8(oc)));
}

void transform_weights(const float* w, int64_t ic, int64_t oc, float* out) {
  const int64_t icp = round8(ic), ocp = round8(oc);
  const int64_t packed = gemm_f32::packed_size(icp, ocp), width = gemm_f32::group_width();
  // U = G g G^T per (oc, ic), each of its 36 values written straight where gemm_f32::pack_b puts
  // element (ic, oc) of its plane, the padding zeros first. (Through a [36][icp][ocp] copy packed
  // afterwards it took 13 ms for a 256 x 256 layer, the copy's 9.4 MB faulted in and zeroed,
  // paid by the first shape that takes Winograd for the layer; by output channel first, the
  // writes went 36 planes apart one float at a time: 25 ms.)
  static const double G[6][3] = {{1.0 / 4, 0, 0},
                                 {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                 {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                 {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                 {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                 {0, 0, 1}};
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < 36; ++k) std::fill(out + k * packed, out + (k + 1) * packed, 0.0f);
  // input channels shared by the team, output channels inner: runs of a group's width in each plane
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < ic; ++i)
    for (int64_t o = 0; o < oc; ++o) {
      const float* k = w + (o * ic + i) * 9;
      double gk[6][3];  // G g
      for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 3; ++c) gk[r][c] = G[r][0] * k[c] + G[r][1] * k[3 + c] + G[r][2] * k[6 + c];
      float* at = out + gemm_f32::packed_offset(icp, i, o, width);
      for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 6; ++c)
          at[(r * 6 + c) * packed] = static_cast<float>(gk[r][0] * G[c][0] + gk[r][1] * G[c][1] + gk[r][2] * G[c][2]);
    }
}

size_t scratch_bytes(const Geometry& g, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) * slice_floats(g, std::max(threads, 1)) * sizeof(float);
}

void run(const Geometry& g, const float* src, const float* weights, const float* bias, float* dst, void* scratch,
         int threads) {
  threads = std::max(threads, 1);  // as scratch_bytes sized the slices
  const int64_t icp = round8(g.ic), ocp = round8(g.oc), tb = tiles_per_block(g, threads);
  const int64_t tiles = tile_count(g), blocks = (tiles + tb - 1) / tb;
  const int64_t packed = gemm_f32::packed_size(icp, ocp);
  const size_t slice = slice_floats(g, threads);
  const int team = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(threads, omp_get_max_threads()), 1, blocks));
  const gemm_f32::Epilogue plain;
  WorkShare shared(blocks, team);  // each thread its blocks of tiles, then the others' last ones
#pragma omp parallel num_threads(team)
  {
    const int me = omp_get_thread_num();
    float* v = static_cast<float*>(scratch) + static_cast<size_t>(me) * slice;
    float* m = v + 36 * tb * icp;
    shared.run(me, [&](int64_t b) {
      const int64_t t0 = b * tb, count = std::min(tb, tiles - t0);
      transform_inputs(g, src, t0, count, tb, v);
      for (int64_t k = 0; k < 36; ++k)
        gemm_f32::run_serial(v + k * tb * icp, count, icp, icp, weights + k * packed, ocp, m + k * tb * ocp, ocp, plain);
      transform_outputs(g, m, bias, t0, count, tb, dst);
    });
  }
}

}  // namespace kiln::cpu::winograd_f32
