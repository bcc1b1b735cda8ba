/* SPDX-License-Identifier: BSD-3-Clause */
/* verdict.c - see verdict.h. */
#include "verdict.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

/* ---- reading ---------------------------------------------------------------------------------- */

/* Every kind comm.h records: a record holding another is refused as not ours. */
static const char *const k_kinds[] = {"allreduce", "iallreduce", "broadcast", "barrier", "sendrecv"};

/* The recorder's own string for a kind read back (FlightRecord.kind points at static text). */
static const char *kind_of(const char *word) {
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++)
        if (!strcmp(word, k_kinds[i])) return k_kinds[i];
    return NULL;
}

static int state_of(const char *word) {
    if (!strcmp(word, "posted")) return FLIGHT_POSTED;
    if (!strcmp(word, "completed")) return FLIGHT_COMPLETED;
    if (!strcmp(word, "timeout")) return FLIGHT_TIMED_OUT;
    return FLIGHT_EMPTY;
}

/* One record file into d (peers into hosts when the set has none yet). 0, or -1 with err
 * naming the file and line. */
static int load_one(const char *path, FlightDump *d, char (*hosts)[FLIGHT_HOST_MAX], int world, char *err,
                    size_t errlen) {
    FILE *fp = fopen(path, "r");
    if (!fp) return errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    memset(d, 0, sizeof *d);
    d->rank = -1;
    d->last_step = -1;
    char line[512];
    int lineno = 0, ended = 0, header = 0;
    const char *bad = NULL;
    while (!bad && fgets(line, sizeof line, fp)) {
        lineno++;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') { bad = "line too long or not ended"; break; }
        line[len - 1] = '\0';
        if (ended) { bad = "text after the line \"end\""; break; }
        if (lineno == 1) {
            if (strcmp(line, "ddptrain flight record 1") != 0) bad = "not a ddptrain flight record (first line)";
            header = 1;
            continue;
        }
        int q, w, pos = 0;
        long long seq, step, bytes;
        int bucket, nb;
        char kind[32], state[32];
        double tp, td;
        if (!strcmp(line, "end")) ended = 1;
        else if (line[0] == '#') continue;
        else if (sscanf(line, "rank %d of %d%n", &q, &w, &pos) == 2 && !line[pos]) {
            if (q < 0 || w < 1 || q >= w) bad = "rank outside the world";
            d->rank = q;
            d->world_size = w;
        } else if (!strncmp(line, "host ", 5)) snprintf(d->host, sizeof d->host, "%.*s", FLIGHT_HOST_MAX - 1, line + 5);
        else if (sscanf(line, "pid %ld%n", &d->pid, &pos) == 1 && !line[pos]) continue;
        else if (sscanf(line, "clock %lf%n", &d->clock, &pos) == 1 && !line[pos]) continue;
        else if (!strncmp(line, "silent ", 7)) {
            if (d->n_silent < 8)
                snprintf(d->silent[d->n_silent++], FLIGHT_HOST_MAX, "%.*s", FLIGHT_HOST_MAX - 1, line + 7);
        } else if (!strncmp(line, "reason ", 7))
            snprintf(d->reason, sizeof d->reason, "%.*s", VERDICT_REASON_MAX - 1, line + 7);
        else if (sscanf(line, "last_step %ld%n", &d->last_step, &pos) == 1 && !line[pos]) continue;
        else if (sscanf(line, "stalled %lf%n", &d->stalled, &pos) == 1 && !line[pos]) continue;
        else if (sscanf(line, "peer %d %n", &q, &pos) == 1 && pos > 0) {
            if (q < 0 || q >= d->world_size) bad = "peer outside the world";
            else if (hosts && d->world_size == world && !hosts[q][0])
                snprintf(hosts[q], FLIGHT_HOST_MAX, "%.*s", FLIGHT_HOST_MAX - 1, line + pos);
        } else if (sscanf(line, "c %lld %31s %31s %lld %d %d %lld %lf %lf %n", &seq, kind, state, &step, &bucket, &nb,
                          &bytes, &tp, &td, &pos) == 9 && pos > 0) {
            if (d->n == FLIGHT_RING) { bad = "more collectives than the ring holds"; break; }
            FlightRecord *r = &d->rec[d->n];
            r->kind = kind_of(kind);
            r->state = state_of(state);
            if (!r->kind || r->state == FLIGHT_EMPTY || seq < 1 || bytes < 0 ||
                (d->n > 0 && seq != d->rec[d->n - 1].seq + 1)) {
                bad = "a collective line with a bad field or out of sequence";
                break;
            }
            r->seq = seq;
            r->step = (long)step;
            r->bucket = bucket;
            r->n_bucket = nb;
            r->bytes = (uint64_t)bytes;
            r->t_post = tp;
            r->t_done = td;
            const char *ctx = strcmp(line + pos, "-") ? line + pos : "";
            snprintf(r->context, sizeof r->context, "%.*s", FLIGHT_CTX_MAX - 1, ctx);
            d->n++;
        } else {
            bad = "not a flight record line";
        }
    }
    int read_err = ferror(fp);
    fclose(fp);
    if (!bad && read_err) return errf(err, errlen, "%s: read error", path);
    if (bad && lineno > 1) return errf(err, errlen, "%s: corrupt flight record: line %d: %s", path, lineno, bad);
    if (!bad && !header) bad = "empty";
    if (!bad && !ended) bad = "cut short (no line \"end\")";
    if (!bad && d->rank < 0) bad = "no line \"rank R of W\"";
    if (bad) return errf(err, errlen, "%s: corrupt flight record: %s", path, bad);
    d->present = 1;
    return 0;
}

