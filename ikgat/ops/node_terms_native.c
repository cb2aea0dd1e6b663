/* The node terms of ikgat.ops.node_terms on CPU in float32 (and, at the end,
 * the feature tables of ikgat.ops.edge_fourier's transformers): one loop over
 * blocks of LANES nodes per head, the angles, their cosines and sines (glibc's
 * vector functions, libmvec) and every sum over them in registers and the L1
 * cache, nothing of size nodes x angles in memory.  The formulas and
 * notation are those of ikgat/ops/node_terms.py's module docstring; the
 * loader is ikgat/ops/native.py, the bindings ikgat/ops/node_terms_native.py.
 *
 * Layouts (contiguous, row-major): x [N, H, C]; points u [H, A, C]
 * (A = m R angles a node and head, the sets one after the other); the anchor
 * features tiled over the sets, cw = A^c and sw = A^s [H, T, A]; f and
 * G = kappa dL/df [N, H, T].  Each call covers the heads [h0, h1), so that
 * threads can share the heads of one call without touching each other's
 * outputs.
 *
 * The cosines and sines are polynomials inlined in the loop (sin_cos below)
 * for every angle up to POLY_LIMIT in magnitude, glibc's vector functions
 * (libmvec) for a group with a larger angle or a NaN.  No math library
 * header: cosf and sinf are declared with their SIMD variants
 * (_ZGV*_cosf, _ZGV*_sinf), so that the compiler vectorises the calls without
 * -ffast-math, whose assumptions of no NaN would let it change how NaN
 * inputs propagate. */
#include <stdlib.h>

#pragma omp declare simd notinbranch
extern float cosf(float);
#pragma omp declare simd notinbranch
extern float sinf(float);

/* Nodes a block: one AVX-512 vector of floats. */
#define LANES 16
/* The most channels C and slopes T a call takes (ikgat_node_terms_limits). */
#define MAX_CHANNELS 64
#define MAX_SLOPES 4
/* The most points a set R that a feature table (below) takes. */
#define MAX_POINTS 64

void ikgat_node_terms_limits(int *max_channels, int *max_slopes,
                             int *max_points) {
  *max_channels = MAX_CHANNELS;
  *max_slopes = MAX_SLOPES;
  *max_points = MAX_POINTS;
}

/* The block's node coordinates xb[c][i] = x[n0 + i, h, c] (zero past n). */
static void load_block(const float *x, long H, long C, long N, long h,
                       long n0, float xb[][LANES]) {
  for (long c = 0; c < C; c++)
    for (long i = 0; i < LANES; i++)
      xb[c][i] = n0 + i < N ? x[((n0 + i) * H + h) * C + c] : 0.f;
}

/* The kernels are written once for any C and T (below) and compiled again
 * for the common sizes with C and T constants, so that the loops over the
 * channels and slopes unroll: T = 2 (GAT's two slopes) and C = 8 to 64 by
 * powers of two.  At C = 8 the forward pass took 1.07 against 1.45 ns an
 * angle, the backward pass 2.65 against 3.13 (Cora's size, one thread). */
#define INLINE static inline __attribute__((always_inline))
#define SPECIALISED(call, C, T, ...)                                        \
  switch ((T) == 2 ? (C) : 0) {                                             \
    case 8: return call(__VA_ARGS__, 8, 2);                                 \
    case 16: return call(__VA_ARGS__, 16, 2);                               \
    case 32: return call(__VA_ARGS__, 32, 2);                               \
    case 64: return call(__VA_ARGS__, 64, 2);                               \
    default: return call(__VA_ARGS__, C, T);                                \
  }

/* sin t and cos t, one range reduction for both: t = k pi/2 + r with
 * |r| <= pi/4 (pi/2 in three parts, each product with k exact for
 * |k| < 2^16), then Taylor polynomials of degree 9 and 10 in r, whose
 * truncation error at pi/4 is below 2e-9, and the quadrant k mod 4.  Absolute
 * error at most 7.1e-8 for |t| <= POLY_LIMIT (every 7th float, against sin
 * and cos in double; glibc's cosf and sinf: 3.3e-8, its vector functions
 * up to 4 ulp). */
