/* SPDX-License-Identifier: BSD-3-Clause */
/* replay.c - runs a fuzz target over stored inputs without libFuzzer, so the test suite can
 * replay the corpora with the ordinary compiler: every file named, or in a directory named.
 * A crash is the failure; it prints which input was running first. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "base/util.h"

static int run_file(const char *path) {
    FILE *f = fopenCheck(path, "rb");
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0 && fseek(f, 0, SEEK_SET) == 0);
    uint8_t *buf = mallocCheck((size_t)n + 1);
    CHECK(n == 0 || fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 1;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    g_progname = "replay";
    int ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "replay: %s: no such file\n", argv[i]); return 2; }
        if (!S_ISDIR(st.st_mode)) { ran += run_file(argv[i]); continue; }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, NULL);
        if (n < 0) { fprintf(stderr, "replay: %s: cannot list\n", argv[i]); return 2; }
        char **paths = mallocCheck((size_t)n * sizeof *paths);
        int k = 0;
        for (int j = 0; j < n; j++) {
            if (names[j]->d_name[0] != '.') {
                paths[k] = mallocCheck(strlen(argv[i]) + strlen(names[j]->d_name) + 2);
                sprintf(paths[k++], "%s/%s", argv[i], names[j]->d_name);
            }
            free(names[j]);
        }
        free(names);
        qsort(paths, (size_t)k, sizeof *paths, cmp);
        for (int j = 0; j < k; j++) { ran += run_file(paths[j]); free(paths[j]); }
        free(paths);
    }
    printf("replayed %d input(s)\n", ran);
    return ran > 0 ? 0 : 2;
}