void flight_set_free(FlightSet *s) {
    free(s->dump);
    free(s->hosts);
    memset(s, 0, sizeof *s);
}

static int rank_of_name(const char *name) {
    int q, pos = 0;
    if (sscanf(name, "rank-%d.txt%n", &q, &pos) == 1 && !name[pos] && q >= 0) return q;
    return -1;
}

int flight_set_load(FlightSet *s, const char *flight_dir, int strict, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    DIR *dir = opendir(flight_dir);
    if (!dir) return errf(err, errlen, "%s: %s", flight_dir, strerror(errno));
    /* First the world size: the newest record's (an older job's records in the same directory
     * are removed by each rank at start, but a run with fewer ranks leaves the higher ones). */
    FlightDump *one = callocCheck(1, sizeof *one);
    int world = 0;
    double newest = -1;
    char path[4400];
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (rank_of_name(e->d_name) < 0) continue;
        snprintf_check(path, sizeof path, "%s/%s", flight_dir, e->d_name);
        if (load_one(path, one, NULL, 0, err, errlen) != 0) {
            if (strict) { closedir(dir); free(one); return -1; }
            continue;
        }
        if (one->rank != rank_of_name(e->d_name)) {
            if (strict) {
                errf(err, errlen, "%s: corrupt flight record: it says rank %d", path, one->rank);
                closedir(dir);
                free(one);
                return -1;
            }
            continue;
        }
        if (one->clock > newest) { newest = one->clock; world = one->world_size; }
    }
    if (world == 0) {
        closedir(dir);
        free(one);
        return errf(err, errlen, "%s: no flight records (rank-NNNNN.txt): no rank of this job wrote one", flight_dir);
    }
    s->world_size = world;
    s->dump = callocCheck((size_t)world, sizeof *s->dump);
    s->hosts = callocCheck((size_t)world, sizeof *s->hosts);
    rewinddir(dir);
    while ((e = readdir(dir))) {
        int q = rank_of_name(e->d_name);
        if (q < 0 || q >= world) continue;
        snprintf_check(path, sizeof path, "%s/%s", flight_dir, e->d_name);
        if (load_one(path, one, s->hosts, world, err, errlen) != 0) continue;
        if (one->world_size != world || one->rank != q) continue;
        s->dump[q] = *one;
        s->n_present++;
    }
    closedir(dir);
    free(one);
    for (int q = 0; q < world; q++)
        if (!s->hosts[q][0] && s->dump[q].present) snprintf(s->hosts[q], FLIGHT_HOST_MAX, "%s", s->dump[q].host);
    return 0;
}

