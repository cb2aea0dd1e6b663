/* KEPGATConv's SVGP sample on CPU in float32 (ikgat/nn/svgp_sample.py):
 * one branch's draw F and its backward pass in one loop over blocks of LANES
 * nodes per head, the means and spreads y = v^T W in registers, nothing of
 * size nodes x (C + C s) in memory.  Notation of the Python module's
 * docstring: scores v [N, H, s] (rows ldv apart), W [H, s, K] with
 * K = C + C s (the means' C columns, then each channel's s spread columns),
 * the noise sigma eps and G = dL/dF [N, H, C] (rows lde and ldg apart).
 * Each call covers the heads [h0, h1), so that threads can share the heads
 * of one call without touching each other's outputs.  The loader is
 * ikgat/ops/native.py, the bindings ikgat/ops/svgp_sample_native.py. */
#include <stdlib.h>

/* Nodes a block: one AVX-512 vector of floats. */
#define LANES 16
/* The largest rank s and channel count C a call takes. */
#define MAX_RANK 32
#define MAX_CHANNELS 64
/* The smallest positive float32: |u| is clamped to it where it divides. */
#define TINY 1.17549435e-38f
/* Nodes whose rows (all heads) stay in the L2 cache while the backward pass
 * takes each head in turn, each with its own sums; the forward pass takes
 * all heads of a block before the next. */
#define SPAN 512

void ikgat_svgp_limits(int *max_rank, int *max_channels) {
  *max_rank = MAX_RANK;
  *max_channels = MAX_CHANNELS;
}

/* Rows n0 .. n0 + LANES of a [N, H, width] array (rows ld apart) at head h,
 * transposed: out[k][i] (zero past N). */
static void load_rows(const float *p, long ld, long width, long N, long h,
                      long n0, float out[][LANES]) {
  for (long k = 0; k < width; k++)
    for (long i = 0; i < LANES; i++)
      out[k][i] = n0 + i < N ? p[(n0 + i) * ld + h * width + k] : 0.f;
}

static void store_rows(float *p, long ld, long width, long N, long h,
                       long n0, float in[][LANES]) {
  for (long i = 0; i < LANES && n0 + i < N; i++)
    for (long k = 0; k < width; k++) p[(n0 + i) * ld + h * width + k] = in[k][i];
}

#define INLINE static inline __attribute__((always_inline))
/* Written once for any s and C, compiled again with s = C = 8 (the layer's
 * default rank and GAT's 8 channels a head) so that the loops unroll. */
#define SPECIALISED(call, S, C, ...)             \
  if ((S) == 8 && (C) == 8) return call(__VA_ARGS__, 8, 8); \
  return call(__VA_ARGS__, S, C);

/* F[n, h, d] = y_d + |u_d| eps_d, y_k = sum_a v_a W[h, a, k], u_d the
 * spread columns C + d s .. C + (d + 1) s of y. */
INLINE int forward(const float *v, long ldv, const float *w, const float *eps,
                   long lde, float *out, long N, long H, long h0, long h1,
                   long S, long C) {
  const long K = C + C * S;
  float vb[MAX_RANK][LANES], eb[MAX_CHANNELS][LANES], ob[MAX_CHANNELS][LANES];
  for (long n0 = 0; n0 < N; n0 += LANES)
    for (long h = h0; h < h1; h++) {
      const float *wh = w + h * S * K;
      load_rows(v, ldv, S, N, h, n0, vb);
      load_rows(eps, lde, C, N, h, n0, eb);
      for (long d = 0; d < C; d++) {
        float mean[LANES], ss[LANES];
#pragma omp simd
        for (int i = 0; i < LANES; i++) mean[i] = ss[i] = 0.f;
        for (long a = 0; a < S; a++) {
          const float m = wh[a * K + d];
#pragma omp simd
          for (int i = 0; i < LANES; i++) mean[i] += m * vb[a][i];
        }
        for (long j = 0; j < S; j++) {
          const float *wk = wh + C + d * S + j;
          float u[LANES];
#pragma omp simd
          for (int i = 0; i < LANES; i++) u[i] = 0.f;
          for (long a = 0; a < S; a++) {
            const float l = wk[a * K];
#pragma omp simd
            for (int i = 0; i < LANES; i++) u[i] += l * vb[a][i];
          }
#pragma omp simd
          for (int i = 0; i < LANES; i++) ss[i] += u[i] * u[i];
        }
#pragma omp simd
        for (int i = 0; i < LANES; i++)
          ob[d][i] = mean[i] + __builtin_sqrtf(ss[i]) * eb[d][i];
      }
      store_rows(out, H * C, C, N, h, n0, ob);
    }
  return 0;
}

