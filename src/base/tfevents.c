/* SPDX-License-Identifier: BSD-3-Clause */
/* tfevents.c - see tfevents.h. */
#include "tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "util.h"

/* event.proto's and summary.proto's field numbers */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

uint32_t tfevents_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le(PbBuf *b, uint64_t v, int nbytes) {
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    pb_raw(b, tmp, (size_t)nbytes);
}

void tfevents_frame(PbBuf *out, const void *data, size_t n) {
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    pb_raw(out, len, sizeof len);
    put_le(out, tfevents_mask(crc32c(len, sizeof len)), 4);
    pb_raw(out, data, n);
    put_le(out, tfevents_mask(crc32c(data, n)), 4);
}

static double wall_now(void) {
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_REALTIME, &ts) == 0);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* All of the record at once; a write cut short by a signal or a full pipe goes on. */
static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* t->event framed into t->record and written. */
static int write_event(TfEvents *t) {
    pb_reset(&t->record);
    tfevents_frame(&t->record, t->event.data, t->event.len);
    return write_all(t->fd, t->record.data, t->record.len);
}

/* The host name as a file name takes it: anything but letters, digits, '.', '-' and '_' as
 * '_' (the kernel's name may hold a '/'). */
static void host_for_name(char *buf, size_t n) {
    if (gethostname(buf, n) != 0) snprintf(buf, n, "localhost");
    buf[n - 1] = '\0';
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '-' || *c == '_'))
            *c = '_';
}

/* The time for the new file's name: now, or one second after the newest event file already in
 * the directory when that is not earlier. TensorBoard reads a directory's files in name order
 * and passes over a file that appears after a later-named one, so a resumed run must sort after
 * its predecessor: a run resumed within the second it started in (the pid decides then) or on a
 * host whose clock is behind would otherwise be left out. */
static long long name_time(int dfd) {
    long long t = (long long)time(NULL);
    const int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return t;
    }
    const size_t plen = strlen(TFEVENTS_PREFIX);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, TFEVENTS_PREFIX, plen) != 0) continue;
        char *end;
        const long long other = strtoll(de->d_name + plen, &end, 10);
        if (end != de->d_name + plen && other >= t && other < LLONG_MAX) t = other + 1;
    }
    closedir(d);
    return t;
}

int tfevents_open(TfEvents *t, const char *dir, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->fd = -1;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return errf(err, errlen, "%s: cannot create directory: %s", dir, strerror(errno));
    /* O_NOFOLLOW: a link planted under the directory's name is not followed (ELOOP) */
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return errf(err, errlen, "%s: cannot open directory: %s", dir, strerror(errno));
    char host[256], name[400];
    host_for_name(host, sizeof host);
    snprintf(name, sizeof name, TFEVENTS_PREFIX "%010lld.%s.%d", name_time(dfd), host, (int)getpid());
    snprintf(t->path, sizeof t->path, "%s/%s", dir, name);
    t->fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    const int e = errno;
    close(dfd);
    if (t->fd < 0) return errf(err, errlen, "%s: cannot create: %s", t->path, strerror(e));
    pb_init(&t->event);
    pb_init(&t->summary);
    pb_init(&t->value);
    pb_init(&t->record);
    pb_double(&t->event, EVENT_WALL_TIME, wall_now());
    pb_string(&t->event, EVENT_FILE_VERSION, TFEVENTS_FILE_VERSION);
    if (write_event(t) != 0) {
        const int we = errno;
        tfevents_close(t);
        return errf(err, errlen, "%s: cannot write: %s", t->path, strerror(we));
    }
    return 0;
}

int tfevents_write_scalars(TfEvents *t, int64_t step, const TfScalar *s, size_t n) {
    CHECK(t->fd >= 0);
    if (n == 0) return 0;
    pb_reset(&t->summary);
    for (size_t i = 0; i < n; i++) {
        pb_reset(&t->value);
        pb_string(&t->value, VALUE_TAG, s[i].tag);
        pb_float(&t->value, VALUE_SIMPLE_VALUE, (float)s[i].value);
        pb_message(&t->summary, SUMMARY_VALUE, &t->value);
    }
    pb_reset(&t->event);
    pb_double(&t->event, EVENT_WALL_TIME, wall_now());
    pb_int64(&t->event, EVENT_STEP, step);
    pb_message(&t->event, EVENT_SUMMARY, &t->summary);
    return write_event(t);
}

void tfevents_close(TfEvents *t) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    pb_free(&t->event);
    pb_free(&t->summary);
    pb_free(&t->value);
    pb_free(&t->record);
}