/* ---- judging ------------------------------------------------------------------------------------- */

/* An appending writer: the verdict is built from a few clauses. */
typedef struct {
    char *p;
    size_t n, len;
} Line;

static void add(Line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Line *l, const char *fmt, ...) {
    if (l->len + 1 >= l->n) return;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(l->p + l->len, l->n - l->len, fmt, ap);
    va_end(ap);
    if (r > 0) l->len = l->len + (size_t)r < l->n ? l->len + (size_t)r : l->n - 1;
}

static const char *host_of(const FlightSet *s, int q) { return s->hosts[q][0] ? s->hosts[q] : "unknown"; }

static const FlightRecord *find(const FlightDump *d, int64_t seq) {
    if (!d->present || d->n == 0 || seq < d->rec[0].seq || seq > d->rec[d->n - 1].seq) return NULL;
    return &d->rec[seq - d->rec[0].seq];
}

/* "bucket 3 of 4 in step 12" or "loss for the log, step 12". */
static void where(Line *l, const FlightRecord *r) {
    if (r->bucket >= 0) add(l, "bucket %d of %d in step %ld", r->bucket, r->n_bucket, r->step);
    else if (r->step >= 0) add(l, "%s, step %ld", r->context[0] ? r->context : "no context", r->step);
    else add(l, "%s", r->context[0] ? r->context : "no context");
}

/* "bucket 3 of 4 in step 12" or "allreduce (loss for the log, step 12)", then the number. */
static void what(Line *l, const FlightRecord *r, int with_seq) {
    if (r->bucket >= 0) {
        where(l, r);
    } else {
        add(l, "%s (", r->kind);
        where(l, r);
        add(l, ")");
    }
    if (with_seq) add(l, " (collective #%lld)", (long long)r->seq);
}

static void clock_text(double t, char *buf, size_t n) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    char hms[16];
    strftime(hms, sizeof hms, "%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03d UTC", hms, (int)((t - (double)s) * 1000.0));
}

/* "rank 2" or "ranks 0, 2, 5" for the ranks with mark[q] set (a few, then how many more). */
static void ranks(Line *l, const FlightSet *s, const unsigned char *mark) {
    int count = 0;
    for (int q = 0; q < s->world_size; q++) count += mark[q] != 0;
    add(l, "rank%s", count == 1 ? "" : "s");
    int shown = 0;
    for (int q = 0; q < s->world_size && shown < 8; q++)
        if (mark[q]) add(l, "%s %d", shown++ ? "," : "", q);
    if (count > shown) add(l, " and %d more", count - shown);
}

/* A fatal signal of the rank itself, as opposed to SIGTERM from a launcher or Slurm. */
static int fatal_signal(const FlightDump *d) {
    int sig = 0;
    return sscanf(d->reason, "signal %d", &sig) == 1 && (sig == 4 || sig == 6 || sig == 7 || sig == 8 || sig == 11);
}

static int ended_from_outside(const FlightDump *d) {
    return !strncmp(d->reason, "signal ", 7) && !fatal_signal(d);
}

static const char *signal_name(int sig) {
    switch (sig) {
    case 4: return "SIGILL";
    case 6: return "SIGABRT";
    case 7: return "SIGBUS";
    case 8: return "SIGFPE";
    case 11: return "SIGSEGV";
    }
    return "a fatal signal";
}

