/* SPDX-License-Identifier: BSD-3-Clause */
/* jobdir.c - see jobdir.h. */
#include "jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/agree.h"
#include "dist/bootstrap.h"
#include "dist/flight.h"
#include "base/tfevents.h"
#include "base/timeacct.h"
#include "base/util.h"
#include "ckpt/checkpoint.h"
#include "confusion.h"
#include "jobdir_lock.h"

#define PREEMPTED_MARKER "preempted"
/* A file rank 0 writes into the job directory and every rank reads back. */
#define CHECK_FILE ".jobdir-check"
#define CHECK_SEC 5.0    /* NFS may show a new file to another node a moment late */
#define CHECK_OTHER (-1) /* the file is there with another token */

void jobdir_propose(JobDir *j, const Config *c, int rank) {
    j->path[0] = '\0';
    j->ckpt_dir[0] = '\0';
    if (rank != 0) return;
    if (c->job_dir[0]) {
        snprintf_check(j->path, sizeof j->path, "%s", c->job_dir);
    } else if (bootstrap_default_job_dir(NULL, NULL, j->path, sizeof j->path, NULL, 0) > 0) {
        /* A requeued job has the same id, so it finds its checkpoints again. */
    } else {
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf_check(j->path, sizeof j->path, "runs/%s-%d", stamp, (int)getpid());
    }
}

/* The nearest existing ancestor must be a directory we may write into (or `dir` itself an
 * existing writable directory). */
int jobdir_creatable(const char *dir, char *err, size_t n) {
    char p[4096];
    snprintf_check(p, sizeof p, "%s", dir);
    struct stat st;
    while (stat(p, &st) != 0) {
        if (errno != ENOENT) return errf(err, n, "--job_dir %s: cannot create directory: %s", QUOTED(dir), strerror(errno));
        char *slash = strrchr(p, '/');
        if (!slash) { snprintf_check(p, sizeof p, "."); continue; }
        if (slash == p) slash[1] = '\0'; else *slash = '\0';
    }
    if (!S_ISDIR(st.st_mode)) return errf(err, n, "--job_dir %s: cannot create directory: %s", QUOTED(dir), strerror(ENOTDIR));
    if (access(p, W_OK | X_OK) != 0)
        return errf(err, n, "--job_dir %s: %s: %s", QUOTED(dir), strcmp(p, dir) ? "cannot create directory" : "not writable",
                    strerror(errno));
    return 0;
}

/* ---- what the job directory holds ----------------------------------------------------------- */

/* The names ddptrain opens in the job directory and in its own subdirectories. A symbolic link
 * planted under one would have the run write through it (a `checkpoints` link to /etc had a
 * checkpoint and `latest` written there, as root), and a FIFO would block it; so each is what
 * ddptrain makes there, or absent. The job directory itself may be a link: that name is the
 * user's. */
typedef enum { WANT_DIR, WANT_FILE } Want;

static const struct { const char *name; Want want; } k_top[] = {
    {"logs", WANT_DIR}, {"checkpoints", WANT_DIR}, {FLIGHT_SUBDIR, WANT_DIR}, {"tensorboard", WANT_DIR},
    {"config.json", WANT_FILE}, {"metrics.jsonl", WANT_FILE}, {TIMEACCT_FILE, WANT_FILE},
    {PREEMPTED_MARKER, WANT_FILE}, {CHECK_FILE, WANT_FILE}, {CONFUSION_FILE, WANT_FILE},
};

/* Whether ddptrain opens `name` in subdirectory `sub` ("" for the job directory itself, beyond
 * k_top's fixed names). */
static int ours(const char *sub, const char *name) {
    if (!sub[0]) return !strncmp(name, "trace-rank-", 11);
    if (!strcmp(sub, "logs")) return !strncmp(name, "rank-", 5);
    if (!strcmp(sub, "tensorboard")) return !strncmp(name, TFEVENTS_PREFIX, strlen(TFEVENTS_PREFIX));
    if (!strcmp(sub, FLIGHT_SUBDIR)) return !strncmp(name, "rank-", 5) || !strncmp(name, ".rank-", 6);
    if (!strcmp(sub, "checkpoints"))
        return !strncmp(name, CKPT_LATEST_NAME, strlen(CKPT_LATEST_NAME)) || !strncmp(name, "ckpt-", 5);
    return 0;
}