#define POLY_LIMIT 65536.f
INLINE void sin_cos(float t, float *sin_t, float *cos_t) {
  const float round = 0x1.8p23f; /* adding it rounds to an integer */
  const float k = (t * 0x1.45f306p-1f + round) - round; /* t 2/pi */
  float r = __builtin_fmaf(-k, 1.5703125f, t);
  r = __builtin_fmaf(-k, 4.837512969970703125e-4f, r);
  r = __builtin_fmaf(-k, 7.549789954891882e-8f, r);
  const float r2 = r * r;
  float s = 1.f / 362880.f;
  s = __builtin_fmaf(s, r2, -1.f / 5040.f);
  s = __builtin_fmaf(s, r2, 1.f / 120.f);
  s = __builtin_fmaf(s, r2, -1.f / 6.f);
  s = __builtin_fmaf(s * r2, r, r);
  float c = -1.f / 3628800.f;
  c = __builtin_fmaf(c, r2, 1.f / 40320.f);
  c = __builtin_fmaf(c, r2, -1.f / 720.f);
  c = __builtin_fmaf(c, r2, 1.f / 24.f);
  c = __builtin_fmaf(c, r2, -0.5f);
  c = __builtin_fmaf(c, r2, 1.f);
  /* sin t = sin r, cos r, -sin r, -cos r and cos t = cos r, -sin r, -cos r,
   * sin r for k = 0, 1, 2, 3 mod 4. */
  const int q = (int)k;
  const float sin_r = q & 1 ? c : s, cos_r = q & 1 ? s : c;
  *sin_t = q & 2 ? -sin_r : sin_r;
  *cos_t = (q + 1) & 2 ? -cos_r : cos_r;
}

/* The cosines and sines of GROUP angles at a time (K <= GROUP: a head's last
 * group may be shorter), theta[k][i] = sum_c u[a + k, c] xb[c][i].  In
 * groups so that each load of the node block serves K angles, and so that a
 * call of the vector functions (which clobbers every vector register)
 * happens, if at all, while nothing else is live. */
#define GROUP 8
INLINE void angles(const float *ua, long K, long C, float xb[][LANES],
                   float cs[][LANES], float sn[][LANES]) {
  float theta[GROUP][LANES];
  for (long k = 0; k < K; k++)
#pragma omp simd
    for (int i = 0; i < LANES; i++) theta[k][i] = 0.f;
  for (long c = 0; c < C; c++)
    for (long k = 0; k < K; k++) {
      const float w = ua[k * C + c];
#pragma omp simd
      for (int i = 0; i < LANES; i++) theta[k][i] += w * xb[c][i];
    }
  const float *flat = theta[0];
  float *flat_cs = cs[0], *flat_sn = sn[0];
  int outside = 0; /* angles beyond POLY_LIMIT, or NaN */
#pragma omp simd reduction(+ : outside)
  for (long j = 0; j < K * LANES; j++)
    outside += !(__builtin_fabsf(flat[j]) <= POLY_LIMIT);
  if (outside == 0) {
#pragma omp simd
    for (long j = 0; j < K * LANES; j++)
      sin_cos(flat[j], &flat_sn[j], &flat_cs[j]);
    return;
  }
#pragma omp simd
  for (long j = 0; j < K * LANES; j++) flat_cs[j] = cosf(flat[j]);
#pragma omp simd
  for (long j = 0; j < K * LANES; j++) flat_sn[j] = sinf(flat[j]);
}

/* The cosines and sines of the angles a0 .. a0 + K of a head's A (K =
 * GROUP but at the end, which then runs the same code with K variable);
 * returns K. */
INLINE long group_angles(const float *uh, long a0, long A, long C,
                         float xb[][LANES], float cs[][LANES],
                         float sn[][LANES]) {
  const long K = A - a0 < GROUP ? A - a0 : GROUP;
  if (K == GROUP)
    angles(uh + a0 * C, GROUP, C, xb, cs, sn);
  else
    angles(uh + a0 * C, K, C, xb, cs, sn);
  return K;
}

/* An angle's share of the gradients from d = dL/dtheta: gxb[c] += d u_c
 * and the lane-wise sum su[c] += d xb[c] of dL/du_c. */
INLINE void add_angle_gradient(const float d[LANES], const float *ua, long C,
                               float xb[][LANES], float gxb[][LANES],
                               float su[][LANES]) {
  for (long c = 0; c < C; c++) {
    const float w = ua[c];
#pragma omp simd
    for (int i = 0; i < LANES; i++) {
      gxb[c][i] += d[i] * w;
      su[c][i] += d[i] * xb[c][i];
    }
  }
}