/* 1: ranks disagree on the sequence. */
static int judge_sequence(const FlightSet *s, Line *l) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int q = 0; q < s->world_size; q++) {
        const FlightDump *d = &s->dump[q];
        if (!d->present || !d->n) continue;
        if (d->rec[0].seq < lo) lo = d->rec[0].seq;
        if (d->rec[d->n - 1].seq > hi) hi = d->rec[d->n - 1].seq;
    }
    int *group = mallocCheck((size_t)s->world_size * sizeof *group);
    int found = 0;
    for (int64_t seq = lo; seq <= hi && !found; seq++) {
        /* group ranks by (kind, bytes): group[q] is the first rank with q's collective */
        int n_groups = 0;
        for (int q = 0; q < s->world_size; q++) {
            group[q] = -1;
            const FlightRecord *r = find(&s->dump[q], seq);
            if (!r) continue;
            for (int p = 0; p < q && group[q] < 0; p++) {
                const FlightRecord *o = find(&s->dump[p], seq);
                if (o && o->kind == r->kind && o->bytes == r->bytes) group[q] = group[p];
            }
            if (group[q] < 0) { group[q] = q; n_groups++; }
        }
        if (n_groups < 2) continue;
        found = 1;
        /* the largest group is taken for the job's sequence; a tie has no majority */
        int best = -1, best_n = 0, tie = 0;
        for (int g = 0; g < s->world_size; g++) {
            int k = 0;
            for (int q = 0; q < s->world_size; q++) k += group[q] == g;
            if (k > best_n) { best = g; best_n = k; tie = 0; }
            else if (k == best_n && k > 0) tie = 1;
        }
        unsigned char *mark = callocCheck((size_t)s->world_size, 1);
        if (tie) add(l, "the ranks disagree on collective #%lld: ", (long long)seq);
        int first = 1;
        for (int g = 0; g < s->world_size; g++) {
            if (group[g] != g || (!tie && g == best)) continue;
            int k = 0;
            for (int q = 0; q < s->world_size; q++) { mark[q] = group[q] == g; k += mark[q]; }
            const FlightRecord *r = find(&s->dump[g], seq);
            if (!first) add(l, "; ");
            first = 0;
            ranks(l, s, mark);
            if (k == 1) add(l, " on host %s", host_of(s, g));
            add(l, " posted %s of %llu bytes (", r->kind, (unsigned long long)r->bytes);
            where(l, r);
            add(l, ")%s", tie ? "" : " as collective");
            if (!tie) add(l, " #%lld", (long long)seq);
        }
        if (!tie) {
            for (int q = 0; q < s->world_size; q++) mark[q] = group[q] == best;
            const FlightRecord *r = find(&s->dump[best], seq);
            add(l, ", where ");
            ranks(l, s, mark);
            add(l, " posted %s of %llu bytes (", r->kind, (unsigned long long)r->bytes);
            where(l, r);
            add(l, ")");
        }
        free(mark);
    }
    free(group);
    return found;
}

/* 1: a rank died of a signal or aborted the job itself. */
static int judge_own_end(const FlightSet *s, Line *l) {
    for (int pass = 0; pass < 3; pass++)
        for (int q = 0; q < s->world_size; q++) {
            const FlightDump *d = &s->dump[q];
            if (!d->present) continue;
            int sig = 0;
            if (pass == 0 && fatal_signal(d) && sscanf(d->reason, "signal %d", &sig) == 1) {
                add(l, "rank %d on host %s died of signal %d (%s) in step %ld", q, host_of(s, q), sig, signal_name(sig),
                    d->last_step);
            } else if (pass == 1 && d->stalled > FLIGHT_STALL_S) {
                add(l, "rank %d on host %s was stopped or frozen: it had not run for %.1f s in step %ld", q,
                    host_of(s, q), d->stalled, d->last_step);
            } else if (pass == 2 && !strcmp(d->reason, "abort")) {
                add(l, "rank %d on host %s ended the job on an error of its own in step %ld (its log says which)", q,
                    host_of(s, q), d->last_step);
            } else {
                continue;
            }
            if (d->n) {
                add(l, "; its last collective was ");
                what(l, &d->rec[d->n - 1], 1);
            }
            return 1;
        }
    return 0;
}

