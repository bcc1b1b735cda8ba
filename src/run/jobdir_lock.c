/* SPDX-License-Identifier: BSD-3-Clause */
/* jobdir_lock.c - see jobdir_lock.h. */
#include "jobdir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

/* The lock may be released, or taken over by another start, between two looks: look again. */
#define TAKE_ATTEMPTS 4
#define LOCK_TEXT_MAX 1024

typedef struct {
    long pid;
    char host[256];
    char job[64];       /* SLURM_JOB_ID; "" outside Slurm */
    char restart[32];   /* SLURM_RESTART_COUNT; "0" when unset */
    long started;       /* seconds since the epoch */
} Holder;

enum { HELD, STALE };

/* The lock this process holds, for jobdir_lock_release at exit. */
static struct {
    int fd;        /* open on the lock file, with its flock; -1 when none is held */
    pid_t owner;   /* a forked child inherits the atexit handler, not the lock */
    dev_t dev;
    ino_t ino;
    int atexit_on;
    char path[4200];
} g_lock = {.fd = -1};

static void field(char *buf, size_t n, const char *v) {
    snprintf(buf, n, "%s", v);
    buf[strcspn(buf, "\n")] = '\0';   /* one line per field */
}

static void holder_self(Holder *h) {
    memset(h, 0, sizeof *h);
    h->pid = (long)getpid();
    char host[256] = "?";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    field(h->host, sizeof h->host, host);
    const char *job = getenv("SLURM_JOB_ID"), *restart = getenv("SLURM_RESTART_COUNT");
    field(h->job, sizeof h->job, job ? job : "");
    field(h->restart, sizeof h->restart, restart && *restart ? restart : "0");
    h->started = (long)time(NULL);
}

/* A lock file's text: "key value" lines. 0, or -1 when it names no pid and host. */
static int holder_parse(const char *text, Holder *h) {
    memset(h, 0, sizeof *h);
    int have = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        const size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[320];
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = '\0';
            char *v = strchr(line, ' ');
            if (v) {
                *v++ = '\0';
                char *end;
                if (!strcmp(line, "pid")) {
                    const long x = strtol(v, &end, 10);
                    if (*v && !*end && x > 0) { h->pid = x; have |= 1; }
                } else if (!strcmp(line, "host") && *v) {
                    field(h->host, sizeof h->host, v);
                    have |= 2;
                } else if (!strcmp(line, "job")) {
                    field(h->job, sizeof h->job, v);
                } else if (!strcmp(line, "restart")) {
                    field(h->restart, sizeof h->restart, v);
                } else if (!strcmp(line, "started")) {
                    h->started = strtol(v, &end, 10);
                }
            }
        }
        if (!eol) break;
        p = eol + 1;
    }
    return have == 3 ? 0 : -1;
}

static void lock_path(char *buf, size_t n, const char *dir) {
    snprintf_check(buf, n, "%s/" JOBDIR_LOCK_NAME, dir);
}

/* Opens and reads the lock file at path: the fd (with *st and the holder; *parsed 0 when the
 * text names none), -2 when there is no such file, or -1 with err. Never follows a symbolic
 * link, never blocks on a FIFO. Read-write when allowed: an flock emulated by fcntl (NFS)
 * needs a file open for writing. */
static int open_holder(const char *dir, const char *path, Holder *h, int *parsed, struct stat *st, char *err,
                       size_t n) {
    const int flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = open(path, O_RDWR | flags);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) fd = open(path, O_RDONLY | flags);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return -2;
        if (errno == ELOOP)
            return errf(err, n, "--job_dir %s: %s is a symbolic link; remove it", QUOTED(dir), QUOTED(path));
        return errf(err, n, "--job_dir %s: cannot read %s: %s", QUOTED(dir), QUOTED(path), strerror(errno));
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return errf(err, n, "--job_dir %s: %s is not a regular file; remove it", QUOTED(dir), QUOTED(path));
    }
    char text[LOCK_TEXT_MAX];
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    *parsed = holder_parse(text, h) == 0;
    return fd;
}

