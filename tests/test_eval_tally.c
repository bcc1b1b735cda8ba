/* SPDX-License-Identifier: BSD-3-Clause */
/* test_eval_tally.c - the evaluation's counts (src/run/eval_tally.h) against a reference that
 * sorts: each image's classes ordered by qsort on (logit descending, class ascending), the
 * prediction the first of them, a top-5 hit a label among the first five, the matrix and the
 * per-class figures counted from that. Logits drawn from four values, so that most images have
 * exact ties where they decide (a control shows that breaking ties towards the label would
 * count otherwise); 1 to 1,025 classes (no top-5 up to 5, no matrix above 1,024), the images
 * added at once and in chunks of 7, and a NaN logit, which must leave top-5 >= top-1. And the
 * copies back from a device backend (a fake one whose memory only download reads). Exit status 0
 * when everything holds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/util.h"
#include "ops/backend.h"
#include "run/eval_tally.h"

static int g_failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    if (!ok) g_failed++;
    printf("%s: ", ok ? "ok" : "FAIL");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static const float *g_z;   /* the image qsort orders */

static int by_logit_then_class(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (g_z[i] != g_z[j]) return g_z[i] > g_z[j] ? -1 : 1;
    return (i > j) - (i < j);
}

enum { N = 300 };

static void case_k(int K, Rng *r) {
    float *z = mallocCheck((size_t)N * K * sizeof(float));
    int *y = mallocCheck(N * sizeof(int)), *order = mallocCheck((size_t)K * sizeof(int));
    static const float values[4] = {-1.0f, 0.0f, 0.5f, 1.0f};
    for (size_t i = 0; i < (size_t)N * K; i++) z[i] = values[rng_u64(r) % 4];
    for (int i = 0; i < N; i++) y[i] = (int)(rng_u64(r) % (uint64_t)K);
    /* the reference */
    const int has_matrix = K <= EVAL_TALLY_MATRIX_MAX;
    int64_t top1 = 0, top5 = 0, optimistic5 = 0;
    int64_t *images = callocCheck((size_t)K, sizeof *images), *hits = callocCheck((size_t)K, sizeof *hits);
    int64_t *matrix = has_matrix ? callocCheck((size_t)K * K, sizeof *matrix) : NULL;
    for (int i = 0; i < N; i++) {
        g_z = z + (size_t)i * K;
        for (int k = 0; k < K; k++) order[k] = k;
        qsort(order, (size_t)K, sizeof *order, by_logit_then_class);
        int place = 0, greater = 0;
        while (order[place] != y[i]) place++;
        for (int k = 0; k < K; k++) greater += g_z[k] > g_z[y[i]];
        top1 += order[0] == y[i];
        top5 += place < 5;
        optimistic5 += greater < 5;
        images[y[i]]++;
        hits[y[i]] += order[0] == y[i];
        if (matrix) matrix[(size_t)y[i] * K + order[0]]++;
    }
    EvalTally whole, chunks;
    eval_tally_init(&whole, K, N);
    eval_tally_init(&chunks, K, 7);
    eval_tally_add(&whole, z, y, N);
    for (int off = 0; off < N; off += 7) eval_tally_add(&chunks, z + (size_t)off * K, y + off, N - off < 7 ? N - off : 7);
    const int same_counts = whole.n == chunks.n && !memcmp(whole.c, chunks.c, whole.n * sizeof *whole.c);
    int rows_ok = 1;
    for (int k = 0; k < K && has_matrix; k++)
        rows_ok &= !memcmp(eval_tally_row(&whole, k), matrix + (size_t)k * K, (size_t)K * sizeof *matrix);
    const int per_class = !memcmp(eval_tally_class_images(&whole), images, (size_t)K * sizeof *images) &&
                          !memcmp(eval_tally_class_hits(&whole), hits, (size_t)K * sizeof *hits);
    check(whole.c[TALLY_IMAGES] == N && whole.c[TALLY_TOP1] == top1 && per_class && rows_ok &&
          whole.has_matrix == has_matrix && whole.has_top5 == (K > 5) &&
          whole.c[TALLY_TOP5] == (K > 5 ? top5 : 0) && same_counts,
          "%d classes: top-1 %lld (sorted: %lld), top-5 %s%lld (sorted: %lld), per class and %s as sorted, "
          "the same in chunks of 7", K, (long long)whole.c[TALLY_TOP1], (long long)top1, K > 5 ? "" : "not counted, ",
          (long long)whole.c[TALLY_TOP5], (long long)top5, has_matrix ? "the matrix" : "no matrix (over the limit)");
    if (K > 5 && K < 100)   /* ties at the fifth place are frequent here: the rule matters */
        check(optimistic5 != top5, "%d classes: ties broken towards the label would count %lld top-5 hits, not %lld",
              K, (long long)optimistic5, (long long)top5);
    eval_tally_free(&whole);
    eval_tally_free(&chunks);
    free(z), free(y), free(order), free(images), free(hits), free(matrix);
}

