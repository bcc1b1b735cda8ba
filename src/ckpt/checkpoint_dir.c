/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint_dir.c - the checkpoint directory: ckpt-<step>.h5 names, the `latest` pointer, the
 * prune that keeps the newest good files, and the search for the newest usable one. */
#include "checkpoint.h"
#include "checkpoint_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

void checkpoint_path(char *buf, size_t len, const char *dir, long global_step) {
    snprintf_check(buf, len, "%s/ckpt-%09ld.h5", dir, global_step);
}

int checkpoint_parse_name(const char *name, long *global_step) {
    if (strncmp(name, "ckpt-", 5) != 0) return 0;
    const char *p = name + 5;
    long v = 0;
    int nd = 0;
    for (; *p >= '0' && *p <= '9'; p++, nd++) {
        if (v > (1L << 50)) return 0;
        v = v * 10 + (*p - '0');
    }
    if (nd < 9 || strcmp(p, ".h5") != 0) return 0;
    *global_step = v;
    return 1;
}

typedef struct {
    long step;
    char name[256];
} Entry;

static int entry_newest_first(const void *a, const void *b) {
    long x = ((const Entry *)a)->step, y = ((const Entry *)b)->step;
    if (x != y) return x < y ? 1 : -1;
    return strcmp(((const Entry *)a)->name, ((const Entry *)b)->name);
}

/* ckpt-*.h5 of dir, newest first; *n = -1 and errno set when dir cannot be read. */
static Entry *list_checkpoints(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) { *n = -1; return NULL; }
    int cap = 16;
    Entry *e = mallocCheck((size_t)cap * sizeof *e);
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL) {
        long step;
        if (!checkpoint_parse_name(de->d_name, &step) || strlen(de->d_name) >= sizeof e->name) continue;
        /* a symbolic link or a FIFO under a checkpoint's name is none of ours: never read */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (*n == cap) {
            cap *= 2;
            e = realloc(e, (size_t)cap * sizeof *e);
            CHECK(e != NULL);
        }
        e[*n].step = step;
        snprintf(e[*n].name, sizeof e->name, "%s", de->d_name);
        (*n)++;
    }
    closedir(d);
    qsort(e, (size_t)*n, sizeof *e, entry_newest_first);
    return e;
}

/* The base name `latest` holds, or "" (absent, empty, or not a plain file name). */
static void read_latest(const char *dir, char *name, size_t len) {
    name[0] = '\0';
    char p[CKPT_PATH_MAX + 16];
    snprintf_check(p, sizeof p, "%s/%s", dir, CKPT_LATEST_NAME);
    /* never through a symbolic link, never blocked on a FIFO: such a `latest` names nothing */
    const int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); return; }
    FILE *f = fdopen(fd, "r");
    if (!f) { close(fd); return; }
    char line[512];
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t n = strlen(line);
        if (n > 0 && n < len && !strchr(line, '/') && strcmp(line, ".") && strcmp(line, ".."))
            memcpy(name, line, n + 1);
    }
    fclose(f);
}

int checkpoint_set_latest(const char *dir, const char *path, char *err, size_t errlen) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char p[CKPT_PATH_MAX + 16], line[512];
    snprintf_check(p, sizeof p, "%s/%s", dir, CKPT_LATEST_NAME);
    snprintf_check(line, sizeof line, "%s\n", base);
    if (write_file_atomic(p, line, strlen(line)) != 0)
        return errf(err, errlen, "%s: cannot write: %s", p, strerror(errno));
    return 0;
}

/* Leftovers of a write that died: "<ckpt>.h5.tmp.<pid>.<k>" and "latest.tmp.<pid>.<k>". */
static int is_stale_tmp(const char *name) {
    return (strncmp(name, "ckpt-", 5) == 0 && strstr(name, ".h5.tmp.") != NULL) ||
           strncmp(name, CKPT_LATEST_NAME ".tmp.", strlen(CKPT_LATEST_NAME) + 5) == 0;
}

int checkpoint_prune(const char *dir, int keep, char *err, size_t errlen) {
    int removed = 0;
    char p[CKPT_PATH_MAX + 300];
    DIR *d = opendir(dir);
    if (!d) return errf(err, errlen, "%s: cannot list: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_stale_tmp(de->d_name)) continue;
        snprintf_check(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) == 0) removed++;
    }
    closedir(d);
    if (keep <= 0) return removed;

    int n;
    Entry *e = list_checkpoints(dir, &n);
    if (n < 0) return errf(err, errlen, "%s: cannot list: %s", dir, strerror(errno));
    char latest[256];
    read_latest(dir, latest, sizeof latest);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        snprintf_check(p, sizeof p, "%s/%s", dir, e[i].name);
        char why[1024];
        /* Headers alone are not enough: a newest file with damaged data would count as kept
         * and push the last good one out. */
        if (kept < keep && checkpoint_probe_data(p, why, sizeof why) == 0) { kept++; continue; }
        if (strcmp(e[i].name, latest) == 0) continue;   /* the run may have resumed from it */
        if (unlink(p) != 0) {
            int rc = errf(err, errlen, "%s: cannot remove: %s", p, strerror(errno));
            free(e);
            return rc;
        }
        removed++;
    }
    free(e);
    return removed;
}

int checkpoint_find_latest(const char *dir, const Model *m, char *out, size_t outlen,
                           CheckpointSkipFn on_skip, void *ctx, char *err, size_t errlen) {
    int n;
    Entry *e = list_checkpoints(dir, &n);
    if (n < 0) {
        if (errno == ENOENT) { errf(err, errlen, "%s: no checkpoint directory", dir); return 1; }
        return errf(err, errlen, "%s: cannot list: %s", dir, strerror(errno));
    }
    char latest[256];
    read_latest(dir, latest, sizeof latest);
    char p[CKPT_PATH_MAX + 300], why[1024] = "";
    int tried = 0, rc = -1;
    /* i = -1: the file `latest` names; then every ckpt-*.h5 newest first. */
    for (int i = latest[0] ? -1 : 0; i < n && rc != 0; i++) {
        const char *name = i < 0 ? latest : e[i].name;
        if (i >= 0 && strcmp(name, latest) == 0) continue;
        snprintf_check(p, sizeof p, "%s/%s", dir, name);
        tried++;
        if (checkpoint_verify(p, m, why, sizeof why) == 0) {
            if (snprintf(out, outlen, "%s", p) >= (int)outlen) {
                free(e);
                return errf(err, errlen, "%s: path too long", p);
            }
            rc = 0;
        } else if (on_skip) {
            on_skip(ctx, p, why);
        }
    }
    free(e);
    if (rc == 0) return 0;
    if (tried == 0) { errf(err, errlen, "%s: no checkpoint", dir); return 1; }
    return errf(err, errlen, "%s: none of the %d checkpoint(s) is usable; the last one tried: %s", dir, tried, why);
}
