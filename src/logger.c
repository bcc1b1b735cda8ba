/* logger.c - see logger.h. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "logger.h"
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
}

int logger_open(Logger *l, const char *job_dir, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/logs", job_dir);
    if (mkdir_p(path) != 0) {
        snprintf(err, errlen, "%s: cannot create directory: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/logs/rank-%05d.log", job_dir, l->rank);
    l->file = fopen(path, "a");
    if (!l->file) {
        snprintf(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    if (l->rank == 0) {
        snprintf(path, sizeof path, "%s/metrics.jsonl", job_dir);
        l->metrics = fopen(path, "a");
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

static void vlog(Logger *l, const char *level, int warn, const char *fmt, va_list ap) {
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
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
    if (warn) {
        fflush(stdout);
        fprintf(stderr, "%s: %s: [rank %d/%d %s] %s\n", g_progname, level, l->rank, l->world_size,
                l->host, msg);
        fflush(stderr);
    } else if (l->rank == 0) {
        fprintf(stdout, "%s\n", msg);
        fflush(stdout);
    }
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

void logger_metrics(Logger *l, const char *json) {
    if (!l->metrics) return;
    fprintf(l->metrics, "%s\n", json);
    fflush(l->metrics);
}

void logger_close(Logger *l) {
    if (l->file) fclose(l->file);
    if (l->metrics) fclose(l->metrics);
    if (l->early_f) fclose(l->early_f);
    free(l->early);
    memset(l, 0, sizeof *l);
}