/* gx[n0 + i, h, c] = gxb[c][i] for the block's nodes. */
static void store_block(float *gx, long H, long C, long N, long h, long n0,
                        float gxb[][LANES]) {
  for (long i = 0; i < LANES && n0 + i < N; i++)
    for (long c = 0; c < C; c++) gx[((n0 + i) * H + h) * C + c] = gxb[c][i];
}

/* The loops over nodes and heads: a node block's rows hold every head
 * (H C floats a node), so the forward pass takes all heads of a block before
 * the next block, and the backward pass all heads of a span of SPAN nodes
 * (their rows stay in the L2 cache) before the next span, each head with
 * its own sums.  One head at a time over all nodes, PubMed's projections
 * (5 MB) came from beyond L2 once a head: its forward pass took 0.89
 * against 0.65 ns an angle, the backward 1.70 against 1.62 (one thread). */
#define SPAN 512

/* f[n, h, t] = sum_a cw[h, t, a] cos(theta) + sw[h, t, a] sin(theta). */
INLINE int forward(const float *x, const float *u, const float *cw,
                    const float *sw, float *f, long N, long H, long A,
                    long h0, long h1, long C, long T) {
  float xb[MAX_CHANNELS][LANES], acc[MAX_SLOPES][LANES];
  float cs[GROUP][LANES], sn[GROUP][LANES];
  for (long n0 = 0; n0 < N; n0 += LANES)
    for (long h = h0; h < h1; h++) {
      const float *uh = u + h * A * C, *cwh = cw + h * T * A,
                  *swh = sw + h * T * A;
      load_block(x, H, C, N, h, n0, xb);
      for (long t = 0; t < T; t++)
        for (int i = 0; i < LANES; i++) acc[t][i] = 0.f;
      for (long a0 = 0; a0 < A; a0 += GROUP) {
        const long K = group_angles(uh, a0, A, C, xb, cs, sn);
        for (long k = 0; k < K; k++)
          for (long t = 0; t < T; t++) {
            const float p = cwh[t * A + a0 + k], q = swh[t * A + a0 + k];
#pragma omp simd
            for (int i = 0; i < LANES; i++)
              acc[t][i] += p * cs[k][i] + q * sn[k][i];
          }
      }
      for (long i = 0; i < LANES && n0 + i < N; i++)
        for (long t = 0; t < T; t++) f[((n0 + i) * H + h) * T + t] = acc[t][i];
    }
  return 0;
}

/* From G: D = sum_t G_t (sw_t cos - cw_t sin) = dL/dtheta, then
 * gx[n, h, c] = sum_a D u[a, c] (written), and summed over the nodes
 * gu[h, a, c] += D x_c, gcw[h, t, a] += G_t cos, gsw[h, t, a] += G_t sin
 * (lane-wise in a scratch buffer of each head, added to the outputs at the
 * end).
 * Returns 0, or 1 where the scratch buffer could not be allocated. */
