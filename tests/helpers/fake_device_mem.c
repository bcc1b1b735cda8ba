/* SPDX-License-Identifier: BSD-3-Clause */
/* fake_device_mem.c - the fake device module's memory (fake_device.h): "device" buffers in host
 * memory that the host cannot touch outside an operation.
 *
 * Each buffer is its own mapping: a guard page, the buffer rounded up to whole pages, a guard
 * page. The guards are PROT_NONE for good; the buffer is PROT_NONE too except while an
 * operation that names it runs (fd_enter .. fd_leave), so a host read or write of device
 * memory anywhere else faults, as it would crash or read garbage on a GPU. The SIGSEGV handler
 * says which buffer, where it was allocated (a backtrace taken at fd_alloc) and where it was
 * touched, then aborts. One lock serialises the operations: a buffer opened by one thread's
 * operation must not be closed under another's. */
#include "fake_device.h"

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/util.h"

#define SITE_FRAMES 8

typedef struct {
    char *base;          /* the mapping: guard, buffer, guard */
    char *user;          /* what alloc returned: base + one page */
    size_t bytes;        /* asked for */
    size_t span;         /* the buffer's pages */
    int open;            /* operations in progress that opened it */
    int frames;
    void *site[SITE_FRAMES];
} Buf;

static Buf *g_buf;
static int g_n, g_cap;
static size_t g_page;
static pthread_mutex_t g_lock;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const char *g_op;   /* the operation in progress, for the handler */

static void init_lock(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);   /* an operation may use another */
    pthread_mutex_init(&g_lock, &a);
    g_page = (size_t)sysconf(_SC_PAGESIZE);
}

static void lock(void) {
    pthread_once(&g_once, init_lock);
    pthread_mutex_lock(&g_lock);
}
static void unlock(void) { pthread_mutex_unlock(&g_lock); }

/* The buffer holding p (its guard pages included when guards is set), or NULL. */
static Buf *find(const void *p, int guards) {
    const char *c = p;
    for (int i = 0; i < g_n; i++) {
        Buf *b = &g_buf[i];
        const char *lo = guards ? b->base : b->user, *hi = guards ? b->user + b->span + g_page : b->user + b->bytes;
        if (c >= lo && (c < hi || (c == lo && b->bytes == 0))) return b;
    }
    return NULL;
}

static void protect(Buf *b, int prot) {
    if (mprotect(b->user, b->span, prot) != 0) die("fake device: mprotect: %s", strerror(errno));
}

void *fd_alloc(size_t bytes) {
    lock();
    const size_t span = (bytes + g_page - 1) / g_page * g_page + (bytes ? 0 : g_page);
    char *base = mmap(NULL, span + 2 * g_page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) die("fake device: cannot map %zu bytes: %s", bytes, strerror(errno));
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 64;
        g_buf = realloc(g_buf, (size_t)g_cap * sizeof *g_buf);
        if (!g_buf) die("fake device: out of memory");
    }
    Buf *b = &g_buf[g_n++];
    *b = (Buf){.base = base, .user = base + g_page, .bytes = bytes, .span = span};
    b->frames = backtrace(b->site, SITE_FRAMES);
    /* anonymous mappings come zeroed, as the Backend contract wants */
    unlock();
    return b->user;
}

void fd_release(void *p) {
    if (!p) return;
    lock();
    Buf *b = find(p, 0);
    if (!b || b->user != p) die("fake device: release of %p, which no alloc returned", p);
    if (b->open) die("fake device: release of a buffer an operation is using");
    munmap(b->base, b->span + 2 * g_page);
    *b = g_buf[--g_n];
    unlock();
}

int fd_is_device(const void *p) {
    lock();
    const int yes = p && find(p, 1) != NULL;
    unlock();
    return yes;
}

void fd_check_range(const char *op, const void *p, size_t bytes) {
    lock();
    Buf *b = find(p, 0);
    if (!b) die("fake device: %s: %p is not device memory", op, p);
    if ((const char *)p + bytes > b->user + b->bytes)
        die("fake device: %s: %zu bytes at offset %zu run past the end of a %zu-byte buffer", op, bytes,
            (size_t)((const char *)p - b->user), b->bytes);
    unlock();
}

void fd_enter(FdCall *call, const char *op, const char *names, const void *const *ptrs, int n) {
    lock();
    call->n = 0;
    g_op = op;
    for (int i = 0; i < n; i++) {
        if (!ptrs[i]) continue;   /* optional operands (a residual, a skip flag) */
        Buf *b = find(ptrs[i], 0);
        if (!b) die("fake device: %s: operand %d of (%s), %p, is not device memory", op, i + 1, names, ptrs[i]);
        if (b->open++ == 0) protect(b, PROT_READ | PROT_WRITE);
        CHECK(call->n < FD_MAX_OPERANDS);
        call->buf[call->n++] = b->user;
    }
}

void fd_leave(FdCall *call) {
    for (int i = 0; i < call->n; i++) {
        Buf *b = find(call->buf[i], 0);
        if (--b->open == 0) protect(b, PROT_NONE);
    }
    g_op = NULL;
    unlock();
}

/* ---- the fault handler --------------------------------------------------------------------- */

static void say(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        const ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

/* Not everything here is async-signal-safe (snprintf, backtrace): the process is about to
 * abort, and a test wants the sites. */
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const Buf *b = find(si->si_addr, 1);   /* no lock: the faulting thread may hold it */
    if (!b) {   /* not ours: the usual crash */
        signal(sig, SIG_DFL);
        return;
    }
    char line[512];
    const char *where = (const char *)si->si_addr;
    if (where < b->user || where >= b->user + b->span)
        snprintf(line, sizeof line, "fake device: device memory touched by the host at %p, in a guard page of the %zu-byte "
                 "buffer at %p%s%s\n", si->si_addr, b->bytes, (void *)b->user, g_op ? " during " : "", g_op ? g_op : "");
    else
        snprintf(line, sizeof line, "fake device: device memory touched by the host at %p, %zu bytes into the %zu-byte buffer "
                 "at %p%s%s%s\n", si->si_addr, (size_t)(where - b->user), b->bytes, (void *)b->user,
                 g_op ? " during " : " outside any operation", g_op ? g_op : "", g_op ? ", which was not given it" : "");
    say(line);
    say("fake device: the buffer was allocated at:\n");
    backtrace_symbols_fd((void *const *)b->site, b->frames, 2);
    say("fake device: touched at:\n");
    void *here[16];
    backtrace_symbols_fd(here, backtrace(here, 16), 2);
    signal(SIGABRT, SIG_DFL);
    abort();
}

void fd_install_handler(void) {
    static int done;
    if (done) return;
    done = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}