/* dL/dy = [G | G eps u_d / |u_d|] (the spreads computed again), then
 * dL/dv_a = sum_k W[h, a, k] dL/dy_k (written) and, summed over the nodes,
 * dL/dW[h, a, k] += v_a dL/dy_k (lane-wise in a scratch buffer, added to
 * the output at the end).  Returns 0, or 1 where the buffer could not be
 * allocated. */
INLINE int backward(const float *v, long ldv, const float *w,
                    const float *eps, long lde, const float *g, long ldg,
                    float *grad_v, float *grad_w, long N, long H, long h0,
                    long h1, long S, long C) {
  const long K = C + C * S;
  float vb[MAX_RANK][LANES], gvb[MAX_RANK][LANES];
  float eb[MAX_CHANNELS][LANES], gb[MAX_CHANNELS][LANES];
  float (*all_sums)[LANES] =
      malloc(sizeof(float[LANES]) * S * K * (h1 - h0));
  if (all_sums == NULL) return 1;
  for (long k = 0; k < S * K * (h1 - h0); k++)
    for (int i = 0; i < LANES; i++) all_sums[k][i] = 0.f;
  for (long span = 0; span < N; span += SPAN)
    for (long h = h0; h < h1; h++) {
      const float *wh = w + h * S * K;
      float (*sums)[LANES] = all_sums + (h - h0) * S * K;
      for (long n0 = span; n0 < N && n0 < span + SPAN; n0 += LANES) {
        load_rows(v, ldv, S, N, h, n0, vb);
        load_rows(eps, lde, C, N, h, n0, eb);
        load_rows(g, ldg, C, N, h, n0, gb);
        for (long a = 0; a < S; a++)
          for (int i = 0; i < LANES; i++) gvb[a][i] = 0.f;
        for (long d = 0; d < C; d++) {
          /* The mean's column: dL/dy_d = G_d. */
          for (long a = 0; a < S; a++) {
            const float m = wh[a * K + d];
            float *sum = sums[a * K + d];
#pragma omp simd
            for (int i = 0; i < LANES; i++) {
              gvb[a][i] += m * gb[d][i];
              sum[i] += vb[a][i] * gb[d][i];
            }
          }
          /* The spread's columns: u again, then G eps u / |u|. */
          float u[MAX_RANK][LANES], ss[LANES], scale[LANES];
#pragma omp simd
          for (int i = 0; i < LANES; i++) ss[i] = 0.f;
          for (long j = 0; j < S; j++) {
            const float *wk = wh + C + d * S + j;
#pragma omp simd
            for (int i = 0; i < LANES; i++) u[j][i] = 0.f;
            for (long a = 0; a < S; a++) {
              const float l = wk[a * K];
#pragma omp simd
              for (int i = 0; i < LANES; i++) u[j][i] += l * vb[a][i];
            }
#pragma omp simd
            for (int i = 0; i < LANES; i++) ss[i] += u[j][i] * u[j][i];
          }
#pragma omp simd
          for (int i = 0; i < LANES; i++) {
            const float norm = __builtin_sqrtf(ss[i]);
            scale[i] = gb[d][i] * eb[d][i] / (norm > TINY ? norm : TINY);
          }
          for (long j = 0; j < S; j++) {
            const long k = C + d * S + j;
            float dy[LANES];
#pragma omp simd
            for (int i = 0; i < LANES; i++) dy[i] = u[j][i] * scale[i];
            for (long a = 0; a < S; a++) {
              const float l = wh[a * K + k];
              float *sum = sums[a * K + k];
#pragma omp simd
              for (int i = 0; i < LANES; i++) {
                gvb[a][i] += l * dy[i];
                sum[i] += vb[a][i] * dy[i];
              }
            }
          }
        }
        store_rows(grad_v, H * S, S, N, h, n0, gvb);
      }
    }
  for (long h = h0; h < h1; h++)
    for (long k = 0; k < S * K; k++) {
      float s = 0.f;
      for (int i = 0; i < LANES; i++) s += all_sums[(h - h0) * S * K + k][i];
      grad_w[h * S * K + k] += s;
    }
  free(all_sums);
  return 0;
}

int ikgat_svgp_forward(const float *v, long ldv, const float *w,
                       const float *eps, long lde, float *out, long N, long H,
                       long S, long C, long h0, long h1) {
  SPECIALISED(forward, S, C, v, ldv, w, eps, lde, out, N, H, h0, h1)
}

int ikgat_svgp_backward(const float *v, long ldv, const float *w,
                        const float *eps, long lde, const float *g, long ldg,
                        float *grad_v, float *grad_w, long N, long H, long S,
                        long C, long h0, long h1) {
  SPECIALISED(backward, S, C, v, ldv, w, eps, lde, g, ldg, grad_v, grad_w, N,
              H, h0, h1)
}
