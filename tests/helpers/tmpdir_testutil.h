/* SPDX-License-Identifier: BSD-3-Clause */
/* tmpdir_testutil.h - a private temporary directory for a C test, and its removal. */
#ifndef DDP_TMPDIR_TESTUTIL_H
#define DDP_TMPDIR_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"

/* buf receives $TMPDIR (else /tmp) /<name>.XXXXXX, created mode 0700. */
static inline void test_tmpdir(char *buf, size_t n, const char *name) {
    const char *base = getenv("TMPDIR");
    snprintf_check(buf, n, "%s/%s.XXXXXX", base && *base ? base : "/tmp", name);
    CHECK(mkdtemp(buf) != NULL);
}

static inline int test_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

/* rm -rf dir, depth first, not following links. */
static inline void test_rm_tree(const char *dir) {
    if (nftw(dir, test_rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

#endif