/* HELD or STALE (jobdir_lock.h). fd is open on the lock file; on STALE its flock, when the file
 * system gives one, is left taken, so that no other start judges the same file meanwhile. */
static int judge(int fd, const Holder *h, int parsed, const Holder *me) {
    int flock_free = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) flock_free = 1;
    else if (errno == EWOULDBLOCK) return HELD;   /* a live process holds it, wherever it runs */
    if (!parsed) return HELD;                     /* whose it is cannot be told */
    if (h->job[0] && !strcmp(h->job, me->job) && strcmp(h->restart, me->restart) != 0) return STALE;
    if (strcmp(h->host, me->host) != 0) return HELD;   /* another node's flock may not reach here */
    if (flock_free) return STALE;
    return h->pid != me->pid && kill((pid_t)h->pid, 0) != 0 && errno == ESRCH ? STALE : HELD;
}

static void holder_describe(const Holder *h, char *buf, size_t n) {
    char since[64] = "";
    if (h->started > 0) {
        const time_t t = (time_t)h->started;
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", &tm);
    }
    char job[96] = "";
    if (h->job[0]) snprintf(job, sizeof job, "job %s", QUOTED(h->job));
    snprintf(buf, n, "pid %ld on host %s%s%s%s%s%s", h->pid, QUOTED(h->host), job[0] || since[0] ? " (" : "", job,
             job[0] && since[0] ? ", " : "", since[0] ? "since " : "", since);
    if (job[0] || since[0]) snprintf(buf + strlen(buf), n - strlen(buf), ")");
}

static int refuse(const char *dir, const char *path, const Holder *h, int parsed, char *err, size_t n) {
    if (!parsed)
        return errf(err, n, "--job_dir %s: in use by another run (its lock names no holder); use another --job_dir, or "
                    "remove %s if no run uses it", QUOTED(dir), QUOTED(path));
    char who[512];
    holder_describe(h, who, sizeof who);
    return errf(err, n, "--job_dir %s: in use by %s; use another --job_dir, or remove %s if that run has ended",
                QUOTED(dir), who, QUOTED(path));
}

int jobdir_lock_probe(const char *dir, char *err, size_t n) {
    char path[4200];
    lock_path(path, sizeof path, dir);
    Holder me, h;
    holder_self(&me);
    struct stat st;
    int parsed = 0;
    const int fd = open_holder(dir, path, &h, &parsed, &st, err, n);
    if (fd == -2) return 0;
    if (fd < 0) return -1;
    const int v = judge(fd, &h, parsed, &me);
    close(fd);   /* and its flock with it */
    return v == HELD ? refuse(dir, path, &h, parsed, err, n) : 0;
}

static int write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        const ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Our lock file, whole and flocked, under a temporary name beside path: the fd, or -1. */
static int make_own(const char *path, const Holder *me, char *tmp, size_t tmp_len) {
    char text[LOCK_TEXT_MAX];
    const int len = snprintf(text, sizeof text, "pid %ld\nhost %s\njob %s\nrestart %s\nstarted %ld\n", me->pid, me->host,
                             me->job, me->restart, me->started);
    if (len < 0 || (size_t)len >= sizeof text) { errno = ENAMETOOLONG; return -1; }
    int fd = -1;
    for (int k = 0; k < TMP_NAME_ATTEMPTS && fd < 0; k++) {
        if (tmp_name(tmp, tmp_len, path, k) != 0) return -1;
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) return -1;
    }
    if (fd < 0) return -1;
    (void)flock(fd, LOCK_EX | LOCK_NB);   /* without flock (some file systems), the pid tells */
    if (write_all(fd, text, (size_t)len) != 0 || fsync(fd) != 0) {
        const int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

/* Our file named path: 0, EEXIST when the name is taken, or another errno. A file system
 * without hard links gets the file created under its name with O_EXCL. */
static int place(const char *tmp, int *fd, const char *path, const Holder *me) {
    if (link(tmp, path) == 0) return 0;
    const int e = errno;
    if (e != EPERM && e != ENOTSUP && e != EOPNOTSUPP && e != ENOSYS) return e;
    const int fd2 = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd2 < 0) return errno;
    (void)flock(fd2, LOCK_EX | LOCK_NB);
    char text[LOCK_TEXT_MAX];
    const ssize_t got = pread(*fd, text, sizeof text, 0);
    if (got <= 0 || write_all(fd2, text, (size_t)got) != 0) {
        const int e2 = errno ? errno : EIO;
        close(fd2);
        unlink(path);
        return e2;
    }
    close(*fd);
    *fd = fd2;
    return 0;
}

