/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_cpu.c - see pool_cpu.h. */
#include "pool_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* One output's window along an axis: [a, b) inside the input, and the span PyTorch divides by
 * with count_include_pad (clipped to the padded input only). */
typedef struct { int a, b, span; } Win;

static Win win_fixed(int o, int n, int k, int stride, int pad) {
    int a = o * stride - pad, b = a + k;
    if (b > n + pad) b = n + pad;
    Win w = {a, b, b - a};
    if (w.a < 0) w.a = 0;
    if (w.b > n) w.b = n;
    return w;
}

static Win win_adaptive(int o, int n, int out) {
    const int a = (int)((long)o * n / out), b = (int)(((long)(o + 1) * n + out - 1) / out);
    return (Win){a, b, b - a};
}

/* The windows of every output row and column, then the sum and the spread over them. */
static void pool_forward(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo, const Win *wh,
                         const Win *ww, int count_pad) {
    #pragma omp parallel
    {
        float *acc = mallocCheck((size_t)C * sizeof(float));
        #pragma omp for schedule(static)
        for (long r = 0; r < (long)N * Ho; r++) {
            const int n = (int)(r / Ho), oh = (int)(r % Ho);
            const Win h = wh[oh];
            for (int ow = 0; ow < Wo; ow++) {
                const Win w = ww[ow];
                memset(acc, 0, (size_t)C * sizeof(float));
                for (int i = h.a; i < h.b; i++)
                    for (int j = w.a; j < w.b; j++) {
                        const float *xp = x + (((size_t)n * H + i) * W + j) * C;
                        for (int c = 0; c < C; c++) acc[c] += xp[c];
                    }
                const int div = count_pad ? h.span * w.span : (h.b - h.a) * (w.b - w.a);
                float *yp = y + (((size_t)n * Ho + oh) * Wo + ow) * C;
                for (int c = 0; c < C; c++) yp[c] = div > 0 ? acc[c] / (float)div : 0.0f;
            }
        }
        free(acc);
    }
}

static void pool_backward(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo, const Win *wh,
                          const Win *ww, int count_pad) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *dn = dx + (size_t)n * H * W * C;
        memset(dn, 0, (size_t)H * W * C * sizeof(float));
        for (int oh = 0; oh < Ho; oh++)
            for (int ow = 0; ow < Wo; ow++) {
                const Win h = wh[oh], w = ww[ow];
                const int div = count_pad ? h.span * w.span : (h.b - h.a) * (w.b - w.a);
                if (div <= 0) continue;
                const float *g = dy + (((size_t)n * Ho + oh) * Wo + ow) * C;
                for (int i = h.a; i < h.b; i++)
                    for (int j = w.a; j < w.b; j++) {
                        float *d = dn + ((size_t)i * W + j) * C;
                        for (int c = 0; c < C; c++) d[c] += g[c] / (float)div;
                    }
            }
    }
}

static Win *fixed_wins(int out, int n, int k, int stride, int pad) {
    Win *w = mallocCheck((size_t)out * sizeof *w);
    for (int o = 0; o < out; o++) w[o] = win_fixed(o, n, k, stride, pad);
    return w;
}

static Win *adaptive_wins(int out, int n) {
    Win *w = mallocCheck((size_t)out * sizeof *w);
    for (int o = 0; o < out; o++) w[o] = win_adaptive(o, n, out);
    return w;
}

void avgpool2d_forward(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo, int k, int stride,
                       int pad, int count_pad) {
    Win *wh = fixed_wins(Ho, H, k, stride, pad), *ww = fixed_wins(Wo, W, k, stride, pad);
    pool_forward(x, y, N, H, W, C, Ho, Wo, wh, ww, count_pad);
    free(wh);
    free(ww);
}

void avgpool2d_backward(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo, int k, int stride,
                        int pad, int count_pad) {
    Win *wh = fixed_wins(Ho, H, k, stride, pad), *ww = fixed_wins(Wo, W, k, stride, pad);
    pool_backward(dy, dx, N, H, W, C, Ho, Wo, wh, ww, count_pad);
    free(wh);
    free(ww);
}

void adaptive_avgpool_forward(const float *x, float *y, int N, int H, int W, int C, int Ho, int Wo) {
    Win *wh = adaptive_wins(Ho, H), *ww = adaptive_wins(Wo, W);
    pool_forward(x, y, N, H, W, C, Ho, Wo, wh, ww, 0);
    free(wh);
    free(ww);
}

void adaptive_avgpool_backward(const float *dy, float *dx, int N, int H, int W, int C, int Ho, int Wo) {
    Win *wh = adaptive_wins(Ho, H), *ww = adaptive_wins(Wo, W);
    pool_backward(dy, dx, N, H, W, C, Ho, Wo, wh, ww, 0);
    free(wh);
    free(ww);
}
