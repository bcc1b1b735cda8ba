/* SPDX-License-Identifier: BSD-3-Clause */
/* timeacct.c - see timeacct.h. */
#include "timeacct.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const k_phase[TIME_PHASES] = {"startup", "train", "redone", "eval", "checkpoint", "shutdown"};

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void timeacct_init(TimeAcct *t) {
    memset(t, 0, sizeof *t);
    t->cur.run = 1;
    snprintf(t->cur.state, sizeof t->cur.state, "running");
    t->cur.phase = TIME_STARTUP;
    t->cur.start = wall_now();
    t->mono0 = t->phase_t = now_sec();
    t->cur.end = t->cur.start;
}

void timeacct_free(TimeAcct *t) {
    if (t->f) fclose(t->f);
    free(t->prev);
    t->f = NULL;
    t->prev = NULL;
    t->n_prev = 0;
    t->on = 0;
}

void timeacct_format(const TimeRecord *r, char *buf, size_t n) {
    snprintf(buf, n,
             "{\"run\": %d, \"state\": \"%s\", \"phase\": \"%s\", \"start\": %.3f, \"end\": %.3f, \"startup_sec\": %.3f, "
             "\"train_sec\": %.3f, \"redone_sec\": %.3f, \"eval_sec\": %.3f, \"checkpoint_sec\": %.3f, "
             "\"shutdown_sec\": %.3f, \"gap_sec\": %.3f, \"first_step\": %ld, \"step\": %ld, \"redone_steps\": %ld}",
             r->run, r->state, k_phase[r->phase], r->start, r->end, r->sec[TIME_STARTUP], r->sec[TIME_TRAIN],
             r->sec[TIME_REDONE], r->sec[TIME_EVAL], r->sec[TIME_CHECKPOINT], r->sec[TIME_SHUTDOWN], r->gap,
             r->first_step, r->step, r->redone_steps);
}

/* The text after "key": in line, or NULL. */
static const char *field(const char *line, const char *key) {
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

static int num(const char *line, const char *key, double *v) {
    const char *p = field(line, key);
    char *end;
    if (!p) return -1;
    errno = 0;
    *v = strtod(p, &end);
    return end == p || errno || !isfinite(*v) ? -1 : 0;
}

static int str(const char *line, const char *key, char *buf, size_t n) {
    const char *p = field(line, key);
    if (!p || *p != '"') return -1;
    p++;
    size_t len = strcspn(p, "\"");
    if (p[len] != '"' || len >= n) return -1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 0;
}

int timeacct_parse(const char *line, TimeRecord *r) {
    memset(r, 0, sizeof *r);
    double v[TIME_PHASES + 7];
    static const char *const keys[] = {"run", "start", "end", "gap_sec", "first_step", "step", "redone_steps"};
    for (int i = 0; i < 7; i++)
        if (num(line, keys[i], &v[i]) != 0) return -1;
    for (int p = 0; p < TIME_PHASES; p++) {
        char key[32];
        snprintf(key, sizeof key, "%s_sec", k_phase[p]);
        if (num(line, key, &r->sec[p]) != 0 || r->sec[p] < 0.0) return -1;
    }
    char phase[16];
    if (str(line, "state", r->state, sizeof r->state) != 0 || str(line, "phase", phase, sizeof phase) != 0) return -1;
    r->phase = TIME_PHASES;
    for (int p = 0; p < TIME_PHASES; p++)
        if (!strcmp(phase, k_phase[p])) r->phase = (TimePhase)p;
    if (r->phase == TIME_PHASES || v[0] < 1 || v[0] > 1e9 || v[2] < v[1]) return -1;
    /* only ours: the state is written back as it is read */
    if (strcmp(r->state, "running") && strcmp(r->state, "done") && strcmp(r->state, "preempted") &&
        strcmp(r->state, "interrupted"))
        return -1;
    r->run = (int)v[0];
    r->start = v[1];
    r->end = v[2];
    r->gap = v[3];
    r->first_step = (long)v[4];
    r->step = (long)v[5];
    r->redone_steps = (long)v[6];
    return 0;
}

static double mtime_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0.0;
    return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

/* The step of metrics.jsonl's last training line (0: none). Its tail is enough. */
static long metrics_last_step(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[65536];
    long step = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        const long size = ftell(f);
        if (size > (long)sizeof buf - 1) fseek(f, size - (long)sizeof buf + 1, SEEK_SET);
        else rewind(f);
    }
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        double v;
        if (strstr(line, "\"loss\":") && num(line, "step", &v) == 0 && v >= 0) step = (long)v;
    }
    return step;
}