int jobdir_lock_take(const char *dir, char *note, size_t note_len, char *err, size_t n) {
    note[0] = '\0';
    CHECK(g_lock.fd < 0);
    char path[4200], tmp[4300];
    lock_path(path, sizeof path, dir);
    Holder me;
    holder_self(&me);
    int fd = make_own(path, &me, tmp, sizeof tmp);
    if (fd < 0) return errf(err, n, "--job_dir %s: cannot create its lock %s: %s", QUOTED(dir), QUOTED(tmp), strerror(errno));
    int rc = -1, stale_fd = -1, attempt = 0;
    for (; attempt < TAKE_ATTEMPTS; attempt++) {
        const int e = place(tmp, &fd, path, &me);
        if (e == 0) { rc = 0; break; }
        if (e != EEXIST) {
            errf(err, n, "--job_dir %s: cannot create its lock %s: %s", QUOTED(dir), QUOTED(path), strerror(e));
            break;
        }
        Holder h;
        struct stat st;
        int parsed = 0;
        const int hfd = open_holder(dir, path, &h, &parsed, &st, err, n);
        if (hfd == -2) continue;   /* released meanwhile */
        if (hfd < 0) break;
        if (judge(hfd, &h, parsed, &me) == HELD) {
            refuse(dir, path, &h, parsed, err, n);
            close(hfd);
            break;
        }
        /* Stale: removed only while the name still holds the file judged, since another start
         * may have taken it over first. */
        struct stat now;
        if (lstat(path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino && unlink(path) != 0) {
            errf(err, n, "--job_dir %s: cannot remove the stale lock %s: %s", QUOTED(dir), QUOTED(path), strerror(errno));
            close(hfd);
            break;
        }
        char who[512];
        holder_describe(&h, who, sizeof who);
        snprintf(note, note_len, "job dir: took over the lock of %s: that run has ended", who);
        if (stale_fd >= 0) close(stale_fd);
        stale_fd = hfd;   /* its flock kept until ours is in place */
    }
    if (attempt == TAKE_ATTEMPTS)
        errf(err, n, "--job_dir %s: its lock %s changed %d times while this run tried to take it; another run is "
             "starting there", QUOTED(dir), QUOTED(path), TAKE_ATTEMPTS);
    unlink(tmp);
    if (stale_fd >= 0) close(stale_fd);
    if (rc != 0) {
        close(fd);
        note[0] = '\0';
        return -1;
    }
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    g_lock.fd = fd;
    g_lock.owner = getpid();
    g_lock.dev = st.st_dev;
    g_lock.ino = st.st_ino;
    snprintf_check(g_lock.path, sizeof g_lock.path, "%s", path);
    if (!g_lock.atexit_on) {
        CHECK(atexit(jobdir_lock_release) == 0);
        g_lock.atexit_on = 1;
    }
    (void)fsync_dir_of(path);
    return 0;
}

void jobdir_lock_release(void) {
    if (g_lock.fd < 0 || g_lock.owner != getpid()) return;
    /* our file only: a stale-lock takeover by another run may have replaced it */
    struct stat st;
    if (lstat(g_lock.path, &st) == 0 && st.st_dev == g_lock.dev && st.st_ino == g_lock.ino) unlink(g_lock.path);
    close(g_lock.fd);
    g_lock.fd = -1;
}