INLINE int backward(const float *x, const float *u, const float *cw,
                    const float *sw, const float *g, float *gx, float *gu,
                    float *gcw, float *gsw, long N, long H, long A, long h0,
                    long h1, long C, long T) {
  float xb[MAX_CHANNELS][LANES], gb[MAX_SLOPES][LANES];
  float gxb[MAX_CHANNELS][LANES], cs[GROUP][LANES], sn[GROUP][LANES];
  /* Lane-wise sums a head: A C for gu, then A T each for gcw and gsw. */
  const long per_head = A * (C + 2 * T);
  float (*sums)[LANES] = malloc(sizeof(float[LANES]) * per_head * (h1 - h0));
  if (sums == NULL) return 1;
  for (long k = 0; k < per_head * (h1 - h0); k++)
    for (int i = 0; i < LANES; i++) sums[k][i] = 0.f;
  for (long span = 0; span < N; span += SPAN)
    for (long h = h0; h < h1; h++) {
      const float *uh = u + h * A * C, *cwh = cw + h * T * A,
                  *swh = sw + h * T * A;
      float (*sum_u)[LANES] = sums + (h - h0) * per_head;
      float (*sum_c)[LANES] = sum_u + A * C;
      float (*sum_s)[LANES] = sum_u + A * (C + T);
      for (long n0 = span; n0 < N && n0 < span + SPAN; n0 += LANES) {
        load_block(x, H, C, N, h, n0, xb);
        for (long t = 0; t < T; t++)
          for (long i = 0; i < LANES; i++)
            gb[t][i] = n0 + i < N ? g[((n0 + i) * H + h) * T + t] : 0.f;
        for (long c = 0; c < C; c++)
          for (int i = 0; i < LANES; i++) gxb[c][i] = 0.f;
        for (long a0 = 0; a0 < A; a0 += GROUP) {
          const long K = group_angles(uh, a0, A, C, xb, cs, sn);
          for (long k = 0; k < K; k++) {
            const long a = a0 + k;
            float d[LANES];
#pragma omp simd
            for (int i = 0; i < LANES; i++) d[i] = 0.f;
            for (long t = 0; t < T; t++) {
              const float p = cwh[t * A + a], q = swh[t * A + a];
              float *sc = sum_c[t * A + a], *ss = sum_s[t * A + a];
#pragma omp simd
              for (int i = 0; i < LANES; i++) {
                d[i] += gb[t][i] * (q * cs[k][i] - p * sn[k][i]);
                sc[i] += gb[t][i] * cs[k][i];
                ss[i] += gb[t][i] * sn[k][i];
              }
            }
            add_angle_gradient(d, uh + a * C, C, xb, gxb, sum_u + a * C);
          }
        }
        store_block(gx, H, C, N, h, n0, gxb);
      }
    }
  for (long h = h0; h < h1; h++) {
    float (*sum_u)[LANES] = sums + (h - h0) * per_head;
    float (*sum_c)[LANES] = sum_u + A * C;
    float (*sum_s)[LANES] = sum_u + A * (C + T);
    for (long k = 0; k < A * C; k++) {
      float s = 0.f;
      for (int i = 0; i < LANES; i++) s += sum_u[k][i];
      gu[h * A * C + k] += s;
    }
    for (long k = 0; k < A * T; k++) {
      float s = 0.f, r = 0.f;
      for (int i = 0; i < LANES; i++) {
        s += sum_c[k][i];
        r += sum_s[k][i];
      }
      /* sum_c is ordered [t][a] as cw: k = t A + a. */
      gcw[h * T * A + k] += s;
      gsw[h * T * A + k] += r;
    }
  }
  free(sums);
  return 0;
}

/* The feature tables of ikgat.ops.edge_fourier (IKTransformerConv's
 * random-feature kernels): phi[h, n] = [sum_s cos(theta_s,r);
 * sum_s sin(theta_s,r)] for r < R, the m sets' A = m R angles side by side
 * (angle a = s R + r), written as tables [H, N, 2R]. */
INLINE int table_forward(const float *x, const float *u, float *table, long N,
                         long H, long A, long R, long h0, long h1, long C) {
  float xb[MAX_CHANNELS][LANES], cs[GROUP][LANES], sn[GROUP][LANES];
  float tc[MAX_POINTS][LANES], ts[MAX_POINTS][LANES];
  for (long n0 = 0; n0 < N; n0 += LANES)
    for (long h = h0; h < h1; h++) {
      const float *uh = u + h * A * C;
      load_block(x, H, C, N, h, n0, xb);
      for (long r = 0; r < R; r++)
#pragma omp simd
        for (int i = 0; i < LANES; i++) tc[r][i] = ts[r][i] = 0.f;
      for (long a0 = 0; a0 < A; a0 += GROUP) {
        const long K = group_angles(uh, a0, A, C, xb, cs, sn);
        for (long k = 0; k < K; k++) {
          const long r = (a0 + k) % R;
#pragma omp simd
          for (int i = 0; i < LANES; i++) {
            tc[r][i] += cs[k][i];
            ts[r][i] += sn[k][i];
          }
        }
      }
      for (long i = 0; i < LANES && n0 + i < N; i++) {
        float *row = table + (h * N + n0 + i) * 2 * R;
        for (long r = 0; r < R; r++) {
          row[r] = tc[r][i];
          row[R + r] = ts[r][i];
        }
      }
    }
  return 0;
}

/* From the tables' gradient g = [g_c; g_s]: D = cos(theta) g_s,r -
 * sin(theta) g_c,r = dL/dtheta, then gx[n, h, c] = sum_a D u[a, c]
 * (written) and gu[h, a, c] += D x_c summed over the nodes (lane-wise in a
 * scratch buffer of each head, added at the end).  Returns 0, or 1 where the
 * buffer could not be allocated. */
