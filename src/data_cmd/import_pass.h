/* SPDX-License-Identifier: BSD-3-Clause */
/* import_pass.h - a parallel pass of ddptrain-data import over image files: each read, decoded
 * and resized (or fitted and encoded as JPEG), by a pool of threads, with a progress bar.
 *
 * Import makes two passes: the first checks every image (sizes, errors, the training pixels'
 * sums) before anything is written, the second decodes them again a chunk at a time into the
 * shards. Files are taken in any order by the threads, but every result lands at its file's
 * index, so the output does not depend on the number of threads. */
#ifndef DDP_DATA_CMD_IMPORT_PASS_H
#define DDP_DATA_CMD_IMPORT_PASS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "data/shards.h"
#include "import_tree.h"

/* A progress bar on a terminal (stdout), nothing otherwise: the passes print a line each. */
typedef struct {
    int tty;
    size_t total;
    atomic_size_t done;
    double t0, last;
    pthread_mutex_t mu;
} Progress;

/* Redraws the bar at most every 0.1 s (any thread may call it); final: always, then a newline. */
void progress_show(Progress *p, const char *what, int final);

/* Clears the bar's line, so that what is printed next starts on a clean line. */
void progress_clear(Progress *p);

/* One parallel pass over files [0, n): decode (and resize to S when S > 0); per file, its size
 * (w/h, when given), its error (errs, when given; else the first error in file order is kept
 * in err), the exact sums of its pixels (when sums is given, for files with a label >= 0). */
typedef struct {
    const ImgFile *files;
    size_t n;
    int S, threads;
    uint8_t *out;                 /* [n][S][S][3], or NULL: scratch per thread */
    int *w, *h;                   /* [n] or NULL */
    char **errs;                  /* [n] or NULL */
    uint64_t *sums;               /* [threads][6]: sum and sum of squares per channel, or NULL */
    atomic_size_t next;
    size_t first_bad;             /* the lowest index that failed (when errs is NULL) */
    char err[2 * SHARD_PATH_MAX];
    pthread_mutex_t mu;
    Progress *prog;
    const char *what;
    atomic_size_t *reads;         /* the test hook's count of reads (see fail_read), or NULL */
    size_t fail_read;
    int fit;                      /* --encoding jpeg: image_fit to S (aspect kept), not S x S */
    int quality;                  /* with fit: encode as JPEG into jpg/jlen at this quality */
    uint8_t **jpg;                /* [n] malloc'd JPEG files, or NULL */
    size_t *jlen;                 /* [n] */
} Pass;

/* Runs the pass with p->threads threads (at most one per file); first_bad is (size_t)-1 when
 * no file failed. */
void run_pass(Pass *p);

#endif