/* The lowest rank whose record says `host` did not answer it (NULL: none). */
static const int *silent_view(const FlightSet *s, const char *host) {
    static int rank;
    for (int q = 0; q < s->world_size; q++)
        for (int i = 0; i < s->dump[q].n_silent; i++)
            if (!strcmp(s->dump[q].silent[i], host)) { rank = q; return &rank; }
    return NULL;
}

/* "host vn2 (ranks 2, 3) does not answer on the network from host vn1", as seen by the lowest
 * rank that found a host silent (both sides of a partition see the other silent: the lowest
 * rank's side is taken for the job's). 0 when no record names a silent host. */
static int silent_hosts(const FlightSet *s, Line *l) {
    int v = -1;
    for (int q = 0; q < s->world_size && v < 0; q++)
        if (s->dump[q].present && s->dump[q].n_silent) v = q;
    if (v < 0) return 0;
    const FlightDump *d = &s->dump[v];
    unsigned char *mark = callocCheck((size_t)s->world_size, 1);
    for (int i = 0; i < d->n_silent; i++) {
        for (int q = 0; q < s->world_size; q++) mark[q] = !strcmp(host_of(s, q), d->silent[i]);
        add(l, "%shost %s (", i ? "; " : "", d->silent[i]);
        ranks(l, s, mark);
        add(l, ") does not answer on the network from host %s", host_of(s, v));
    }
    free(mark);
    return 1;
}

/* " and none completed it", or " and ranks 0, 2 did not complete it" where some rank completed
 * collective seq before the others gave up: across a partition, a rank may receive all it
 * needs before the link goes and wait in the next collective. Every record is present. */
static void not_completed(Line *l, const FlightSet *s, int64_t seq) {
    unsigned char *mark = callocCheck((size_t)s->world_size, 1);
    int n = 0;
    for (int q = 0; q < s->world_size; q++) {
        const FlightDump *d = &s->dump[q];
        const FlightRecord *r = find(d, seq);
        /* out of the record's window: completed long ago, or never posted */
        mark[q] = r ? r->state != FLIGHT_COMPLETED : !d->n || d->rec[d->n - 1].seq < seq;
        n += mark[q];
    }
    if (n == s->world_size) {
        add(l, " and none completed it");
    } else {
        add(l, " and ");
        ranks(l, s, mark);
        add(l, " did not complete it");
    }
    free(mark);
}

/* 1: a collective still posted, and who never joined it. The rank to blame is the one furthest
 * behind: its record stops at an earlier collective than the others' (it never posted the
 * next one, which they wait for), or it has no record at all. Going by the last collective
 * posted, not by the oldest one pending, keeps a stopped rank that posted a collective the
 * others then completed without it from hiding the one it never reached. */
