/* SPDX-License-Identifier: BSD-3-Clause */
/* aug_space.h - what torchvision 0.14's auto-augment policies share (transforms/autoaugment.py):
 * the policy ids, the ops with a magnitude and a sign, each op's magnitude at a bin of its
 * _augmentation_space, and the trace of a sample's draws the tests read. Below autoaug.h, which
 * runs the policies, and augmix.h, which AutoAugment's code calls: both take these from here. */
#ifndef DDP_AUG_SPACE_H
#define DDP_AUG_SPACE_H

#include "pil_ops.h"

enum { AA_NONE = 0, AA_IMAGENET, AA_CIFAR10, AA_SVHN, AA_RA, AA_TA_WIDE, AA_AUGMIX };

/* Ops with a table of magnitudes (a 1-d tensor in torchvision); the rest have 0-d 0.0. */
static inline int aug_has_bins(int op) { return op >= PIL_SHEAR_X && op <= PIL_SOLARIZE; }
/* Ops whose magnitude is negated when torch.randint(2) draws 1. */
static inline int aug_is_signed(int op) { return op >= PIL_SHEAR_X && op <= PIL_SHARPNESS; }

/* What a sample's augmentation drew and did, for tests: the draws in order as torchvision asks
 * for them ('i' an integer below `bound`, 'f' a float in [0, 1) or a factor, 'p' an element of
 * torch.randperm(4), 'd' one of AugMix's Dirichlet weights, `bound` the group's size), and the
 * ops applied with their magnitudes. */
#define AUTOAUG_TRACE_MAX 64
typedef struct {
    int n;
    char kind[AUTOAUG_TRACE_MAX];
    int bound[AUTOAUG_TRACE_MAX];
    double value[AUTOAUG_TRACE_MAX];
    int nops;
    int op[AUTOAUG_TRACE_MAX];
    double mag[AUTOAUG_TRACE_MAX];
} AutoAugTrace;

/* The magnitude torchvision's policy `policy` gives op at bin `bin` of `num_bins` for a w x h
 * image (its _augmentation_space: float32 linspace values, Posterize's bits; AugMix's
 * translations reach a third of the side, its Posterize 4 bits down to 0); 0 for the ops
 * without one. */
double autoaug_magnitude(int policy, int op, int bin, int num_bins, int w, int h);

#endif