/* dir/sub/name as found (lstat): 0 when absent or what `want` says, else -1 with err. */
static int check_entry(const char *dir, int dfd, const char *sub, const char *name, Want want, char *err, size_t n) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : errf(err, n, "--job_dir %s: cannot inspect %s%s%s: %s", QUOTED(dir), QUOTED(sub),
                                          sub[0] ? "/" : "", QUOTED(name), strerror(errno));
    const char *why = S_ISLNK(st.st_mode)                      ? "is a symbolic link"
                      : want == WANT_DIR && !S_ISDIR(st.st_mode)  ? "is not a directory"
                      : want == WANT_FILE && !S_ISREG(st.st_mode) ? "is not a regular file"
                                                                  : NULL;
    if (!why) return 0;
    char rel[600];
    snprintf(rel, sizeof rel, "%s%s%s", sub, sub[0] ? "/" : "", name);
    return errf(err, n, "--job_dir %s: %s %s; ddptrain writes nothing through a link or into a special file in its job "
                "directory: remove it, or use another --job_dir", QUOTED(dir), QUOTED(rel), why);
}

/* Every entry of dir/sub that ours() names: a regular file. 0 when dir/sub is absent. */
static int check_listing(const char *dir, int top_fd, const char *sub, char *err, size_t n) {
    int fd = sub[0] ? openat(top_fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(top_fd);
    if (fd < 0) return errno == ENOENT ? 0 : errf(err, n, "--job_dir %s: cannot list %s: %s", QUOTED(dir), QUOTED(sub), strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) { close(fd); return errf(err, n, "--job_dir %s: cannot list %s: %s", QUOTED(dir), QUOTED(sub), strerror(errno)); }
    if (!sub[0]) rewinddir(d);   /* a dup shares the offset */
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (ours(sub, de->d_name)) rc = check_entry(dir, dirfd(d), sub, de->d_name, WANT_FILE, err, n);
    closedir(d);
    return rc;
}

/* The job directory's own entries, before the run opens any: 0, or -1 with one line in err. */
static int check_entries(const char *dir, char *err, size_t n) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : errf(err, n, "--job_dir %s: cannot open: %s", QUOTED(dir), strerror(errno));
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof k_top / sizeof *k_top; i++)
        rc = check_entry(dir, fd, "", k_top[i].name, k_top[i].want, err, n);
    for (size_t i = 0; rc == 0 && i < sizeof k_top / sizeof *k_top; i++)
        if (k_top[i].want == WANT_DIR) rc = check_listing(dir, fd, k_top[i].name, err, n);
    if (rc == 0) rc = check_listing(dir, fd, "", err, n);
    close(fd);
    return rc;
}

int jobdir_check_existing(const char *dir, char *err, size_t n) {
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;   /* jobdir_creatable's to judge */
    if (jobdir_lock_probe(dir, err, n) != 0) return -1;
    return check_entries(dir, err, n);
}

/* ---- creation ------------------------------------------------------------------------------ */

/* Rank 0, once the directory exists: the file every rank reads back, with a token of this
 * start's own. 0, or -1 with errno. */
static int write_check(const JobDir *j, uint64_t token) {
    char path[4200], text[64];
    snprintf_check(path, sizeof path, "%s/" CHECK_FILE, j->path);
    snprintf(text, sizeof text, "%016llx\n", (unsigned long long)token);
    return write_file_atomic(path, text, strlen(text));
}

/* 0 when the file holds the token, else an errno or CHECK_OTHER. */
static int read_check(const char *path, uint64_t token) {
    FILE *f = fopen(path, "r");
    if (!f) return errno ? errno : EIO;
    unsigned long long got = 0;
    const int n = fscanf(f, "%16llx", &got);
    fclose(f);
    return n == 1 && got == token ? 0 : CHECK_OTHER;
}

