/* SPDX-License-Identifier: BSD-3-Clause */
/* util.h - error checks that name the failing call, file and line; timers; small helpers.
 * Every fallible call in ddptrain goes through one of these so that a failure never passes
 * silently and the message says where it happened. */
#ifndef DDP_UTIL_H
#define DDP_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>

/* Print "ddptrain: <message>" on stderr and exit with `code`. The one place the process dies
 * on a user-facing error (bad flag, bad file), so messages all look the same. */
void die_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
#define die(...) die_code(1, __VA_ARGS__)

/* Internal failures (allocation, I/O syscalls): report the call and file:line. */
void fail_at(const char *file, int line, const char *what, const char *detail) __attribute__((noreturn));

#define CHECK(cond) do { if (!(cond)) fail_at(__FILE__, __LINE__, #cond, NULL); } while (0)

void *malloc_check(size_t size, const char *file, int line);
void *calloc_check(size_t n, size_t size, const char *file, int line);
void *aligned_alloc_check(size_t size, const char *file, int line);   /* 64-byte aligned, zeroed */
FILE *fopen_check(const char *path, const char *mode, const char *file, int line);
#define mallocCheck(n) malloc_check((n), __FILE__, __LINE__)
#define callocCheck(n, s) calloc_check((n), (s), __FILE__, __LINE__)
#define alignedAllocCheck(n) aligned_alloc_check((n), __FILE__, __LINE__)
#define fopenCheck(p, m) fopen_check((p), (m), __FILE__, __LINE__)

/* Set on ranks other than 0 for errors every rank hits identically (a bad flag), so that a
 * job prints the line once. */
extern int g_die_quiet;

/* Set while a progress bar occupies the console's last line without a newline: die() ends
 * that line first, so the error starts on a line of its own. */
extern int g_console_line_open;

/* Called by die() after the message, before exit: a multi-rank program ends the whole job
 * there so the other ranks do not wait for this one. */
extern void (*g_die_hook)(int code);

/* Prefix for user-facing messages ("ddptrain", "ddptrain-data"); set once in main. */
extern const char *g_progname;

/* Writes one line into err (when given) and returns -1, so failure paths read
 * `return errf(err, errlen, "%s: ...", path)`. */
int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Monotonic seconds. */
double now_sec(void);

/* The median of x[0..n) (0 for n == 0); sorts x in place. */
double median_sort(double *x, size_t n);

/* Format into a caller buffer; truncation is an internal error. */
void snprintf_check(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* mkdir -p with mode 0777 & ~umask; returns 0 or -1 with errno set. */
int mkdir_p(const char *path);

/* Write `len` bytes to `path` atomically: temp file in the same directory, fsync, rename,
 * fsync of the directory (the rename is durable only then). The temp file is created with
 * O_EXCL|O_NOFOLLOW, so a file or symlink planted under its name is never written through.
 * Returns 0, or -1 with errno set (the temp file is removed). */
int write_file_atomic(const char *path, const void *data, size_t len);
/* The same with the new file's mode (before umask), e.g. 0600 for a file only the user may read. */
int write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode);

/* Temporary names beside `path`: "<path>.tmp.<pid>.<attempt>" into buf; -1 if too long.
 * Callers create the file exclusively and try the next attempt when the name is taken. */
#define TMP_NAME_ATTEMPTS 64
int tmp_name(char *buf, size_t n, const char *path, int attempt);

/* pthread_create for a helper thread with every signal blocked in it: SIGTERM and the
 * preemption signal are then delivered to the main thread, whose handler and loop act on
 * them, and never interrupt a helper's system calls. Returns pthread_create's result. */
int helper_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

/* fsync of the file or directory at `path`, opened with `flags` (O_RDONLY, | O_DIRECTORY);
 * 0 or -1 with errno. */
int fsync_path(const char *path, int flags);
/* fsync of the directory holding `path` (after a rename into it); 0 or -1 with errno. */
int fsync_dir_of(const char *path);

#endif
