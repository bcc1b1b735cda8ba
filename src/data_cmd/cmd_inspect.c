/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_inspect.c - ddptrain-data inspect: every check ddptrain makes on shard files and dataset
 * directories, plus every image read (and every JPEG decoded), and a summary of each file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/flags.h"
#include "base/util.h"
#include "data/jpegs.h"
#include "data/shards.h"
#include "data_cmd.h"

static const char *USAGE_INSPECT =
    "usage: ddptrain-data inspect FILE|DIR...\n"
    "\n"
    "Validates each shard file (every check ddptrain makes, and that all images are readable: the\n"
    "JPEGs of a JPEG shard decoded, each to the size it records) and prints its sample count,\n"
    "image shape, encoding and bytes, num_classes, class names, label histogram and mean/std.\n"
    "A directory is checked as a dataset: both splits' shard sets must be complete and consistent.\n"
    "Exits 1 with one line naming the file if anything is wrong.\n";

/* The one-line error of a file, after what stdout holds so far. */
static void report(const char *err) {
    fflush(stdout);
    fprintf(stderr, "%s: error: %s\n", g_progname, err);
}

/* Decodes every image of a JPEG shard (a few hundred at a time) and checks it against its
 * recorded size; the smallest and largest sides seen go to the summary. 0, or -1 with err
 * naming the shard and the sample. */
static int inspect_jpegs(const ShardInfo *info, int minmax[4], char *err, size_t errlen) {
    const size_t step = 256;
    const int S = info->image_size;
    const size_t cap = (size_t)2 * (size_t)S * (size_t)S * 3;
    uint64_t *off = mallocCheck((step + 1) * sizeof *off);
    uint16_t *sz = mallocCheck(step * 2 * sizeof *sz);
    uint8_t *px = mallocCheck(cap);
    minmax[0] = minmax[1] = INT32_MAX;
    minmax[2] = minmax[3] = 0;
    int rc = 0;
    for (size_t s = 0; s < info->n && rc == 0; s += step) {
        const size_t n = info->n - s < step ? info->n - s : step;
        uint8_t *bytes;
        if (shard_read_jpeg_range(info->path, s, n, off, sz, &bytes, NULL, err, errlen) != 0) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < n && rc == 0; i++) {
            char e[JPEG_ERR_LEN];
            int w, h;
            /* the JPEG's header is checked against 'sizes' before it is decoded */
            if (jpeg_decode_scaled_into(bytes + off[i], (size_t)(off[i + 1] - off[i]), 1, sz[2 * i + 1], sz[2 * i], px,
                                        cap, &w, &h, e, sizeof e) != 0)
                rc = errf(err, errlen, "%s: sample %zu: %s", info->path, s + i, e);
            if (rc == 0) {
                if (h < minmax[0]) minmax[0] = h;
                if (w < minmax[1]) minmax[1] = w;
                if (h > minmax[2]) minmax[2] = h;
                if (w > minmax[3]) minmax[3] = w;
            }
        }
        free(bytes);
    }
    free(off);
    free(sz);
    free(px);
    return rc;
}

/* Reads every image of the raw shard at path, ~64 MiB at a time; 0, or -1 with err. */
static int inspect_raw(const char *path, const ShardInfo *info, char *err, size_t errlen) {
    size_t per = (size_t)info->image_size * (size_t)info->image_size * 3;
    size_t step = (64u << 20) / per + 1;
    uint8_t *buf = mallocCheck(step * per);
    int rc = 0;
    for (size_t s = 0; s < info->n && rc == 0; s += step) {
        size_t n = info->n - s < step ? info->n - s : step;
        if (shard_read_range(path, s, n, info->image_size, buf, NULL, err, errlen) != 0) rc = -1;
    }
    free(buf);
    return rc;
}

/* The summary of a checked file: minmax (heights and widths, smallest then largest) for a
 * JPEG shard. */