INLINE int table_backward(const float *x, const float *u, const float *grad,
                          float *gx, float *gu, long N, long H, long A,
                          long R, long h0, long h1, long C) {
  float xb[MAX_CHANNELS][LANES], gxb[MAX_CHANNELS][LANES];
  float cs[GROUP][LANES], sn[GROUP][LANES];
  float gc[MAX_POINTS][LANES], gs[MAX_POINTS][LANES];
  float (*sums)[LANES] = malloc(sizeof(float[LANES]) * A * C * (h1 - h0));
  if (sums == NULL) return 1;
  for (long k = 0; k < A * C * (h1 - h0); k++)
    for (int i = 0; i < LANES; i++) sums[k][i] = 0.f;
  for (long span = 0; span < N; span += SPAN)
    for (long h = h0; h < h1; h++) {
      const float *uh = u + h * A * C;
      float (*sum_u)[LANES] = sums + (h - h0) * A * C;
      for (long n0 = span; n0 < N && n0 < span + SPAN; n0 += LANES) {
        load_block(x, H, C, N, h, n0, xb);
        for (long i = 0; i < LANES; i++) {
          const float *row = grad + (h * N + n0 + i) * 2 * R;
          for (long r = 0; r < R; r++) {
            gc[r][i] = n0 + i < N ? row[r] : 0.f;
            gs[r][i] = n0 + i < N ? row[R + r] : 0.f;
          }
        }
        for (long c = 0; c < C; c++)
          for (int i = 0; i < LANES; i++) gxb[c][i] = 0.f;
        for (long a0 = 0; a0 < A; a0 += GROUP) {
          const long K = group_angles(uh, a0, A, C, xb, cs, sn);
          for (long k = 0; k < K; k++) {
            const long a = a0 + k, r = a % R;
            float d[LANES];
#pragma omp simd
            for (int i = 0; i < LANES; i++)
              d[i] = cs[k][i] * gs[r][i] - sn[k][i] * gc[r][i];
            add_angle_gradient(d, uh + a * C, C, xb, gxb, sum_u + a * C);
          }
        }
        store_block(gx, H, C, N, h, n0, gxb);
      }
    }
  for (long h = h0; h < h1; h++)
    for (long k = 0; k < A * C; k++) {
      float s = 0.f;
      for (int i = 0; i < LANES; i++) s += sums[(h - h0) * A * C + k][i];
      gu[h * A * C + k] += s;
    }
  free(sums);
  return 0;
}

/* The tables compiled apart for the common channel counts, as above. */
#define SPECIALISED_C(call, C, ...)              \
  switch (C) {                                   \
    case 8: return call(__VA_ARGS__, 8);         \
    case 16: return call(__VA_ARGS__, 16);       \
    case 32: return call(__VA_ARGS__, 32);       \
    case 64: return call(__VA_ARGS__, 64);       \
    default: return call(__VA_ARGS__, C);        \
  }

int ikgat_node_terms_forward(const float *x, const float *u, const float *cw,
                             const float *sw, float *f, long N, long H,
                             long C, long A, long T, long h0, long h1) {
  SPECIALISED(forward, C, T, x, u, cw, sw, f, N, H, A, h0, h1)
}

int ikgat_node_terms_backward(const float *x, const float *u, const float *cw,
                              const float *sw, const float *g, float *gx,
                              float *gu, float *gcw, float *gsw, long N,
                              long H, long C, long A, long T, long h0,
                              long h1) {
  SPECIALISED(backward, C, T, x, u, cw, sw, g, gx, gu, gcw, gsw, N, H, A, h0,
              h1)
}

int ikgat_node_table_forward(const float *x, const float *u, float *table,
                             long N, long H, long C, long A, long R, long h0,
                             long h1) {
  SPECIALISED_C(table_forward, C, x, u, table, N, H, A, R, h0, h1)
}

int ikgat_node_table_backward(const float *x, const float *u,
                              const float *grad, float *gx, float *gu, long N,
                              long H, long C, long A, long R, long h0,
                              long h1) {
  SPECIALISED_C(table_backward, C, x, u, grad, gx, gu, N, H, A, R, h0, h1)
}
