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

const char *one_line(char *buf, size_t n, const char *msg) {
    CHECK(n >= 5);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 <= n; p++) {
        if (*p < 0x20 || *p == 0x7f) o += (size_t)snprintf(buf + o, n - o, "\\%03o", *p);
        else buf[o++] = (char)*p;
    }
    buf[o] = '\0';
    return buf;
}

void die_code(int code, const char *fmt, ...) {
    va_list ap;
    char msg[2048];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char safe[4 * sizeof msg];
    one_line(safe, sizeof safe, msg);
    if (g_console_line_open) fputc('\n', stdout);
    fflush(stdout);
    if (!g_die_quiet) fprintf(stderr, "%s: error: %s\n", g_progname, safe);
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

int utf8_seq_len(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80) return 1;
    int len;
    unsigned char lo = 0x80, hi = 0xbf;   /* the range of the second byte */
    if (p[0] >= 0xc2 && p[0] <= 0xdf) len = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        if (p[0] == 0xe0) lo = 0xa0;        /* overlong */
        if (p[0] == 0xed) hi = 0x9f;        /* surrogates */
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        if (p[0] == 0xf0) lo = 0x90;        /* overlong */
        if (p[0] == 0xf4) hi = 0x8f;        /* past U+10FFFF */
    } else return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int k = 2; k < len; k++)
        if (p[k] < 0x80 || p[k] > 0xbf) return 0;
    return len;
}

/* 1 when the sequence of len bytes at p is a control character (C0, DEL, C1). */
static int is_control(const unsigned char *p, int len) {
    return (len == 1 && (p[0] < 0x20 || p[0] == 0x7f)) || (len == 2 && p[0] == 0xc2 && p[1] <= 0x9f);
}

int name_needs_quoting(const char *s) {
    for (const char *p = s; *p;) {
        int len = utf8_seq_len(p);
        if (len == 0 || is_control((const unsigned char *)p, len)) return 1;
        p += len;
    }
    return 0;
}

const char *quote_name(char *buf, size_t n, const char *s) {
    CHECK(n >= 8);
    const int plain = !name_needs_quoting(s);
    size_t o = 0;
    if (!plain) buf[o++] = '"';
    const size_t room = n - 5;   /* for "...", the closing quote and the NUL */
    for (const char *p = s; *p;) {
        char piece[8];
        int len = utf8_seq_len(p), adv = len ? len : 1;
        size_t k = 0;
        if (plain) {
            memcpy(piece, p, (size_t)len);
            k = (size_t)len;
        } else if (len == 0 || is_control((const unsigned char *)p, len)) {   /* byte by byte, octal or C */
            unsigned char ch = (unsigned char)*p;
            adv = 1;
            if (ch >= 7 && ch <= 13) k = (size_t)snprintf(piece, sizeof piece, "\\%c", "abtnvfr"[ch - 7]);
            else k = (size_t)snprintf(piece, sizeof piece, "\\%03o", ch);
        } else if (*p == '"' || *p == '\\') {
            k = (size_t)snprintf(piece, sizeof piece, "\\%c", *p);
        } else {
            memcpy(piece, p, (size_t)len);
            k = (size_t)len;
        }
        if (o + k > room) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, piece, k);
        o += k;
        p += adv;
    }
    if (!plain) buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cpu_sec(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0);
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

FILE *fopen_append_nofollow(const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) { int e = errno; close(fd); errno = e; return NULL; }
    if (!S_ISREG(st.st_mode)) { close(fd); errno = EINVAL; return NULL; }
    /* O_NONBLOCK only kept a FIFO from blocking the open */
    if (fcntl(fd, F_SETFL, O_APPEND) != 0) { int e = errno; close(fd); errno = e; return NULL; }
    FILE *f = fdopen(fd, "a");
    if (!f) { int e = errno; close(fd); errno = e; }
    return f;
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
