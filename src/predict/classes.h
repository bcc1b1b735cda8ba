/* SPDX-License-Identifier: BSD-3-Clause */
/* classes.h - what the network's outputs are called and how its inputs are normalised: the
 * class names, mean and std of the run's dataset, as its evaluation used them (its test
 * split's). From the checkpoint's /dataset (checkpoint.h); with --data_dir DIR, or for a
 * checkpoint written before /dataset was recorded, from the test split of DIR or of the run's
 * --data_dir (its first shard's attributes, as the loader takes them). A list of another number
 * of classes than the network's is refused, naming the file it came from. */
#ifndef DDP_PREDICT_CLASSES_H
#define DDP_PREDICT_CLASSES_H

#include <stddef.h>

typedef struct {
    int num_classes;
    char **names;            /* [num_classes], or NULL: the classes are called by their index */
    float mean[3], std[3];   /* per channel, in units of pixel/255 */
    float lut[3 * 256];      /* lut[c * 256 + v]: the normalised value of v in channel c, as the loader's */
    char from[4200];         /* where they came from, for messages ("CKPT: /dataset", a shard) */
} ClassList;

/* num_classes: the network's; run_data_dir: the run's --data_dir (its /config); data_dir: the
 * flag, or NULL. 0, or -1 with one line in err. */
int class_list_open(ClassList *cl, const char *ckpt, const char *data_dir, const char *run_data_dir,
                    int num_classes, char *err, size_t errlen);

/* Class k's name, or its index in decimal (into buf) when the dataset names none. */
const char *class_list_name(const ClassList *cl, int k, char buf[16]);

/* The loader's normalisation table of (mean, std) into lut [3 * 256]. */
void class_list_lut(const float mean[3], const float std[3], float *lut);

void class_list_free(ClassList *cl);

#endif