static int judge_pending(const FlightSet *s, Line *l) {
    const int W = s->world_size;
    int64_t min_last = INT64_MAX, max_last = 0;
    int any_pending = 0, n_absent = 0;
    for (int q = 0; q < W; q++) {
        const FlightDump *d = &s->dump[q];
        if (!d->present) { n_absent++; continue; }
        int64_t last = d->n ? d->rec[d->n - 1].seq : 0;
        if (last < min_last) min_last = last;
        if (last > max_last) max_last = last;
        for (int i = 0; i < d->n; i++) any_pending |= d->rec[i].state != FLIGHT_COMPLETED;
    }
    if (!any_pending) return 0;
    const int lagging = min_last < max_last;
    /* the collective the others wait for: the one after the laggards' last, else the oldest
     * one pending */
    const FlightRecord *stuck = NULL;
    unsigned char *waited = callocCheck((size_t)W, 1), *culprit = callocCheck((size_t)W, 1);
    int n_laggards = 0, same = 1;
    int64_t wait_seq = 0;
    double first_wait = 0;   /* the earliest post among the waiters' collectives */
    for (int q = 0; q < W; q++) {
        const FlightDump *d = &s->dump[q];
        if (!d->present) { culprit[q] = 1; continue; }
        int64_t last = d->n ? d->rec[d->n - 1].seq : 0;
        /* Behind and not waiting: it never posted the next collective. A rank behind but
         * waiting in its last one waits for someone else; and with a rank gone, one that was
         * still computing when the launcher ended it is behind without being at fault. */
        const int idle = !d->n || d->rec[d->n - 1].state == FLIGHT_COMPLETED;
        if (lagging && last == min_last && idle && !(n_absent && ended_from_outside(d))) {
            culprit[q] = 1;
            n_laggards++;
            continue;
        }
        const FlightRecord *r = lagging ? find(d, min_last + 1) : NULL;
        if (r && r->state == FLIGHT_COMPLETED) r = NULL;
        for (int i = 0; !r && i < d->n; i++)
            if (d->rec[i].state != FLIGHT_COMPLETED) r = &d->rec[i];
        if (!r) continue;
        waited[q] = 1;
        if (first_wait == 0 || r->t_post < first_wait) first_wait = r->t_post;
        if (wait_seq && r->seq != wait_seq) same = 0;
        wait_seq = r->seq;
        if (!stuck || r->seq < stuck->seq || (r->seq == stuck->seq && r->t_post < stuck->t_post)) stuck = r;
    }
    /* what the laggards never posted: the collective after their last, as a waiter has it */
    if (n_laggards)
        for (int q = 0; q < W; q++) {
            const FlightRecord *r = waited[q] ? find(&s->dump[q], min_last + 1) : NULL;
            if (r) { stuck = r; break; }
        }
    int n_culprits = 0, shown = 0;
    for (int q = 0; q < W; q++) {
        if (!culprit[q]) continue;
        if (n_culprits++ >= 4) continue;
        const FlightDump *d = &s->dump[q];
        add(l, "%srank %d on host %s ", shown++ ? "; " : "", q, host_of(s, q));
        if (!d->present) {
            const int *v = silent_view(s, host_of(s, q));
            if (v)
                add(l, "sent no flight record; its host does not answer on the network from host %s", host_of(s, *v));
            else add(l, "sent no flight record (stopped, killed or cut off)");
        } else if (stuck) {
            add(l, "never posted ");
            what(l, stuck, 1);
            if (d->n) add(l, " (its last was #%lld)", (long long)d->rec[d->n - 1].seq);
        } else {
            add(l, "is behind the others (its last collective was #%lld)", (long long)min_last);
        }
    }
    if (n_culprits > shown) add(l, "; and %d more ranks", n_culprits - shown);
    if (stuck) {
        char t[32];
        clock_text(first_wait > 0 ? first_wait : stuck->t_post, t, sizeof t);
        if (n_culprits == 0) {
            const int silent = silent_hosts(s, l);
            add(l, "%severy rank posted ", silent ? ": " : "");
            what(l, stuck, 1);
            not_completed(l, s, stuck->seq);
            add(l, " (since %s): %s", t,
                silent ? "a network partition or a failed link" : "no rank is missing; the network between the ranks failed");
        } else {
            add(l, "; ");
            ranks(l, s, waited);
            if (n_laggards || !same) add(l, " waited since %s", t);
            else {
                add(l, " waited in ");
                what(l, stuck, 1);
                add(l, " since %s", t);
            }
        }
    }
    free(waited);
    free(culprit);
    return n_culprits > 0 || stuck;
}

/* Ranks with no record while the others' were written when the job was ended from outside
 * (the launcher ends the others when one dies). */
static int judge_absent(const FlightSet *s, Line *l) {
    unsigned char *mark = callocCheck((size_t)s->world_size, 1);
    int shown = 0, n_absent = 0;
    long step = -1;
    for (int q = 0; q < s->world_size; q++) {
        const FlightDump *d = &s->dump[q];
        if (d->present) {
            mark[q] = 1;
            if (d->last_step > step) step = d->last_step;
            continue;
        }
        if (n_absent++ < 4) add(l, "%srank %d on host %s sent no flight record (stopped, killed or cut off)",
                                shown++ ? "; " : "", q, host_of(s, q));
    }
    if (n_absent > shown) add(l, "; and %d more ranks", n_absent - shown);
    if (n_absent) {
        add(l, "; ");
        ranks(l, s, mark);
        add(l, " wrote theirs at step %ld", step);
    }
    free(mark);
    return n_absent > 0;
}

