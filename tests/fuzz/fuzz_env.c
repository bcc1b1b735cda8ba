/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_env.c - the bootstrap's environment parsing (Open MPI, Slurm and torchrun variables)
 * and the Slurm job directory: the input is NAME=VALUE lines. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "dist/bootstrap.h"
#include "base/util.h"

typedef struct {
    char *lines[64];
    int n;
} Env;

static const char *get(void *ctx, const char *name) {
    const Env *e = ctx;
    size_t l = strlen(name);
    for (int i = 0; i < e->n; i++)
        if (strncmp(e->lines[i], name, l) == 0 && e->lines[i][l] == '=') return e->lines[i] + l + 1;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    char *buf = mallocCheck(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    Env e = {.n = 0};
    for (char *p = buf, *save = NULL, *line; (line = strtok_r(p, "\n", &save)) && e.n < 64; p = NULL)
        e.lines[e.n++] = line;
    Bootstrap b;
    char err[1024], dir[4096];
    if (bootstrap_from_env(&b, get, &e, err, sizeof err) == 0) {
        /* What every caller relies on once bootstrap succeeded. */
        CHECK(b.world_size >= 1 && b.rank >= 0 && b.rank < b.world_size);
        CHECK(b.local_size >= 1 && b.local_rank >= 0 && b.local_rank < b.local_size);
        CHECK(b.num_nodes >= 1 && b.num_nodes <= b.world_size);
        bootstrap_describe(&b);
    }
    if (bootstrap_default_job_dir(get, &e, dir, sizeof dir, err, sizeof err) > 0) {
        /* <absolute dir without ..>/runs/<digits>, or ./runs/<digits> */
        const char *last = strrchr(dir, '/');
        CHECK(last && last[1] && strspn(last + 1, "0123456789") == strlen(last + 1));
        CHECK(last - dir >= 5 && strncmp(last - 5, "/runs", 5) == 0);
        CHECK((dir[0] == '/' || strncmp(dir, "./runs/", 7) == 0) && strstr(dir, "/../") == NULL);
    }
    free(buf);
    return 0;
}