/* Earlier runs from the file, one record each (a run's last line); -1 with errno on a read error. */
static int read_runs(TimeAcct *t, int *skipped) {
    *skipped = 0;
    FILE *f = fopen(t->path, "r");
    if (!f) return errno == ENOENT ? 0 : -1;
    char line[2048];
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        TimeRecord r;
        if (timeacct_parse(line, &r) != 0) {
            (*skipped)++;   /* a line cut by a kill during its write, or not ours */
            continue;
        }
        if (t->n_prev > 0 && t->prev[t->n_prev - 1].run == r.run) {
            t->prev[t->n_prev - 1] = r;
            continue;
        }
        if (t->n_prev == cap) {
            cap = cap ? 2 * cap : 8;
            TimeRecord *p = realloc(t->prev, (size_t)cap * sizeof *p);
            CHECK(p != NULL);
            t->prev = p;
        }
        t->prev[t->n_prev++] = r;
    }
    const int err = ferror(f);
    fclose(f);
    if (err) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int timeacct_open(TimeAcct *t, const char *job_dir, int *skipped, char *err, size_t errlen) {
    char metrics[4300], latest[4300];
    snprintf_check(t->path, sizeof t->path, "%s/" TIMEACCT_FILE, job_dir);
    snprintf_check(metrics, sizeof metrics, "%s/metrics.jsonl", job_dir);
    snprintf_check(latest, sizeof latest, "%s/checkpoints/latest", job_dir);
    if (read_runs(t, skipped) != 0) return errf(err, errlen, "%s: cannot read: %s", t->path, strerror(errno));
    const long metrics_step = metrics_last_step(metrics);
    t->redo_until = metrics_step;
    if (t->n_prev > 0) {
        TimeRecord *last = &t->prev[t->n_prev - 1];
        if (!strcmp(last->state, "running")) {
            /* Interrupted: it ended when the job directory last heard of it, not before its
             * last record and not after this run began. */
            double end = last->end, m = mtime_of(metrics), l = mtime_of(latest);
            if (m > end) end = m;
            if (l > end) end = l;
            if (end > t->cur.start) end = t->cur.start > last->end ? t->cur.start : last->end;
            last->sec[last->phase] += end - last->end;
            last->end = end;
            /* metrics.jsonl's last step is this run's if the run wrote it */
            if (m >= last->start && metrics_step > last->step) last->step = metrics_step;
            snprintf(last->state, sizeof last->state, "interrupted");
        }
        for (int i = 0; i < t->n_prev; i++)
            if (t->prev[i].step > t->redo_until) t->redo_until = t->prev[i].step;
        t->cur.run = last->run + 1;
        t->cur.gap = t->cur.start > last->end ? t->cur.start - last->end : 0.0;
    }
    /* One line per run from now on, replacing what a crash may have cut. */
    size_t cap = (size_t)t->n_prev * 1024 + 1, len = 0;
    char *text = mallocCheck(cap);
    text[0] = '\0';
    for (int i = 0; i < t->n_prev; i++) {
        timeacct_format(&t->prev[i], text + len, cap - len - 1);
        len += strlen(text + len);
        text[len++] = '\n';
        text[len] = '\0';
    }
    if (write_file_atomic(t->path, text, len) != 0) {
        free(text);
        return errf(err, errlen, "%s: cannot write: %s", t->path, strerror(errno));
    }
    free(text);
    t->f = fopen_append_nofollow(t->path);
    if (!t->f) return errf(err, errlen, "%s: cannot open for appending: %s", t->path, strerror(errno));
    t->on = 1;
    if (timeacct_write(t, 0, TIMEACCT_NOW) != 0) return errf(err, errlen, "%s: cannot write: %s", t->path, strerror(errno));
    return 0;
}