/* A device backend as eval_tally_add_model sees one: memory the host must not read but through
 * download, which counts its calls. */
static int g_downloads;
static void fake_download(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    g_downloads++;
}

/* The logits and labels of "forwards" on that backend, in chunks of 4, then one of 9 (larger
 * than the copies were sized for), give the counts of eval_tally_add on the host arrays. */
static void case_device(Rng *r) {
    enum { K = 12, TOTAL = 33 };
    float z[TOTAL * K];
    int y[TOTAL];
    for (int i = 0; i < TOTAL * K; i++) z[i] = (float)(rng_u64(r) % 5);
    for (int i = 0; i < TOTAL; i++) y[i] = (int)(rng_u64(r) % K);
    Backend dev = backend_cpu;
    dev.on_device = 1;
    dev.download = fake_download;
    Model m;
    memset(&m, 0, sizeof m);
    m.be = &dev;
    m.num_classes = K;
    EvalTally host, device;
    eval_tally_init(&host, K, 4);
    eval_tally_init(&device, K, 4);
    eval_tally_add(&host, z, y, TOTAL);
    for (int off = 0, n = 4; off < TOTAL; off += n, n = off + 9 == TOTAL ? 9 : 4) {
        m.logits = z + off * K;   /* the model's last forward, where the "device" holds it */
        eval_tally_add_model(&device, &m, y + off, n);
    }
    check(!memcmp(host.c, device.c, host.n * sizeof *host.c) && g_downloads == 2 * 7 && device.cap == 9,
          "a device backend: the logits and labels of 7 forwards (the last of 9 images) downloaded (%d copies) and "
          "counted as on the host", g_downloads);
    eval_tally_free(&host);
    eval_tally_free(&device);
}

int main(void) {
    Rng r;
    rng_init(&r, 7, 0, 0);
    const int ks[] = {1, 2, 5, 6, 10, 37, 1024, 1025};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) case_k(ks[i], &r);

    /* A NaN where the scan for the first maximum starts: it keeps class 0 (nothing compares
     * greater than NaN), as the loss kernels' hit count does; label 3 then misses top-1, and
     * its top-5 hit follows the finite logits. */
    float z[8] = {NAN, 0.1f, 0.2f, 0.9f, 0.3f, 0.4f, 0.5f, 0.6f};
    const int y0 = 0, y3 = 3;
    EvalTally t;
    eval_tally_init(&t, 8, 1);
    eval_tally_add(&t, z, &y0, 1);
    eval_tally_add(&t, z, &y3, 1);
    check(eval_tally_argmax(z, 8) == 0 && t.c[TALLY_TOP1] == 1 && t.c[TALLY_TOP5] == 2 && eval_tally_row(&t, 3)[0] == 1,
          "a NaN logit: predicted class 0 as the loss's scan, top-1 1 of 2, top-5 2 of 2 (>= top-1)");
    eval_tally_free(&t);
    case_device(&r);
    printf(g_failed ? "%d check(s) failed\n" : "all checks passed\n", g_failed);
    return g_failed ? 1 : 0;
}
