/* logger.h - per-rank log file, rank 0's console, and metrics.jsonl.
 *
 * Every rank writes its own log file (logs/rank-NNNNN.log in the job directory) with a
 * timestamp and [rank r/W host] on each line. Rank 0 also prints INFO lines to stdout; warnings
 * and errors of any rank also go to stderr. Lines logged before the job directory exists are
 * kept and written to the file once it is opened, so the file tells the whole story. */
#ifndef DDP_LOGGER_H
#define DDP_LOGGER_H

#include <stdio.h>

typedef struct {
    int rank, world_size;
    char host[64];
    FILE *file;           /* NULL until logger_open */
    FILE *metrics;        /* rank 0 only */
    char *early;          /* lines logged before logger_open */
    size_t early_len;
    FILE *early_f;
} Logger;

void logger_init(Logger *l, int rank, int world_size);
/* Opens <job_dir>/logs/rank-NNNNN.log (and metrics.jsonl on rank 0). Returns 0 or -1 with a
 * one-line reason in err. */
int logger_open(Logger *l, const char *job_dir, char *err, size_t errlen);
void log_info(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_warn(Logger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends one JSON object (without newline) as a line of metrics.jsonl (rank 0; others no-op). */
void logger_metrics(Logger *l, const char *json);
void logger_close(Logger *l);

#endif
