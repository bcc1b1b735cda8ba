/* SPDX-License-Identifier: BSD-3-Clause */
/* jpeg_bench.c - decoded images per second per core of jpeg_decode_scaled (jpegs.h) over the
 * JPEG bytes of a split's shards (import --encoding jpeg), at each scale asked for: what one
 * loader thread can feed. One thread; the bytes are read into memory first, so no file I/O is
 * timed, and the decodes go into one buffer (jpeg_decode_scaled_into), as a loader would. CPU
 * time of the thread is reported beside wall time: on a shared machine it is the figure that
 * does not depend on the other jobs.
 * usage: jpeg_bench DIR [SPLIT [MAX_IMAGES [DENOM...]]]   (defaults: train, all, 1 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/jpegs.h"
#include "data/shards.h"
#include "base/util.h"

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void print_cpu_model(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            printf("cpu: %s", v ? v + 2 : line);
            break;
        }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    g_progname = "jpeg_bench";
    if (argc < 2) die_code(2, "usage: jpeg_bench DIR [SPLIT [MAX_IMAGES [DENOM...]]]");
    const char *dir = argv[1], *split = argc > 2 ? argv[2] : "train";
    size_t max = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 0;
    int denoms[8] = {1, 2}, nd = 2;
    if (argc > 4) {
        nd = 0;
        for (int i = 4; i < argc && nd < 8; i++) denoms[nd++] = atoi(argv[i]);
    }
    char err[2 * SHARD_PATH_MAX];
    ShardSet set;
    if (shardset_open(&set, dir, split, 0, 0, err, sizeof err) != 0) die("%s", err);
    if (set.shards[0].encoding != SHARD_ENC_JPEG) die("%s: not JPEG shards (import --encoding jpeg)", dir);
    size_t total = max && max < set.total ? max : set.total;
    /* All bytes in memory: offsets absolute in one buffer. */
    uint64_t *off = mallocCheck((total + 1) * sizeof *off);
    uint8_t *all = NULL;
    size_t got = 0, bytes = 0;
    off[0] = 0;
    for (int s = 0; s < set.num_shards && got < total; s++) {
        size_t n = set.shards[s].n < total - got ? set.shards[s].n : total - got;
        uint8_t *b;
        if (shard_read_jpeg_range(set.shards[s].path, 0, n, off + got, NULL, &b, NULL, err, sizeof err) != 0) die("%s", err);
        size_t len = (size_t)off[got + n];
        all = realloc(all, bytes + len);
        CHECK(all != NULL);
        memcpy(all + bytes, b, len);
        free(b);
        for (size_t i = 0; i <= n; i++) off[got + i] += bytes;
        bytes += len;
        got += n;
    }
    print_cpu_model();
    const int S = set.shards[0].image_size;
    printf("%s %s: %zu images, shorter side %d, %.0f bytes per image\n", dir, split, total, S, (double)bytes / (double)total);
    const size_t cap = (size_t)2 * (size_t)S * (size_t)S * 3;
    uint8_t *px = mallocCheck(cap);
    for (int k = 0; k < nd; k++) {
        double t0 = now_sec(), c0 = thread_cpu(), pixels = 0;
        for (size_t i = 0; i < total; i++) {
            int w, h;
            char e[JPEG_ERR_LEN];
            if (jpeg_decode_scaled_into(all + off[i], (size_t)(off[i + 1] - off[i]), denoms[k], 0, 0, px, cap, &w, &h, e,
                                        sizeof e) != 0)
                die("%s: image %zu: %s", dir, i, e);
            pixels += (double)w * h;
        }
        double wall = now_sec() - t0, cpu = thread_cpu() - c0;
        printf("denom %d: %.0f images/s per core (CPU time %.2f s; wall %.2f s, %.0f images/s), %.0f pixels per image\n",
               denoms[k], (double)total / cpu, cpu, wall, (double)total / wall, pixels / (double)total);
    }
    free(px);
    free(all);
    free(off);
    shardset_free(&set);
    return 0;
}
