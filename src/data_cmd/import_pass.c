/* SPDX-License-Identifier: BSD-3-Clause */
/* import_pass.c - the parallel passes of ddptrain-data import over image files (import_pass.h). */
#include "import_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "data/image.h"
#include "data/image_fit.h"
#include "data/jpegs.h"

/* Reads, decodes and (S > 0) resizes/crops one file into out (S*S*3 bytes); 0, or -1 with err
 * naming the file. S == 0: the decoded image is returned in *img (the caller frees img->rgb). */
static int load_image(const char *path, int S, uint8_t *out, ImageRGB *img, char *err, size_t errlen) {
    ImageRGB im;
    if (image_decode_path(path, IMAGE_MAX_PIXELS, &im, err, errlen) != 0) return -1;
    if (S > 0) {
        image_resize_crop(&im, S, out);
        free(im.rgb);
    } else {
        *img = im;
    }
    return 0;
}

void progress_show(Progress *p, const char *what, int final) {
    if (!p->tty) return;
    if (final) pthread_mutex_lock(&p->mu);
    else if (pthread_mutex_trylock(&p->mu) != 0) return;   /* another thread is printing */
    double t = now_sec();
    if (final || t - p->last >= 0.1) {
        p->last = t;
        size_t d = atomic_load(&p->done);
        double frac = p->total ? (double)d / (double)p->total : 1.0, rate = d / (t - p->t0 + 1e-9);
        char bar[33];
        int fill = (int)(frac * 30 + 0.5);
        bar[0] = '[';
        for (int i = 0; i < 30; i++) bar[1 + i] = i < fill ? '#' : '-';
        bar[31] = ']';
        bar[32] = '\0';
        printf("\r%-6s %s %3.0f%% %zu/%zu %.0f img/s ", what, bar, 100.0 * frac, d, p->total, rate);
        g_console_line_open = 1;
        if (final) {
            printf("\n");
            g_console_line_open = 0;
        }
        fflush(stdout);
    }
    pthread_mutex_unlock(&p->mu);
}

void progress_clear(Progress *p) {
    if (!p->tty) return;
    printf("\r\033[K");
    g_console_line_open = 0;
}

/* File i of the pass into dst (S x S) or *im (the decoded image, fitted to S with p->fit and
 * then encoded into p->jpg[i] when p->jpg is given); 0, or -1 with err naming the file. */
static int pass_load(Pass *p, size_t i, uint8_t *dst, ImageRGB *im, char *err, size_t errlen) {
    if (p->reads && atomic_fetch_add(p->reads, 1) + 1 == p->fail_read) {
        snprintf(err, errlen, "%s: cannot read: failure injected by DDPTRAIN_DATA_TEST_FAIL_READ=%zu",
                 p->files[i].path, p->fail_read);
        return -1;
    }
    if (load_image(p->files[i].path, p->fit ? 0 : p->S, dst, im, err, errlen) != 0) return -1;
    if (!p->fit) return 0;
    ImageRGB fitted;   /* the whole image, resized with its aspect kept */
    image_fit(im, p->S, &fitted);
    free(im->rgb);
    *im = fitted;
    char e[JPEG_ERR_LEN];
    if (p->jpg && jpeg_encode_rgb(im->rgb, im->w, im->h, p->quality, &p->jpg[i], &p->jlen[i], e, sizeof e) != 0) {
        snprintf(err, errlen, "%s: %s", QUOTED(p->files[i].path), e);
        free(im->rgb);
        im->rgb = NULL;
        return -1;
    }
    return 0;
}

/* Keeps file i's error: in errs, or as the pass's error when it is the first in file order
 * (the threads finish files out of order; the message must not depend on them). */
static void pass_failed(Pass *p, size_t i, const char *err) {
    if (p->errs) {
        p->errs[i] = strdup(err);
        CHECK(p->errs[i] != NULL);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (i < p->first_bad) {
        p->first_bad = i;
        snprintf(p->err, sizeof p->err, "%s", err);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Records file i's size and adds its pixels (npx of them at px) to the thread's sums acc:
 * integers, so that the mean/std do not depend on how files fell to threads. */
static void pass_loaded(Pass *p, size_t i, const uint8_t *px, size_t npx, int w, int h, uint64_t acc[6]) {
    if (p->w) {
        p->w[i] = w;
        p->h[i] = h;
    }
    if (p->sums && p->files[i].label >= 0)
        for (size_t q = 0; q < npx; q++)
            for (int c = 0; c < 3; c++) {
                uint64_t v = px[q * 3 + (size_t)c];
                acc[c] += v;
                acc[3 + c] += v * v;
            }
}

typedef struct { Pass *p; int id; } Worker;

static void *pass_worker(void *arg) {
    Worker *wk = arg;
    Pass *p = wk->p;
    uint8_t *scratch = (p->out || p->S == 0 || p->fit) ? NULL : mallocCheck((size_t)p->S * (size_t)p->S * 3);
    uint64_t acc[6] = {0};
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        char err[2 * SHARD_PATH_MAX];
        ImageRGB im = {0, 0, NULL};
        uint8_t *dst = p->out ? p->out + i * (size_t)p->S * (size_t)p->S * 3 : scratch;
        if (pass_load(p, i, dst, &im, err, sizeof err) != 0) {
            pass_failed(p, i, err);
        } else if (p->S > 0 && !p->fit) {
            pass_loaded(p, i, dst, (size_t)p->S * (size_t)p->S, p->S, p->S, acc);
        } else {
            pass_loaded(p, i, im.rgb, (size_t)im.w * (size_t)im.h, im.w, im.h, acc);
            free(im.rgb);
        }
        if (p->prog) {
            atomic_fetch_add(&p->prog->done, 1);
            progress_show(p->prog, p->what, 0);
        }
    }
    if (p->sums) memcpy(p->sums + 6 * (size_t)wk->id, acc, sizeof acc);
    free(scratch);
    return NULL;
}

void run_pass(Pass *p) {
    atomic_init(&p->next, 0);
    p->first_bad = (size_t)-1;
    p->err[0] = '\0';
    pthread_mutex_init(&p->mu, NULL);
    int nt = p->threads < 1 ? 1 : p->threads;
    if ((size_t)nt > p->n && p->n > 0) nt = (int)p->n;
    pthread_t *th = mallocCheck((size_t)nt * sizeof *th);
    Worker *wk = mallocCheck((size_t)nt * sizeof *wk);
    for (int t = 0; t < nt; t++) {
        wk[t] = (Worker){p, t};
        CHECK(helper_thread_create(&th[t], pass_worker, &wk[t]) == 0);
    }
    for (int t = 0; t < nt; t++) CHECK(pthread_join(th[t], NULL) == 0);
    free(th);
    free(wk);
    pthread_mutex_destroy(&p->mu);
}