void timeacct_resume_at(TimeAcct *t, long step) {
    t->cur.first_step = t->cur.step = step;
}

int timeacct_write(TimeAcct *t, long step, int when) {
    if (!t->on) return 0;
    const double now = now_sec();
    if (when == TIMEACCT_DUE && now - t->last_write < TIMEACCT_WRITE_SEC) return 0;
    if (when == TIMEACCT_PHASE && t->cur.phase == t->last_phase && now - t->last_write < TIMEACCT_PHASE_SEC) return 0;
    timeacct_enter(t, t->cur.phase);   /* the phase so far, into its total */
    t->last_write = now;
    t->last_phase = t->cur.phase;
    t->cur.end = t->cur.start + (now - t->mono0);
    t->cur.step = step > t->cur.step ? step : t->cur.step;
    const long upto = t->cur.step < t->redo_until ? t->cur.step : t->redo_until;
    t->cur.redone_steps = upto > t->cur.first_step ? upto - t->cur.first_step : 0;
    char line[1024];
    timeacct_format(&t->cur, line, sizeof line);
    if (fprintf(t->f, "%s\n", line) < 0 || fflush(t->f) != 0) {
        const int e = errno;
        t->on = 0;   /* said once; the run goes on */
        errno = e;
        return -1;
    }
    return 0;
}

int timeacct_close(TimeAcct *t, long step, const char *state) {
    snprintf(t->cur.state, sizeof t->cur.state, "%s", state);
    const int rc = timeacct_write(t, step, TIMEACCT_NOW);
    if (t->f && fclose(t->f) != 0 && rc == 0) {
        t->f = NULL;
        t->on = 0;
        return -1;
    }
    t->f = NULL;
    t->on = 0;
    return rc;
}

/* As written to the file, so that the sums here and ddptrain-plot's are the same numbers. */
static double ms(double s) { return round(s * 1e3) / 1e3; }

/* "41.2 s", "12m03s", "3h07m"; ddptrain-plot writes the same. */
static void duration(double s, char *buf, size_t n) {
    if (s < 60.0) snprintf(buf, n, "%.1f s", s);
    else if (s < 3600.0) snprintf(buf, n, "%dm%02ds", (int)(s / 60.0), (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600.0), ((int)s % 3600) / 60);
}

void timeacct_summary(const TimeAcct *t, char *buf, size_t n) {
    double sec[TIME_PHASES] = {0}, gap = 0.0, wall = 0.0;
    long redone_steps = 0;
    for (int i = 0; i <= t->n_prev; i++) {
        const TimeRecord *r = i < t->n_prev ? &t->prev[i] : &t->cur;
        double w = 0.0;
        for (int p = 0; p < TIME_PHASES; p++) {
            sec[p] += ms(r->sec[p]);
            w += ms(r->sec[p]);
        }
        gap += ms(r->gap);
        wall += w + ms(r->gap);
        redone_steps += r->redone_steps;
    }
    char d[8][32];
    duration(sec[TIME_TRAIN], d[0], sizeof d[0]);
    duration(wall, d[1], sizeof d[1]);
    duration(sec[TIME_STARTUP], d[2], sizeof d[2]);
    duration(sec[TIME_EVAL], d[3], sizeof d[3]);
    duration(sec[TIME_CHECKPOINT], d[4], sizeof d[4]);
    duration(sec[TIME_REDONE], d[5], sizeof d[5]);
    duration(sec[TIME_SHUTDOWN], d[6], sizeof d[6]);
    duration(gap, d[7], sizeof d[7]);
    const int runs = t->n_prev + 1;
    snprintf(buf, n, "effective training time: %s of %s wall (%.1f%%) over %d run%s; start-up %s, evaluation %s, "
             "checkpoints %s, redone %s (%ld step%s), shutdown %s, gaps %s", d[0], d[1],
             wall > 0.0 ? 100.0 * sec[TIME_TRAIN] / wall : 0.0, runs, runs == 1 ? "" : "s", d[2], d[3], d[4], d[5],
             redone_steps, redone_steps == 1 ? "" : "s", d[6], d[7]);
}
