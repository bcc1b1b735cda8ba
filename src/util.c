/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c - see util.h. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *g_progname = "ddptrain";
int g_die_quiet = 0;
void (*g_die_hook)(int code) = NULL;
int g_console_line_open = 0;

void die_code(int code, const char *fmt, ...) {
    va_list ap;
    char msg[2048];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_console_line_open) fputc('\n', stdout);
    fflush(stdout);
    if (!g_die_quiet) fprintf(stderr, "%s: error: %s\n", g_progname, msg);
    fflush(stderr);
    if (g_die_hook) g_die_hook(code);
    exit(code);
}

void fail_at(const char *file, int line, const char *what, const char *detail) {
    if (g_console_line_open) fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "%s: internal error at %s:%d: %s%s%s\n", g_progname, file, line, what,
            detail ? ": " : "", detail ? detail : "");
    fflush(stderr);
    exit(1);
}

void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) {
        char d[64];
        snprintf(d, sizeof d, "%zu bytes", size);
        fail_at(file, line, "malloc failed", d);
    }
    return p;
}

void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        char d[64];
        snprintf(d, sizeof d, "%zu x %zu bytes", n, size);
        fail_at(file, line, "calloc failed", d);
    }
    return p;
}

void *aligned_alloc_check(size_t size, const char *file, int line) {
    size_t rounded = (size + 63) / 64 * 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
        char d[64];
        snprintf(d, sizeof d, "%zu bytes", size);
        fail_at(file, line, "posix_memalign failed", d);
    }
    memset(p, 0, rounded ? rounded : 64);
    return p;
}

FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *f = fopen(path, mode);
    if (!f) {
        char d[1200];
        snprintf(d, sizeof d, "%s (mode %s): %s", path, mode, strerror(errno));
        fail_at(file, line, "fopen failed", d);
    }
    return f;
}

int errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void snprintf_check(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n) fail_at(__FILE__, __LINE__, "string too long", fmt);
}

int mkdir_p(const char *path) {
    char tmp[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof tmp) { errno = ENAMETOOLONG; return -1; }
    memcpy(tmp, path, len + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(tmp, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return 0;
}

int tmp_name(char *buf, size_t n, const char *path, int attempt) {
    int r = snprintf(buf, n, "%s.tmp.%d.%d", path, (int)getpid(), attempt);
    if (r < 0 || (size_t)r >= n) { errno = ENAMETOOLONG; return -1; }
    return 0;
}

int fsync_path(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

int fsync_dir_of(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir) { errno = ENAMETOOLONG; return -1; }
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    return fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

int write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode) {
    char tmp[4200];
    int fd = -1;
    for (int k = 0; k < TMP_NAME_ATTEMPTS && fd < 0; k++) {
        if (tmp_name(tmp, sizeof tmp, path, k) != 0) return -1;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EEXIST) return -1;
    }
    if (fd < 0) return -1;   /* EEXIST: every name taken */
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno; close(fd); unlink(tmp); errno = e;
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) { int e = errno; unlink(tmp); errno = e; return -1; }
    if (rename(tmp, path) != 0) { int e = errno; unlink(tmp); errno = e; return -1; }
    return fsync_dir_of(path);
}

int write_file_atomic(const char *path, const void *data, size_t len) {
    return write_file_atomic_mode(path, data, len, 0666);
}

int helper_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    CHECK(pthread_sigmask(SIG_SETMASK, &all, &old) == 0);   /* the new thread inherits it */
    int rc = pthread_create(thread, NULL, fn, arg);
    CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_sort(double *x, size_t n) {
    if (n == 0) return 0.0;
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