int verdict_judge(const FlightSet *s, char *out, size_t n) {
    Line l = {out, n, 0};
    out[0] = '\0';
    if (judge_sequence(s, &l) || judge_own_end(s, &l)) return 1;
    /* Every rank ended by SIGTERM (a cancelled or preempted job): collectives in flight then
     * are no fault. */
    int outside = s->n_present == s->world_size;
    long step = -1;
    for (int q = 0; q < s->world_size && outside; q++) {
        outside = ended_from_outside(&s->dump[q]);
        if (s->dump[q].last_step > step) step = s->dump[q].last_step;
    }
    if (outside) {
        add(&l, "no fault recorded: every rank was ended from outside (%s) in step %ld", s->dump[0].reason, step);
        return 0;
    }
    if (judge_pending(s, &l) || judge_absent(s, &l)) return 1;
    add(&l, "no fault recorded: every collective in the records of %d of %d ranks completed", s->n_present,
        s->world_size);
    return 0;
}

void verdict_rank_line(const FlightSet *s, int q, char *out, size_t n) {
    Line l = {out, n, 0};
    out[0] = '\0';
    const FlightDump *d = &s->dump[q];
    if (!d->present) {
        add(&l, "rank %d on host %s: no flight record", q, host_of(s, q));
        return;
    }
    char t[32];
    clock_text(d->clock, t, sizeof t);
    add(&l, "rank %d on host %s, pid %ld: record written at %s (%s), step %ld", q, host_of(s, q), d->pid, t, d->reason,
        d->last_step);
    if (d->stalled > FLIGHT_STALL_S) add(&l, "; did not run for %.1f s", d->stalled);
    for (int i = 0; i < d->n_silent; i++)
        add(&l, "%s%s", i ? ", " : "; no answer on the network from host ", d->silent[i]);
    if (!d->n) return;
    const FlightRecord *r = &d->rec[d->n - 1];
    for (int i = 0; i < d->n; i++)
        if (d->rec[i].state != FLIGHT_COMPLETED) { r = &d->rec[i]; break; }
    add(&l, "; %s ", r->state == FLIGHT_COMPLETED ? "last completed"
                     : r->state == FLIGHT_POSTED  ? "waiting in"
                                                  : "timed out in");
    what(&l, r, 1);
    if (r->state != FLIGHT_COMPLETED) add(&l, ", %s of %llu bytes, posted %.1f s before the record", r->kind,
                                          (unsigned long long)r->bytes, d->clock - r->t_post);
}

/* ---- after a timeout ----------------------------------------------------------------------------- */

static int records_present(const Flight *f) {
    char path[4400];
    struct stat st;
    int n = 0;
    for (int q = 0; q < f->world_size; q++)
        if (flight_record_path(path, sizeof path, f->dir, q) == 0 && stat(path, &st) == 0) n++;
    return n;
}

int verdict_after_timeout(const Flight *f, char *out, size_t n) {
    out[0] = '\0';
    if (!f || !f->buf) return 0;
    /* The ranks that wait in the same collective time out within moments of each other; a
     * rank that is stopped, dead or cut off never writes. */
    const double t0 = now_sec();
    while (records_present(f) < f->world_size && now_sec() - t0 < VERDICT_GRACE_S) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    FlightSet s;
    char err[512];
    if (flight_set_load(&s, f->dir, 0, err, sizeof err) != 0) return 0;
    int found = s.world_size == f->world_size && verdict_judge(&s, out, n);
    flight_set_free(&s);
    if (!found) out[0] = '\0';
    return found;
}
