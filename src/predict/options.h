/* SPDX-License-Identifier: BSD-3-Clause */
/* options.h - ddptrain-predict's command line: CHECKPOINT INPUT... and the flags of one table
 * (base/flags.h), from which --help is printed (and so the manual page, man/help2roff.sh).
 *
 * Flags are --name VALUE or --name=VALUE, anywhere among the arguments; "--" ends them. A bad
 * command line is one line on stderr and exit status 2; --help and --version print and exit 0. */
#ifndef DDP_PREDICT_OPTIONS_H
#define DDP_PREDICT_OPTIONS_H

enum { FORMAT_CSV = 0, FORMAT_JSONL = 1 };

typedef struct {
    const char *checkpoint;
    char **inputs;               /* [n_inputs], argv's strings */
    int n_inputs;
    const char *out;             /* NULL: the standard output */
    int format;                  /* FORMAT_* */
    long long topk;
    long long batch_size;        /* images per forward; 0: the run's --batch_size */
    long long threads;           /* 0: as ddptrain chooses (OMP_NUM_THREADS, Slurm, the cores) */
    const char *tta;             /* NULL: the run's --tta */
    int ema, no_ema;
    const char *model;           /* NULL: the run's network */
    const char *data_dir;        /* NULL: the checkpoint's /dataset, else the run's --data_dir */
    int skip_bad;
    const char *dump_inputs, *dump_logits;   /* debugging: the tensors, raw float32 */
} PredictOptions;

/* Fills o from argv (argv's strings are kept); exits as the top says. */
void predict_options_parse(PredictOptions *o, int argc, char **argv);
void predict_options_free(PredictOptions *o);

#endif
