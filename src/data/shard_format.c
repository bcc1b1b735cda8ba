/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_format.c - what every piece of the dataset format shares (shard_format.h): HDF5 kept
 * quiet, and the names of shard files, <split>-NNNNN-of-MMMMM.h5. */
#include "shard_format.h"

#include <string.h>

#include <hdf5.h>

#include "base/hdf5_lock.h"
#include "base/util.h"

void shards_quiet_hdf5(void) {
    /* The library's default handler prints a multi-screen stack for an expected condition
     * (a truncated file); our one-line message says it better. */
    hdf5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hdf5_unlock();
}

void shard_name(char *buf, size_t len, const char *split, int index, int count) {
    snprintf_check(buf, len, "%s-%05d-of-%05d.h5", split, index, count);
}

static int parse_5digits(const char *s, int *out) {
    int v = 0;
    for (int i = 0; i < 5; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

int shard_parse_name(const char *name, const char *split, int *index, int *count) {
    size_t ls = strlen(split);
    /* <split>-NNNNN-of-MMMMM.h5 : exact length, so train-1-of-2.h5 or a .tmp file never match */
    if (strlen(name) != ls + 1 + 5 + 4 + 5 + 3) return 0;
    if (strncmp(name, split, ls) != 0 || name[ls] != '-') return 0;
    const char *p = name + ls + 1;
    int i, c;
    if (!parse_5digits(p, &i) || strncmp(p + 5, "-of-", 4) != 0 || !parse_5digits(p + 9, &c) ||
        strcmp(p + 14, ".h5") != 0)
        return 0;
    *index = i;
    *count = c;
    return 1;
}

