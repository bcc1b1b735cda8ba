/* SPDX-License-Identifier: BSD-3-Clause */
/* flight.c - see flight.h. */
#include "flight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "reach.h"
#include "base/util.h"

/* The process's recorder, for the fatal-signal handler (one communicator per process). */
static Flight *g_flight;

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* async-signal-safe, and comparable across hosts */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

Flight *flight_create(int rank, int world_size, const char *host) {
    Flight *f = callocCheck(1, sizeof *f);
    f->rank = rank;
    f->world_size = world_size;
    snprintf(f->host, sizeof f->host, "%.*s", (int)sizeof f->host - 1, host && *host ? host : "unknown");
    f->next_seq = 1;
    f->step = -1;
    f->bucket = -1;
    return f;
}

void flight_free(Flight *f) {
    if (!f) return;
    if (g_flight == f) g_flight = NULL;
    if (f->ticker_on) {
        f->ticker_stop = 1;
        pthread_join(f->ticker, NULL);
    }
    free(f->hosts);
    free(f->silent);
    free(f->buf);
    free(f);
}

void flight_set_step(Flight *f, long step) { f->step = step; }

void flight_set_bucket(Flight *f, int bucket, int n_bucket) {
    f->bucket = bucket;
    f->n_bucket = n_bucket;
}