/* Every rank reads back what rank 0 wrote; refused naming the rank and host; one collective. */
static void check_shared(const JobDir *j, Comm *c, const char *const *hosts, uint64_t token) {
    const int world = c->world_size, rank = c->rank;
    char path[4200];
    snprintf_check(path, sizeof path, "%s/" CHECK_FILE, j->path);
    int64_t *fail = callocCheck((size_t)world, sizeof *fail);
    if (rank != 0) {
        const double t0 = now_sec();
        int e;
        while ((e = read_check(path, token)) != 0 && now_sec() - t0 < CHECK_SEC) {
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
        fail[rank] = e;
    }
    comm_set_context(c, "checking that every rank reads the job directory back");
    comm_allreduce(c, fail, (size_t)world, COMM_INT64, COMM_SUM);   /* one nonzero term each */
    if (rank == 0) unlink(path);
    int q = 0, n = 0;
    for (int i = world - 1; i > 0; i--)
        if (fail[i]) {
            q = i;
            n++;
        }
    if (n > 0) {
        char msg[5200];
        snprintf(msg, sizeof msg, "rank %d on host %s cannot read back %s, which rank 0 on host %s wrote: %s%s; --job_dir "
                 "must be on a file system every node shares", q, hosts[q], path, hosts[0],
                 fail[q] == CHECK_OTHER ? "it holds another file (a node-local directory of the same name?)"
                                        : strerror((int)fail[q]),
                 n > 1 ? " (and more ranks)" : "");
        free(fail);
        agree_refuse(c, 0, msg);
    }
    free(fail);
}

void jobdir_create(JobDir *j, Comm *c, const char *const *hosts) {
    comm_set_context(c, "sharing the job directory's name");
    comm_broadcast(c, j->path, sizeof j->path, 0);
    snprintf_check(j->ckpt_dir, sizeof j->ckpt_dir, "%s/checkpoints", j->path);
    /* this start's own, so that a file left by another start never passes for it */
    int64_t token = (int64_t)(((uint64_t)getpid() << 32) ^ (uint64_t)(now_sec() * 1e6) ^ (uint64_t)time(NULL));
    comm_broadcast(c, &token, sizeof token, 0);
    if (c->rank == 0 && mkdir_p(j->path) != 0)
        die("--job_dir %s: cannot create directory: %s", QUOTED(j->path), strerror(errno));
    /* Before anything is written there: the lock (one run at a time), then what the directory
     * holds. Start-up checked both already; this settles a race with a run that started since. */
    char err[4800] = "";
    int64_t refused = 0;
    if (c->rank == 0) {
        if (jobdir_lock_take(j->path, j->lock_note, sizeof j->lock_note, err, sizeof err) != 0) refused = 1;
        else if (check_entries(j->path, err, sizeof err) != 0) {
            jobdir_lock_release();
            refused = 1;
        }
    }
    comm_set_context(c, "sharing whether the job directory is free for this run");
    comm_broadcast(c, &refused, sizeof refused, 0);
    if (refused) agree_refuse(c, 0, err);
    if (c->rank == 0 && c->world_size > 1 && write_check(j, (uint64_t)token) != 0)
        die("%s/" CHECK_FILE ": cannot write: %s", j->path, strerror(errno));
    comm_set_context(c, "waiting for rank 0 to create the job directory");
    comm_barrier(c);
    if (c->world_size > 1) check_shared(j, c, hosts, (uint64_t)token);
}

void jobdir_write_config(const JobDir *j, const char *config_json) {
    char path[4200];
    snprintf_check(path, sizeof path, "%s/config.json", j->path);
    if (write_file_atomic(path, config_json, strlen(config_json)) != 0) die("%s: cannot write: %s", path, strerror(errno));
    if (mkdir_p(j->ckpt_dir) != 0) die("%s: cannot create directory: %s", j->ckpt_dir, strerror(errno));
}

int jobdir_mark_preempted(const JobDir *j, long step) {
    char path[4200], text[128];
    snprintf_check(path, sizeof path, "%s/" PREEMPTED_MARKER, j->path);
    const char *restart = getenv("SLURM_RESTART_COUNT");
    snprintf(text, sizeof text, "restart %ld step %ld\n", restart && *restart ? atol(restart) : 0L, step);
    return write_file_atomic(path, text, strlen(text));
}

void jobdir_clear_preempted(const JobDir *j) {
    char path[4200];
    snprintf_check(path, sizeof path, "%s/" PREEMPTED_MARKER, j->path);
    if (unlink(path) != 0 && errno != ENOENT) die("%s: cannot remove: %s", path, strerror(errno));
}
