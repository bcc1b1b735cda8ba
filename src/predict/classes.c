/* SPDX-License-Identifier: BSD-3-Clause */
/* classes.c - the class list and normalisation of a prediction (classes.h). */
#include "classes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ckpt/checkpoint.h"
#include "data/shards.h"

void class_list_lut(const float mean[3], const float std[3], float *lut) {
    /* dataloader.c's expression, in float: the same bits as its table, and as torchvision's
     * ToTensor + Normalize with these float32 values */
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) lut[c * 256 + v] = ((float)v / 255.0f - mean[c]) / std[c];
}

/* The test split's first shard's attributes, as the run's evaluation loader took them. */
static int from_data_dir(ClassList *cl, const char *dir, int num_classes, char *err, size_t errlen) {
    ShardSet set;
    if (shardset_open(&set, dir, "test", 0, 0, err, errlen) != 0) return -1;
    const ShardInfo *s0 = &set.shards[0];
    snprintf(cl->from, sizeof cl->from, "%s", s0->path);
    int rc = 0;
    if (s0->attrs.num_classes != num_classes) {
        rc = errf(err, errlen, "%s: %d classes, but the network has %d: the class list does not match it",
                  QUOTED(s0->path), s0->attrs.num_classes, num_classes);
    } else {
        memcpy(cl->mean, s0->attrs.mean, sizeof cl->mean);
        memcpy(cl->std, s0->attrs.std, sizeof cl->std);
        cl->num_classes = num_classes;
        cl->names = s0->attrs.class_names;   /* taken over */
        set.shards[0].attrs.class_names = NULL;
    }
    shardset_free(&set);
    return rc;
}

int class_list_open(ClassList *cl, const char *ckpt, const char *data_dir, const char *run_data_dir,
                    int num_classes, char *err, size_t errlen) {
    memset(cl, 0, sizeof *cl);
    if (data_dir) {
        if (from_data_dir(cl, data_dir, num_classes, err, errlen) != 0) return -1;
    } else {
        CkptDataset d;
        if (checkpoint_read_dataset(ckpt, &d, err, errlen) != 0) return -1;
        if (d.present) {
            /* the file's num_classes was checked against the network when it was loaded */
            if (d.num_classes != num_classes) {
                ckpt_dataset_free(&d);
                return errf(err, errlen, "%s: /dataset names %d classes, but the network has %d", QUOTED(ckpt),
                            d.num_classes, num_classes);
            }
            snprintf(cl->from, sizeof cl->from, "%s: /dataset", ckpt);
            memcpy(cl->mean, d.mean, sizeof cl->mean);
            memcpy(cl->std, d.std, sizeof cl->std);
            cl->num_classes = num_classes;
            cl->names = d.class_names;   /* taken over */
        } else {
            char why[4800];
            if (from_data_dir(cl, run_data_dir, num_classes, why, sizeof why) != 0)
                return errf(err, errlen, "%s: no /dataset (written before checkpoints recorded it), and the run's "
                            "--data_dir: %s; pass --data_dir DIR", QUOTED(ckpt), why);
        }
    }
    class_list_lut(cl->mean, cl->std, cl->lut);
    return 0;
}

const char *class_list_name(const ClassList *cl, int k, char buf[16]) {
    if (cl->names) return cl->names[k];
    snprintf(buf, 16, "%d", k);
    return buf;
}

void class_list_free(ClassList *cl) {
    for (int k = 0; cl->names && k < cl->num_classes; k++) free(cl->names[k]);
    free(cl->names);
    memset(cl, 0, sizeof *cl);
}
