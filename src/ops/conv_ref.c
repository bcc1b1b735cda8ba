/* SPDX-License-Identifier: BSD-3-Clause */
/* conv_ref.c - the reference convolution (see conv_cpu.h): direct loops, double accumulation.
 * Slow, obviously correct; the oneDNN path is tested against it, and it is the path used when
 * oneDNN is absent. */
#include "conv_cpu.h"

/* Weights [C_out, C_in/groups, k, k]: output channel co reads the C_in/groups input channels of
 * its group, co / (C_out/groups); cl is the index within them. */
static inline size_t widx(const ConvShape *sh, int co, int cl, int kh, int kw) {
    return (((size_t)co * (sh->C_in / sh->groups) + cl) * sh->k + kh) * sh->kw + kw;
}

void conv2d_reference_forward(const Conv2d *c, int N, int H, int W, const float *x,
                              const float *w, float *y) {
    const ConvShape shn = conv_shape_norm(&c->shape), *sh = &shn;   /* a Conv2d not from conv2d_init too */
    const int Ho = conv_out_size(sh, H), Wo = conv_out_w(sh, W);
    const int Ci = sh->C_in, Co = sh->C_out, k = sh->k, kwid = sh->kw, d = sh->dilation;
    const int Cig = Ci / sh->groups, Cog = Co / sh->groups;
    #pragma omp parallel for schedule(static)
    for (long nh = 0; nh < (long)N * Ho; nh++) {
        const int n = (int)(nh / Ho), ho = (int)(nh % Ho);
        for (int wo = 0; wo < Wo; wo++) {
            float *yp = y + (((size_t)n * Ho + ho) * Wo + wo) * Co;
            for (int co = 0; co < Co; co++) {
                const int c0 = co / Cog * Cig;   /* the group's first input channel */
                double acc = 0.0;
                for (int kh = 0; kh < k; kh++) {
                    const int h = ho * sh->stride - sh->pad + kh * d;
                    if (h < 0 || h >= H) continue;
                    for (int kw = 0; kw < kwid; kw++) {
                        const int ww = wo * sh->stride - sh->padw + kw * d;
                        if (ww < 0 || ww >= W) continue;
                        const float *xp = x + (((size_t)n * H + h) * W + ww) * Ci + c0;
                        for (int cl = 0; cl < Cig; cl++)
                            acc += (double)xp[cl] * w[widx(sh, co, cl, kh, kw)];
                    }
                }
                yp[co] = (float)acc;
            }
        }
    }
}

void conv2d_reference_backward(const Conv2d *c, int N, int H, int W, const float *x,
                               const float *w, const float *dy, float *dx, float *dw) {
    const ConvShape shn = conv_shape_norm(&c->shape), *sh = &shn;
    const int Ho = conv_out_size(sh, H), Wo = conv_out_w(sh, W);
    const int Ci = sh->C_in, Co = sh->C_out, k = sh->k, kwid = sh->kw, s = sh->stride, p = sh->pad, pw = sh->padw,
              d = sh->dilation;
    const int Cig = Ci / sh->groups, Cog = Co / sh->groups;
    if (dx) {
        /* Gather form: each input pixel collects from the outputs whose window covers it, so
         * threads never write the same element. */
        #pragma omp parallel for schedule(static)
        for (long nh = 0; nh < (long)N * H; nh++) {
            const int n = (int)(nh / H), h = (int)(nh % H);
            for (int ww = 0; ww < W; ww++) {
                float *dxp = dx + (((size_t)n * H + h) * W + ww) * Ci;
                for (int ci = 0; ci < Ci; ci++) {
                    const int g = ci / Cig, cl = ci % Cig;
                    double acc = 0.0;
                    for (int kh = 0; kh < k; kh++) {
                        const int th = h + p - kh * d;
                        if (th < 0 || th % s) continue;
                        const int ho = th / s;
                        if (ho >= Ho) continue;
                        for (int kw = 0; kw < kwid; kw++) {
                            const int tw = ww + pw - kw * d;
                            if (tw < 0 || tw % s) continue;
                            const int wo = tw / s;
                            if (wo >= Wo) continue;
                            const float *dyp = dy + (((size_t)n * Ho + ho) * Wo + wo) * Co;
                            for (int co = g * Cog; co < (g + 1) * Cog; co++)
                                acc += (double)dyp[co] * w[widx(sh, co, cl, kh, kw)];
                        }
                    }
                    dxp[ci] = (float)acc;
                }
            }
        }
    }
    #pragma omp parallel for schedule(static)
    for (int co = 0; co < Co; co++) {
        const int c0 = co / Cog * Cig;
        for (int cl = 0; cl < Cig; cl++)
            for (int kh = 0; kh < k; kh++)
                for (int kw = 0; kw < kwid; kw++) {
                    double acc = 0.0;
                    for (int n = 0; n < N; n++)
                        for (int ho = 0; ho < Ho; ho++) {
                            const int h = ho * s - p + kh * d;
                            if (h < 0 || h >= H) continue;
                            for (int wo = 0; wo < Wo; wo++) {
                                const int ww = wo * s - pw + kw * d;
                                if (ww < 0 || ww >= W) continue;
                                acc += (double)dy[(((size_t)n * Ho + ho) * Wo + wo) * Co + co] *
                                       x[(((size_t)n * H + h) * W + ww) * Ci + c0 + cl];
                            }
                        }
                    dw[widx(sh, co, cl, kh, kw)] += (float)acc;
                }
    }
}
