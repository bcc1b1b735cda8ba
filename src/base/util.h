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
 * on a user-facing error (bad flag, bad file), so messages all look the same. A control
 * character left in the message (from a name no caller quoted with quote_name) is printed as
 * \ooo: the message stays one line and sends nothing to the terminal. */
void die_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
#define die(...) die_code(1, __VA_ARGS__)

/* msg with every control character (C0, DEL) written \ooo, as die() prints it: one line that
 * sends nothing to the terminal, for messages printed without die(). Into buf (n bytes; 4 per
 * input byte always fit); returns buf. */
const char *one_line(char *buf, size_t n, const char *msg);

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

/* The length of the valid UTF-8 sequence at s (1 for ASCII, 2 to 4), or 0 when s starts with
 * a byte that begins none (a continuation byte, an overlong form, a surrogate, past U+10FFFF,
 * or a sequence the string ends inside). s is NUL-terminated; *s must not be NUL. */
int utf8_seq_len(const char *s);

/* A user's string (a file name, a path, a key) as a one-line message may print it, quoted as
 * git quotes an unusual path: s itself when it is valid UTF-8 holding no control character (C0,
 * DEL, C1: U+0080-U+009F); otherwise s in double quotes with C escapes: \a \b \t \n \v \f
 * \r, \" and \\, every other control byte and every byte that is not UTF-8 as \ooo in octal
 * (ESC is \033). So a newline or an escape sequence in a name never breaks the line or reaches
 * the terminal. Written into buf (n bytes; a string too long for it is cut on a character,
 * "..." marking the cut); returns buf. */
const char *quote_name(char *buf, size_t n, const char *s);
/* 1 when quote_name quotes s (a control character, or a byte that is not UTF-8). */
int name_needs_quoting(const char *s);
/* quote_name into a buffer of the enclosing block, for a message's argument:
 * die("%s: not a regular file", QUOTED(path)). */
#define QUOTE_BUF 2048
#define QUOTED(s) quote_name((char[QUOTE_BUF]){0}, QUOTE_BUF, (s))

/* Monotonic seconds. */
double now_sec(void);

/* The process's CPU time in seconds, all threads: what a benchmark reports on a machine that
 * other jobs share, where wall time includes the time slices they take. */
double cpu_sec(void);

/* The median of x[0..n) (0 for n == 0); sorts x in place. */
double median_sort(double *x, size_t n);

/* Format into a caller buffer; truncation is an internal error. */
void snprintf_check(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* mkdir -p with mode 0777 & ~umask; returns 0 or -1 with errno set. */
int mkdir_p(const char *path);

/* fopen(path, "a") that never writes through a symbolic link planted under path (O_NOFOLLOW:
 * ELOOP) and takes only a regular file (a FIFO: EINVAL, without blocking in open). The job
 * directory's logs are opened so. NULL with errno on failure. */
FILE *fopen_append_nofollow(const char *path);

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
