/* SPDX-License-Identifier: BSD-3-Clause */
/* config.h - the effective configuration, generated from config_table.h. */
#ifndef DDP_CONFIG_H
#define DDP_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include "config_table.h"

#define DDP_CTYPE_INT    long
#define DDP_CTYPE_FLOAT  double
#define DDP_CTYPE_BOOL   int
#define DDP_CTYPE_STR    char *
#define DDP_CTYPE_CHOICE char *
#define DDP_CTYPE_SWITCH int   /* CONFIG_AUTO, 0 (off) or 1 (on) */

/* A SWITCH option left to decide by itself (its "auto") */
#define CONFIG_AUTO (-1)

typedef struct Config {
#define X(name, type, def, min, max, help) DDP_CTYPE_##type name;
    DDP_CONFIG_TABLE(X)
#undef X
} Config;

/* Defaults, then argv. On a bad flag or value prints one line naming the flag and exits 2;
 * --help prints every option with its default and exits 0. Returns 0, or CONFIG_VERSION for
 * --version, which the program prints (version.h) before it exits 0. */
void config_init(Config *c);
int config_parse_args(Config *c, int argc, char **argv);
/* The same without exiting: 0, CONFIG_HELP or CONFIG_VERSION (asked for, nothing printed),
 * or -1 with the one line in err. */
enum { CONFIG_HELP = 1, CONFIG_VERSION = 2 };
int config_parse(Config *c, int argc, char **argv, char *err, size_t errlen);

/* Options from a JSON file in the form of the job directory's config.json (config_to_json):
 * one flat object whose keys are option names and whose values are strings, numbers or
 * booleans, as the option's type wants (a number for INT and FLOAT options, true or false for
 * BOOL, a string for STR and CHOICE). `ddptrain --config runs/J/config.json` repeats a run;
 * flags on the command line override the file wherever they stand (config_parse). Returns 0,
 * or -1 with one line in err naming `path` and, where one is involved, the key: an unknown
 * key, a value of the wrong type or out of range, a repeated key, text that is not such an
 * object, or a path that is not a regular file. Options set before an error stay set. */
int config_file_apply(Config *c, const char *path, char *err, size_t errlen);
/* The same over `len` bytes of text (which need not end in NUL); `what` names it in messages. */
int config_json_apply(Config *c, const char *text, size_t len, const char *what, char *err, size_t errlen);

/* The checks across options that no range in config_table.h can make (a straggler factor in
 * (0, 1], nesterov without momentum, an EMA decay or label smoothing of 1 or more, onecycle
 * with --warmup_steps or --min_lr). Returns 0, or -1 with one line in err naming the flag. */
int config_check_recipe(const Config *c, char *err, size_t errlen);

/* --lr_milestones' epochs into out (at most max); their count, or -1 unless they are positive
 * integers in strictly ascending order, comma-separated, and no more than max. "" gives 0. */
int config_lr_milestones(const Config *c, long *out, int max);
/* --rrc_scale's two numbers; -1 unless they are LO,HI with 0 < LO <= HI <= 1. */
int config_rrc_scale(const Config *c, double *lo, double *hi);
/* --color_jitter as four numbers (all 0 when empty); -1 when it is not B,C,S,H with each >= 0 and H <= 0.5. */
int config_color_jitter(const Config *c, double j[4]);
/* The network's input size: --train_crop_size, or the stored --image_size without it. */
long config_input_size(const Config *c);
/* The size the network is evaluated at: --val_crop_size, else the input size. */
long config_eval_size(const Config *c);
/* The training crop of epoch `epoch` (from 0): the input size, or with --progressive_min_crop
 * FFCV's ramp from it to the input size, which is then the largest. */
long config_train_crop_at(const Config *c, long epoch);

/* Set one option from a string value as the command line would (tests, environment). Returns 0,
 * or -1 with a one-line reason in err. */
int config_set(Config *c, const char *name, const char *value, char *err, size_t errlen);


/* The effective configuration as one JSON object (malloc'd, caller frees). */
char *config_to_json(const Config *c);

void config_print_help(FILE *out, const char *progname);
void config_free(Config *c);

#endif
