/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_util.c - see fuzz.h. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/util.h"

static char g_path[512];

static void remove_scratch(void) {
    if (g_path[0]) unlink(g_path);
}

const char *fuzz_scratch_file(const uint8_t *data, size_t size, const char *suffix) {
    if (!g_path[0]) {
        const char *base = getenv("TMPDIR");
        snprintf_check(g_path, sizeof g_path, "%s/ddpfuzz-%d%s", base && *base ? base : "/tmp", (int)getpid(), suffix);
        atexit(remove_scratch);
    }
    FILE *f = fopenCheck(g_path, "wb");
    CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
    return g_path;
}