static void print_file_summary(const char *path, const ShardInfo *info, const int32_t *labels, const int minmax[4]) {
    const ShardAttrs *a = &info->attrs;
    printf("%s\n", path);
    printf("  samples      %zu\n", info->n);
    if (info->encoding == SHARD_ENC_JPEG) {
        printf("  images       [%zu] JPEG, shorter side %d, heights %d to %d, widths %d to %d\n", info->n,
               info->image_size, minmax[0], minmax[2], minmax[1], minmax[3]);
        printf("  encoding     jpeg, %llu bytes, %.0f bytes per image\n", (unsigned long long)info->jpeg_bytes,
               (double)info->jpeg_bytes / (double)info->n);
    } else {
        printf("  images       [%zu,%d,%d,3] uint8\n", info->n, info->image_size, info->image_size);
        printf("  encoding     raw, %llu bytes, %d bytes per image\n",
               (unsigned long long)info->n * (unsigned long long)info->image_size * (unsigned long long)info->image_size * 3,
               info->image_size * info->image_size * 3);
    }
    printf("  num_classes  %d\n", a->num_classes);
    printf("  class_names ");
    if (a->class_names)
        for (int k = 0; k < a->num_classes; k++) printf(" %s", a->class_names[k]);
    else
        printf(" (none)");
    printf("\n  labels      ");
    size_t *hist = callocCheck((size_t)a->num_classes, sizeof(size_t));
    for (size_t i = 0; i < info->n; i++) hist[labels[i]]++;
    for (int k = 0; k < a->num_classes; k++) printf(" %d:%zu", k, hist[k]);
    free(hist);
    if (a->has_norm)
        printf("\n  mean         %.4f %.4f %.4f\n  std          %.4f %.4f %.4f\n",
               (double)a->mean[0], (double)a->mean[1], (double)a->mean[2],
               (double)a->std[0], (double)a->std[1], (double)a->std[2]);
    else
        printf("\n  mean/std     (absent: ddptrain uses mean %.2f, std %.2f per channel)\n",
               (double)SHARD_DEFAULT_MEAN, (double)SHARD_DEFAULT_STD);
}

/* Validates one file fully (header, labels, every image chunk, every JPEG decoded) and prints
 * its summary. Returns 0, or -1 after printing the one-line error. */
static int inspect_file(const char *path) {
    char err[2 * SHARD_PATH_MAX];
    ShardInfo info;
    int32_t *labels;
    if (shard_read_info(&info, path, 0, 0, &labels, err, sizeof err) != 0) {
        report(err);
        return -1;
    }
    int minmax[4] = {0, 0, 0, 0};
    int rc = info.encoding == SHARD_ENC_JPEG ? inspect_jpegs(&info, minmax, err, sizeof err)
                                              : inspect_raw(path, &info, err, sizeof err);
    if (rc != 0) report(err);
    else print_file_summary(path, &info, labels, minmax);
    free(labels);
    shard_info_free(&info);
    return rc;
}

/* A dataset directory: each split present must be a complete, consistent set of shards. */
static int inspect_dir(const char *dir) {
    const char *splits[2] = {"train", "test"};
    int any = 0, rc = 0;
    char err[2 * SHARD_PATH_MAX];
    for (int k = 0; k < 2; k++) {
        if (!shards_dir_has_split(dir, splits[k])) continue;
        any = 1;
        ShardSet set;
        if (shardset_open(&set, dir, splits[k], 0, 0, err, sizeof err) != 0) {
            report(err);
            rc = -1;
            continue;
        }
        for (int i = 0; i < set.num_shards; i++)
            if (inspect_file(set.shards[i].path) != 0) rc = -1;
        if (rc == 0)
            printf("%s: %s split: %d shard%s, %zu samples\n", dir, splits[k], set.num_shards,
                   set.num_shards == 1 ? "" : "s", set.total);
        shardset_free(&set);
    }
    if (!any) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s: no train or test shards found (files named train-NNNNN-of-MMMMM.h5 are expected)\n",
                g_progname, dir);
        return -1;
    }
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    char **pos = callocCheck((size_t)argc + 1, sizeof(char *));
    int n = flags_parse(&(FlagSpec){.cmd = "inspect", .usage = USAGE_INSPECT}, argc, argv, pos);
    if (n == 0) flags_usage_error("inspect", "no FILE or DIR given");
    int rc = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(pos[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            if (inspect_dir(pos[i]) != 0) rc = 1;
        } else if (inspect_file(pos[i]) != 0) {
            rc = 1;
        }
    }
    free(pos);
    return rc;
}