int64_t flight_posted(Flight *f, const char *kind, uint64_t bytes, const char *context) {
    const int64_t seq = f->next_seq;
    FlightRecord *r = &f->ring[seq % FLIGHT_RING];
    r->seq = 0;   /* a dump from a signal handler skips the slot until it is whole */
    r->kind = kind;
    r->state = FLIGHT_POSTED;
    r->step = f->step;
    r->bucket = f->bucket;
    r->n_bucket = f->bucket >= 0 ? f->n_bucket : 0;
    r->bytes = bytes;
    r->t_post = wall_now();
    r->t_done = 0.0;
    size_t n = strnlen(context ? context : "", FLIGHT_CTX_MAX - 1);
    if (n) memcpy(r->context, context, n);
    r->context[n] = '\0';
    r->seq = seq;
    f->next_seq = seq + 1;
    return seq;
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* async-signal-safe */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *tick(void *arg) {
    Flight *f = arg;
    while (!f->ticker_stop) {
        struct timespec ts = {0, (long)(FLIGHT_TICK_S * 1e9)};
        nanosleep(&ts, NULL);
        double now = mono_now(), gap = now - f->t_tick;
        if (gap > FLIGHT_STALL_S) {
            f->gap_s = gap;
            f->gap_end = now;
        }
        f->t_tick = now;
    }
    return NULL;
}

/* How long this process did not run, lately: since the oldest collective still posted was
 * posted, or just before now. After a stop the signal handler may run before or after the
 * ticker's first tick, so both the time since the last tick and the last gap count. */
static double stall_now(const Flight *f) {
    if (!f->ticker_on) return 0.0;
    const FlightRecord *oldest = NULL;
    for (int i = 0; i < FLIGHT_RING; i++) {
        const FlightRecord *r = &f->ring[i];
        if (r->state != FLIGHT_COMPLETED && r->state != FLIGHT_EMPTY && (!oldest || r->seq < oldest->seq)) oldest = r;
    }
    const double now = mono_now(), since = now - f->t_tick;
    /* The gap counts if it ended after the oldest post (wall and monotonic clocks run alike),
     * or only just: a rank stopped in its computation, continued and then ended by the
     * launcher may post the next collective in the moment between, or not yet. */
    const double ago = now - f->gap_end;
    const double gap = (oldest && ago < wall_now() - oldest->t_post) || ago < 2 * FLIGHT_STALL_S ? f->gap_s : 0.0;
    return since > gap ? since : gap;
}

void flight_completed(Flight *f, int64_t seq) {
    FlightRecord *r = &f->ring[seq % FLIGHT_RING];
    if (r->seq != seq || r->state != FLIGHT_POSTED) return;   /* overwritten by 64 newer ones */
    r->state = FLIGHT_COMPLETED;
    r->t_done = wall_now();
}

const FlightRecord *flight_timed_out(Flight *f) {
    f->stalled_s = stall_now(f);   /* now: the probe and the dump come later */
    FlightRecord *oldest = NULL;
    for (int i = 0; i < FLIGHT_RING; i++) {
        FlightRecord *r = &f->ring[i];
        if (r->state == FLIGHT_POSTED && (!oldest || r->seq < oldest->seq)) oldest = r;
    }
    if (oldest) oldest->state = FLIGHT_TIMED_OUT;
    return oldest;
}

int flight_record_path(char *buf, size_t n, const char *flight_dir, int q) {
    int r = snprintf(buf, n, "%s/rank-%05d.txt", flight_dir, q);
    return r < 0 || (size_t)r >= n ? -1 : 0;
}

void flight_probe_peers(Flight *f, double limit_s) {
    if (!f || !f->hosts || !f->silent) return;
    const char **names = callocCheck((size_t)f->world_size, sizeof *names);
    int n = 0;
    for (int q = 0; q < f->world_size; q++) {
        const char *h = f->hosts[q];
        if (!h[0] || !strcmp(h, f->host)) continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(names[i], h);
        if (!seen) names[n++] = h;
    }
    if (n > 0) {
        unsigned char *answered = callocCheck((size_t)n, 1);
        reach_probe(names, n, limit_s, answered);
        for (int q = 0; q < f->world_size; q++)
            for (int i = 0; i < n; i++)
                if (!answered[i] && !strcmp(f->hosts[q], names[i])) f->silent[q] = 1;
        free(answered);
    }
    free(names);
}

/* ---- the dump: formatting without stdio (signal handlers) ----------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} Out;

static void put_str(Out *o, const char *s) {
    while (*s && o->len + 1 < o->cap) o->p[o->len++] = *s++;
}

/* A context or host name on one line of the record: newlines would break the format. */
static void put_word_line(Out *o, const char *s) {
    for (; *s && o->len + 1 < o->cap; s++) o->p[o->len++] = (*s == '\n' || *s == '\r') ? ' ' : *s;
}

static void put_i64(Out *o, int64_t v) {
    char d[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { d[n++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) d[n++] = '-';
    while (n > 0 && o->len + 1 < o->cap) o->p[o->len++] = d[--n];
}

/* Seconds with 6 decimals (wall-clock times are positive). */
static void put_time(Out *o, double t) {
    if (t <= 0) { put_str(o, "0"); return; }
    int64_t s = (int64_t)t, us = (int64_t)((t - (double)s) * 1e6 + 0.5);
    if (us >= 1000000) { s++; us -= 1000000; }
    put_i64(o, s);
    char frac[8] = ".000000";
    for (int k = 6; k >= 1; k--) { frac[k] = (char)('0' + us % 10); us /= 10; }
    put_str(o, frac);
}

static const char *state_name(int s) {
    switch (s) {
    case FLIGHT_POSTED: return "posted";
    case FLIGHT_COMPLETED: return "completed";
    case FLIGHT_TIMED_OUT: return "timeout";
    }
    return "empty";
}

static void format_record(const Flight *f, Out *o, const char *reason) {
    put_str(o, "ddptrain flight record 1\nrank ");
    put_i64(o, f->rank);
    put_str(o, " of ");
    put_i64(o, f->world_size);
    put_str(o, "\nhost ");
    put_word_line(o, f->host);
    put_str(o, "\npid ");
    put_i64(o, (int64_t)getpid());
    put_str(o, "\nclock ");
    put_time(o, wall_now());
    put_str(o, "\nreason ");
    put_word_line(o, reason);
    put_str(o, "\nlast_step ");
    put_i64(o, f->step);
    put_str(o, "\n");
    for (int q = 0; f->hosts && q < f->world_size; q++) {
        put_str(o, "peer ");
        put_i64(o, q);
        put_str(o, " ");
        put_word_line(o, f->hosts[q][0] ? f->hosts[q] : "unknown");
        put_str(o, "\n");
    }
    for (int q = 0; f->silent && q < f->world_size; q++) {
        if (!f->silent[q]) continue;
        int first = 1;   /* each host once */
        for (int p = 0; p < q && first; p++) first = !(f->silent[p] && !strcmp(f->hosts[p], f->hosts[q]));
        if (!first) continue;
        put_str(o, "silent ");
        put_word_line(o, f->hosts[q]);
        put_str(o, "\n");
    }
    double stall = f->stalled_s > 0 ? f->stalled_s : stall_now(f);
    if (stall > FLIGHT_STALL_S) {
        put_str(o, "stalled ");
        put_time(o, stall);
        put_str(o, "\n");
    }
    put_str(o, "# seq kind state step bucket n_buckets bytes posted completed context\n");
    /* oldest first: the ring from the slot after the newest */
    for (int64_t s = f->next_seq - FLIGHT_RING; s < f->next_seq; s++) {
        if (s < 1) continue;
        const FlightRecord *r = &f->ring[s % FLIGHT_RING];
        if (r->seq != s || r->state == FLIGHT_EMPTY) continue;
        put_str(o, "c ");
        put_i64(o, r->seq);
        put_str(o, " ");
        put_str(o, r->kind);
        put_str(o, " ");
        put_str(o, state_name(r->state));
        put_str(o, " ");
        put_i64(o, r->step);
        put_str(o, " ");
        put_i64(o, r->bucket);
        put_str(o, " ");
        put_i64(o, r->n_bucket);
        put_str(o, " ");
        put_i64(o, (int64_t)r->bytes);
        put_str(o, " ");
        put_time(o, r->t_post);
        put_str(o, " ");
        put_time(o, r->t_done);
        put_str(o, " ");
        put_word_line(o, r->context[0] ? r->context : "-");
        put_str(o, "\n");
    }
    put_str(o, "end\n");
}

static int write_record(Flight *f, const char *reason);

/* One writer at a time: the record is formatted in one buffer and written to one temporary
 * name, and SIGTERM may land on another thread (an MPI or OpenMP one) while this one writes.
 * A SIGTERM handler that finds the writer busy leaves it; a fault waits for it, at most 1 s
 * (a record of SIGTERM is then replaced by the fault's). Lock-free, so async-signal-safe. */
static int take_writer(Flight *f, int wait) {
    for (int k = 0;; k++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&f->writer, &expected, 1)) return 1;
        if (!wait || k >= 1000) return 0;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int flight_dump(Flight *f, const char *reason) {
    if (!f || !f->buf) { errno = ENOENT; return -1; }
    if (f->dumped) return 0;
    f->dumped = 1;
    if (!take_writer(f, 1)) { errno = EBUSY; return -1; }
    int r = write_record(f, reason);
    atomic_store(&f->writer, 0);
    return r;
}

static int write_record(Flight *f, const char *reason) {
    Out o = {f->buf, 0, f->buf_cap};
    format_record(f, &o, reason);
    /* Made by the first dump, so that a healthy run leaves no empty directory behind. */
    if (mkdir(f->dir, 0777) != 0 && errno != EEXIST) return -1;
    int fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < o.len) {
        ssize_t w = write(fd, o.p + off, o.len - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno; close(fd); unlink(f->tmp); errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    /* fsync: the record must be whole in the file system the other ranks read, even if this
     * process is killed right after the rename (the job's abort kills every rank). */
    if (fsync(fd) != 0 || close(fd) != 0 || rename(f->tmp, f->path) != 0) {
        int e = errno; unlink(f->tmp); errno = e;
        return -1;
    }
    return 0;
}

/* ---- fatal signals ---------------------------------------------------------------------------- */

static const int k_fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

/* The handlers found in place (MPI libraries install their own for these signals to print a
 * backtrace, sanitizers theirs): the record is written first, then theirs runs. */
static struct sigaction g_old[sizeof k_fatal / sizeof k_fatal[0]], g_term_old;

static void call_old(const struct sigaction *old, int sig, siginfo_t *info, void *uc) {
    if (old->sa_flags & SA_SIGINFO) old->sa_sigaction(sig, info, uc);
    else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) old->sa_handler(sig);
}

static void on_fatal(int sig, siginfo_t *info, void *uc) {
    int e = errno;
    char reason[24] = "signal ";
    Out o = {reason, strlen(reason), sizeof reason};
    put_i64(&o, sig);
    reason[o.len] = '\0';
    flight_dump(g_flight, reason);
    errno = e;
    for (size_t i = 0; i < sizeof k_fatal / sizeof k_fatal[0]; i++)
        if (k_fatal[i] == sig) call_old(&g_old[i], sig, info, uc);
    /* Whatever the old handler did, the signal ends the process as it would have (core dump
     * included): the default action, raised again (a fault also recurs on return). */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* SIGTERM is how a launcher ends the ranks of a job when one of them died (mpirun, srun) and
 * how Slurm ends or preempts a job: the record then shows where every rank was. It is not a
 * fault of this rank, so a timeout or abort after it (a preemption checkpoint that hangs) still
 * writes its own record over it; and the handler that was there (the preemption flag) runs
 * after it, or the default action. */
static void on_term(int sig, siginfo_t *info, void *uc) {
    int e = errno;
    Flight *f = g_flight;
    if (f && f->buf && !f->dumped && take_writer(f, 0)) {
        if (!f->dumped) write_record(f, "signal 15");
        atomic_store(&f->writer, 0);
    }
    errno = e;
    if ((g_term_old.sa_flags & SA_SIGINFO) || g_term_old.sa_handler != SIG_DFL) {
        call_old(&g_term_old, sig, info, uc);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static void install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sig, &sa, old);
}

/* Once per process: a second flight_open (another communicator) must not take our own
 * handlers for the old ones. */
static void install_handlers(void) {
    static int installed;
    if (installed) return;
    installed = 1;
    for (size_t i = 0; i < sizeof k_fatal / sizeof k_fatal[0]; i++) install(k_fatal[i], on_fatal, &g_old[i]);
    install(SIGTERM, on_term, &g_term_old);
}

/* ---- opening ------------------------------------------------------------------------------------ */

int flight_open(Flight *f, const char *job_dir, const char *const *hosts, char *err, size_t errlen) {
    if (!f) return 0;
    int r = snprintf(f->dir, sizeof f->dir, "%s/" FLIGHT_SUBDIR, job_dir);
    if (r < 0 || (size_t)r >= sizeof f->dir || flight_record_path(f->path, sizeof f->path, f->dir, f->rank) != 0)
        return errf(err, errlen, "%s: job directory name too long for the flight records", job_dir);
    r = snprintf(f->tmp, sizeof f->tmp, "%s/.rank-%05d.tmp", f->dir, f->rank);
    if (r < 0 || (size_t)r >= sizeof f->tmp) return errf(err, errlen, "%s: name too long", f->dir);
    /* A record left by an earlier run in this job directory (a resumed job) would be read as
     * this run's. */
    if (unlink(f->path) != 0 && errno != ENOENT)
        return errf(err, errlen, "%s: cannot remove the record of an earlier run: %s", f->path, strerror(errno));
    free(f->hosts);
    free(f->silent);
    f->hosts = callocCheck((size_t)f->world_size, sizeof *f->hosts);
    f->silent = callocCheck((size_t)f->world_size, 1);
    for (int q = 0; q < f->world_size; q++) {
        const char *h = hosts ? hosts[q] : q == f->rank ? f->host : "";
        snprintf(f->hosts[q], sizeof f->hosts[q], "%.*s", FLIGHT_HOST_MAX - 1, h ? h : "");
    }
    /* header + peers + full records, each field at its longest */
    f->buf_cap = 1024 + (size_t)f->world_size * 2 * (FLIGHT_HOST_MAX + 32) + FLIGHT_RING * (FLIGHT_CTX_MAX + 200);
    free(f->buf);
    f->buf = mallocCheck(f->buf_cap);
    g_flight = f;
    install_handlers();
    if (f->world_size > 1 && !f->ticker_on) {
        f->t_tick = mono_now();
        f->ticker_on = helper_thread_create(&f->ticker, tick, f) == 0;
    }
    return 0;
}
