/* SPDX-License-Identifier: BSD-3-Clause */
/* logger.c - see logger.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
#include "metrics_tags.h"
#include "util.h"

void logger_init(Logger *l, int rank, int world_size) {
    memset(l, 0, sizeof *l);
    l->rank = rank;
    l->world_size = world_size;
    if (gethostname(l->host, sizeof l->host) != 0) snprintf(l->host, sizeof l->host, "unknown");
    l->host[sizeof l->host - 1] = '\0';
    char *dot = strchr(l->host, '.');
    if (dot) *dot = '\0';
    l->early_f = open_memstream(&l->early, &l->early_len);
    CHECK(l->early_f != NULL);
    const char *term = getenv("TERM");
    /* Open MPI's mpirun hands every rank a pseudo-terminal for stdout even when its own output
     * goes to a file, so under it a terminal says nothing about where the lines end up:
     * plain lines there. srun --pty gives a real one. */
    l->tty = rank == 0 && isatty(STDOUT_FILENO) && !(term && !strcmp(term, "dumb")) &&
             !getenv("OMPI_COMM_WORLD_SIZE");
}

int logger_open(Logger *l, const char *job_dir, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/logs", job_dir);
    if (mkdir_p(path) != 0) {
        snprintf(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/logs/rank-%05d.log", job_dir, l->rank);
    l->file = fopen_append_nofollow(path);   /* a planted symlink is never written through */
    if (!l->file) {
        snprintf(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    if (l->rank == 0) {
        snprintf(path, sizeof path, "%s/metrics.jsonl", job_dir);
        l->metrics = fopen_append_nofollow(path);
        if (!l->metrics) {
            snprintf(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
            fclose(l->file);
            l->file = NULL;
            return -1;
        }
    }
    fflush(l->early_f);
    if (l->early_len) fwrite(l->early, 1, l->early_len, l->file);
    fflush(l->file);
    fclose(l->early_f);
    free(l->early);
    l->early_f = NULL;
    l->early = NULL;
    return 0;
}

/* The line with timestamp and [rank r/W host] into the log file (or the early buffer). */
static void file_line(Logger *l, const char *level, const char *msg) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[40];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    FILE *f = l->file ? l->file : l->early_f;
    if (f) {
        fprintf(f, "%s.%03d [rank %d/%d %s] %s %s\n", ts, (int)(tv.tv_usec / 1000), l->rank,
                l->world_size, l->host, level, msg);
        fflush(f);
    }
}

/* Erases the bar (spaces over it, cursor back to column 0) so a line can be printed there. */
static void bar_erase(Logger *l) {
    if (!l->bar_shown) return;
    fprintf(stdout, "\r%*s\r", (int)l->bar_len, "");
    fflush(stdout);
}

static void bar_redraw(Logger *l) {
    if (!l->bar_shown) return;
    fprintf(stdout, "\r%s", l->bar);
    fflush(stdout);
}

static void vlog(Logger *l, const char *level, int warn, const char *fmt, va_list ap) {
    char raw[4096], msg[4 * sizeof raw];
    vsnprintf(raw, sizeof raw, fmt, ap);
    /* A control character from a name (a --job_dir with a newline or an escape, in every
     * checkpoint's path) would forge a line or reach the terminal: shown as die() shows it. */
    one_line(msg, sizeof msg, raw);
    file_line(l, level, msg);
    if (warn) {
        bar_erase(l);
        fflush(stdout);
        fprintf(stderr, "%s: %s: [rank %d/%d %s] %s\n", g_progname, level, l->rank, l->world_size,
                l->host, msg);
        fflush(stderr);
        bar_redraw(l);
    } else if (l->rank == 0) {
        bar_erase(l);
        fprintf(stdout, "%s\n", msg);
        fflush(stdout);
        bar_redraw(l);
    }
}

static int terminal_columns(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n >= 20 ? n : 80;
}

static void format_eta(char *buf, size_t n, double sec) {
    if (!(sec >= 0) || sec > 360000.0 * 99) {
        snprintf(buf, n, "--:--");
        return;
    }
    long s = (long)(sec + 0.5);
    if (s >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, n, "%ld:%02ld", s / 60, s % 60);
}

void logger_progress(Logger *l, long epoch, long epochs, long step, long total, double loss,
                     double images_per_sec, double eta_sec, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    file_line(l, "INFO", msg);
    if (l->rank != 0) return;
    if (!l->tty) {
        fprintf(stdout, "%s\n", msg);
        fflush(stdout);
        return;
    }
    /* epoch 2/10 [########--------]  45% 36/80 loss 2.3370 1234 img/s ETA 0:42 */
    char eta[32], left[96], right[160];
    format_eta(eta, sizeof eta, eta_sec);
    double frac = total > 0 ? (double)step / (double)total : 0.0;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    snprintf(left, sizeof left, "epoch %ld/%ld ", epoch, epochs);
    snprintf(right, sizeof right, " %3.0f%% %ld/%ld loss %.4f %.0f img/s ETA %s", 100.0 * frac, step, total, loss,
             images_per_sec, eta);
    int cols = terminal_columns() - 1;   /* never write the last column: no automatic wrap */
    int width = cols - (int)strlen(left) - (int)strlen(right) - 2;
    if (width > 40) width = 40;
    char bar[64] = "";
    if (width >= 5) {
        int fill = (int)(frac * width + 0.5);
        bar[0] = '[';
        for (int i = 0; i < width; i++) bar[1 + i] = i < fill ? '#' : '-';
        bar[width + 1] = ']';
        bar[width + 2] = '\0';
    }
    char line[sizeof l->bar];
    snprintf(line, sizeof line, "%s%s%s", left, bar, right);
    if ((int)strlen(line) > cols && cols > 0) line[cols] = '\0';
    size_t len = strlen(line), old = l->bar_shown ? l->bar_len : 0;
    /* Overwrite in place; pad with spaces when the new line is shorter than the old one. */
    fprintf(stdout, "\r%s%*s", line, old > len ? (int)(old - len) : 0, "");
    if (old > len) fprintf(stdout, "\r%s", line);
    memcpy(l->bar, line, len + 1);
    l->bar_len = len;
    l->bar_shown = 1;
    g_console_line_open = 1;
    if (step >= total) logger_progress_end(l);
    fflush(stdout);
}

void logger_progress_end(Logger *l) {
    if (!l->bar_shown) return;
    fputc('\n', stdout);
    fflush(stdout);
    l->bar_shown = 0;
    g_console_line_open = 0;
}

void log_info(Logger *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(l, "INFO", 0, fmt, ap);
    va_end(ap);
}

void log_warn(Logger *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(l, "WARNING", 1, fmt, ap);
    va_end(ap);
}

int logger_open_tensorboard(Logger *l, const char *job_dir, char *err, size_t errlen) {
    if (l->rank != 0) return 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tensorboard", job_dir);
    TfEvents *t = callocCheck(1, sizeof *t);
    if (tfevents_open(t, dir, err, errlen) != 0) {
        free(t);
        return -1;
    }
    l->tb = t;
    log_info(l, "TensorBoard: %s (tensorboard --logdir %s)", t->path, dir);
    return 0;
}

static void tb_close(Logger *l) {
    if (!l->tb) return;
    tfevents_close(l->tb);
    free(l->tb);
    l->tb = NULL;
}

/* A failed write (a full disk) is reported once and ends TensorBoard's file: the run goes on. */
static void tb_write(Logger *l, long step, const TfScalar *s, size_t n) {
    if (tfevents_write_scalars(l->tb, step, s, n) == 0) return;
    const int e = errno;
    char path[sizeof l->tb->path];
    memcpy(path, l->tb->path, sizeof path);
    tb_close(l);
    log_warn(l, "%s: cannot write: %s; TensorBoard's events end here (metrics.jsonl goes on)", path, strerror(e));
}

void logger_scalars(Logger *l, long step, const TfScalar *s, size_t n) {
    if (l->tb) tb_write(l, step, s, n);
}

void logger_metrics(Logger *l, const char *json) {
    if (!l->metrics) return;
    fprintf(l->metrics, "%s\n", json);
    fflush(l->metrics);
    if (!l->tb) return;
    TfScalar s[METRICS_TAGS_MAX];
    int64_t step = 0;
    char err[512];
    const int n = metrics_tags_read(json, &step, s, METRICS_TAGS_MAX, err, sizeof err);
    /* every record is ddptrain's own: a malformed one is a bug, named, not a reason to stop */
    if (n < 0) log_warn(l, "TensorBoard: %s", err);
    else if (n > 0) tb_write(l, (long)step, s, (size_t)n);
}

void logger_close(Logger *l) {
    logger_progress_end(l);
    if (l->file) fclose(l->file);
    if (l->metrics) fclose(l->metrics);
    tb_close(l);
    if (l->early_f) fclose(l->early_f);
    free(l->early);
    memset(l, 0, sizeof *l);
}
