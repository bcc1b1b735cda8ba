/* SPDX-License-Identifier: BSD-3-Clause */
/* logger.h - per-rank log file, rank 0's console, and metrics.jsonl.
 *
 * Every rank writes its own log file (logs/rank-NNNNN.log in the job directory) with a
 * timestamp and [rank r/W host] on each line. Rank 0 also prints INFO lines to stdout; warnings
 * and errors of any rank also go to stderr. Lines logged before the job directory exists are
 * kept and written to the file once it is opened, so the file tells the whole story.
 *
 * Progress: when rank 0's stdout is a terminal, the training progress lines (logger_progress)
 * are shown on the console as one status line redrawn in place with '\r' (epoch, a bar, step of
 * total, loss, images/s, ETA); other lines are printed above it (the bar is erased, the line
 * printed, the bar drawn again). When stdout is not a terminal (batch jobs, pipes) or TERM is
 * "dumb", the progress lines are printed like any INFO line. The log file always gets the plain
 * line.
 *
 * TensorBoard (--tensorboard): rank 0 also writes every metrics.jsonl record as scalars into an
 * event file of <job_dir>/tensorboard (tfevents.h; the tags: metrics_tags.h), from the same
 * text, so the two never disagree; and scalars that have no record (logger_scalars). A write
 * that fails is reported once, and TensorBoard's file then ends there; metrics.jsonl goes on. */
#ifndef DDP_LOGGER_H
#define DDP_LOGGER_H

#include <stdio.h>

#include "tfevents.h"

typedef struct {
    int rank, world_size;
    char host[64];
    FILE *file;           /* NULL until logger_open */
    FILE *metrics;        /* rank 0 only */
    TfEvents *tb;         /* rank 0 with --tensorboard; NULL otherwise */
    char *early;          /* lines logged before logger_open */
    size_t early_len;
    FILE *early_f;
    int tty;              /* rank 0 and stdout is a terminal: draw the progress bar */
    int bar_shown;        /* the bar is on the console's last line, without a newline */
    size_t bar_len;       /* characters of the bar last drawn (to erase it) */
    char bar[512];
} Logger;

void logger_init(Logger *l, int rank, int world_size);
/* Opens <job_dir>/logs/rank-NNNNN.log (and metrics.jsonl on rank 0). Returns 0 or -1 with a
 * one-line reason in err. */
int logger_open(Logger *l, const char *job_dir, char *err, size_t errlen);
void log_info(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_warn(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A training progress line: fmt/... is the plain line (log file always; stdout when not a
 * terminal); on a terminal rank 0 draws the bar from the numbers instead. epoch is 1-based;
 * eta_sec < 0 when unknown. The bar is left on its own line once step >= total. */
void logger_progress(Logger *l, long epoch, long epochs, long step, long total, double loss,
                     double images_per_sec, double eta_sec, const char *fmt, ...)
    __attribute__((format(printf, 9, 10)));
/* Ends the bar's line if one is drawn (so that what follows starts on a new line). */
void logger_progress_end(Logger *l);
/* Appends one JSON object (without newline) as a line of metrics.jsonl (rank 0; others no-op),
 * and its numbers to TensorBoard's file when one is open. */
void logger_metrics(Logger *l, const char *json);
/* Rank 0 (others: no-op): opens a new event file in <job_dir>/tensorboard, after logger_open.
 * Returns 0, or -1 with one line in err. */
int logger_open_tensorboard(Logger *l, const char *job_dir, char *err, size_t errlen);
/* n scalars at step into TensorBoard's file only (rank 0 with one open; otherwise nothing):
 * values that no metrics record holds, such as every rank's shares. */
void logger_scalars(Logger *l, long step, const TfScalar *s, size_t n);
void logger_close(Logger *l);

#endif
