/* SPDX-License-Identifier: BSD-3-Clause */
/* rendezvous.c - see rendezvous.h: rank 0's bytes to every rank through a file in a shared
 * directory, for launches that offer no other channel before a communicator exists. */
#include "rendezvous.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RDV_MAGIC "ddptrain-rdv-1"

/* Fixed size, so that the file size depends on the blob length only: a reader waits for
 * exactly that size, and a file of another launch or world size then fails the header check
 * with a message that says which, instead of a bare size mismatch. Written zero-filled. */
typedef struct {
    char magic[16];
    char key[RENDEZVOUS_KEY_MAX + 1];
    uint32_t world_size;
    uint32_t reserved;
    uint64_t blob_len;
} RdvHeader;

_Static_assert(sizeof(RdvHeader) == 16 + RENDEZVOUS_KEY_MAX + 1 + 16, "RdvHeader has padding");
_Static_assert(sizeof RDV_MAGIC <= sizeof(((RdvHeader *)0)->magic), "RDV_MAGIC too long");

/* ---- the key ---------------------------------------------------------------------------- */

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int key_char_ok(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
           ch == '-' || ch == '_';
}

static int key_ok(const char *key) {
    size_t n = strlen(key);
    if (n == 0 || n > RENDEZVOUS_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!key_char_ok(key[i])) return 0;
    return 1;
}

int rendezvous_key(int world_size, char *key, size_t n, char *err, size_t errlen) {
    char raw[1024] = "";
    size_t used = 0;
    int r = 0;
    /* SLURM_RESTART_COUNT tells a requeued job (same job id, same step ids) from its previous
     * life; SLURM_STEP_ID two steps of one job. */
    const char *job = env_nonempty("SLURM_JOB_ID");
    if (job) {
        const char *step = env_nonempty("SLURM_STEP_ID");
        const char *restart = env_nonempty("SLURM_RESTART_COUNT");
        r = snprintf(raw, sizeof raw, "slurm-%s.%s.%s", job, step ? step : "x", restart ? restart : "0");
        if (r < 0 || (size_t)r >= sizeof raw) return errf(err, errlen, "SLURM_JOB_ID etc.: too long for a rendezvous key");
        used = (size_t)r;
    }
    /* Both when both are present (torchrun inside a Slurm step): torchrun restarts its workers
     * within one step, which only TORCHELASTIC_RESTART_COUNT tells apart. torchrun's default
     * run id is the literal "none", which names no run; MASTER_ADDR:MASTER_PORT does, as long
     * as the port is not reused at once by the same host. */
    const char *run_id = env_nonempty("TORCHELASTIC_RUN_ID");
    if (run_id && strcmp(run_id, "none") == 0) run_id = NULL;
    const char *addr = env_nonempty("MASTER_ADDR"), *port = env_nonempty("MASTER_PORT");
    const char *trestart = env_nonempty("TORCHELASTIC_RESTART_COUNT");
    if (run_id || (addr && port)) {
        if (run_id)
            r = snprintf(raw + used, sizeof raw - used, "%storchrun-%s.%s", used ? "-" : "", run_id,
                         trestart ? trestart : "0");
        else
            r = snprintf(raw + used, sizeof raw - used, "%storchrun-%s_%s.%s", used ? "-" : "", addr, port,
                         trestart ? trestart : "0");
        if (r < 0 || (size_t)r >= sizeof raw - used)
            return errf(err, errlen, "TORCHELASTIC_RUN_ID or MASTER_ADDR etc.: too long for a rendezvous key");
        used += (size_t)r;
    }
    if (used == 0) {
        if (world_size > 1)
            return errf(err, errlen, "%d ranks but no launcher identity in the environment (SLURM_JOB_ID, "
                        "TORCHELASTIC_RUN_ID, or MASTER_ADDR and MASTER_PORT) to name the rendezvous file "
                        "after, so a file left by an earlier run could be taken for this one's: launch "
                        "with srun or torchrun, or set MASTER_ADDR and MASTER_PORT", world_size);
        snprintf(raw, sizeof raw, "single");
        used = strlen(raw);
    }
    if (used > RENDEZVOUS_KEY_MAX || used >= n)
        return errf(err, errlen, "rendezvous key '%s' is longer than %d characters", raw,
                    n - 1 < RENDEZVOUS_KEY_MAX ? (int)n - 1 : RENDEZVOUS_KEY_MAX);
    /* Host names and run ids may hold ':' or '/' (IPv6, user-chosen ids): not in a file name. */
    for (size_t i = 0; i < used; i++) key[i] = key_char_ok(raw[i]) ? raw[i] : '_';
    key[used] = '\0';
    return 0;
}

/* ---- the file --------------------------------------------------------------------------- */

static int rdv_path(char *path, size_t n, const char *dir, const char *key) {
    int r = snprintf(path, n, "%s/.rendezvous-%s", dir, key);
    return r < 0 || (size_t)r >= n ? -1 : 0;
}

static void header_fill(RdvHeader *h, const char *key, int world_size, size_t len) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, RDV_MAGIC, sizeof RDV_MAGIC);
    memcpy(h->key, key, strlen(key) + 1);
    h->world_size = (uint32_t)world_size;
    h->blob_len = (uint64_t)len;
}

/* The file carries a secret (whoever holds an NCCL unique id can join the communicator) and
 * steers every rank: its directory must be one nobody else can write, or another user could
 * plant a file there, or swap ours. */
static int check_dir(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (lstat(dir, &st) != 0) return errf(err, errlen, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return errf(err, errlen, "%s: not a directory (a symlink?): the rendezvous file needs a real one", dir);
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return errf(err, errlen, "%s: %s (mode %04o): the rendezvous file, which carries the communicator's secret id, "
                    "needs a directory only you can write (chmod go-w, or another --job_dir)", dir,
                    st.st_uid != geteuid() ? "owned by another user" : "writable by other users", (unsigned)(st.st_mode & 07777));
    return 0;
}

/* The file itself: ours, and readable by nobody else (as rank 0 creates it). */
static int check_file(const char *path, const struct stat *st, char *err, size_t errlen) {
    if (!S_ISREG(st->st_mode)) return errf(err, errlen, "%s: not a regular file: remove it", path);
    if (st->st_uid != geteuid()) return errf(err, errlen, "%s: owned by another user (uid %lu): not written by this job; remove it",
                                             path, (unsigned long)st->st_uid);
    if (st->st_mode & 077) return errf(err, errlen, "%s: mode %04o lets other users read it: not written by this job; remove it",
                                       path, (unsigned)(st->st_mode & 07777));
    return 0;
}

static int write_blob(const char *path, const char *dir, const RdvHeader *h, const void *blob, size_t len,
                      char *err, size_t errlen) {
    /* The job directory may not exist yet: rank 0 normally creates it only later. */
    if (mkdir_p(dir) != 0) return errf(err, errlen, "%s: cannot create directory: %s", dir, strerror(errno));
    if (check_dir(dir, err, errlen) != 0) return -1;
    unsigned char *buf = mallocCheck(sizeof *h + len);
    memcpy(buf, h, sizeof *h);
    if (len) memcpy(buf + sizeof *h, blob, len);
    /* Atomic, so a reader that sees the file sees all of it (rename is atomic on NFS and
     * Lustre as well), and a leftover of the same name is replaced, never half-overwritten. */
    int rc = write_file_atomic_mode(path, buf, sizeof *h + len, 0600);
    int e = errno;
    free(buf);
    if (rc != 0) return errf(err, errlen, "%s: cannot write: %s", path, strerror(e));
    return 0;
}

/* One look: 1 and the whole file in buf when it exists with exactly `want` bytes; 0 when it
 * does not exist yet (*seen = -1) or has another size (*seen = its size); -1 with err. */
static int try_read(const char *path, unsigned char *buf, size_t want, long long *seen, char *err, size_t errlen) {
    /* open, not stat: on NFS an open revalidates the cached directory entry (close-to-open
     * consistency), where a stat may keep answering "no such file" from the attribute cache. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);   /* no symlink, no FIFO that blocks */
    if (fd < 0) {
        /* ESTALE: rank 0's rename replaced the file between lookup and open on NFS. */
        if (errno == ENOENT || errno == ESTALE) {
            *seen = -1;
            return 0;
        }
        return errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return errf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    if ((unsigned long long)st.st_size != (unsigned long long)want) {
        *seen = (long long)st.st_size;
        close(fd);
        return 0;
    }
    /* Only a file that could be taken is judged: a leftover of another size is waited past
     * as before, since rank 0's rename replaces it. */
    if (check_file(path, &st, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            return errf(err, errlen, "%s: read %zu of %zu bytes: %s", path, got, want, e ? strerror(e) : "file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    return 1;
}

static int check_header(const char *path, const RdvHeader *got, const RdvHeader *want, char *err, size_t errlen) {
    if (memcmp(got->magic, want->magic, sizeof got->magic) != 0)
        return errf(err, errlen, "%s: not a ddptrain rendezvous file (bad magic): remove it", path);
    if (memcmp(got->key, want->key, sizeof got->key) != 0)
        return errf(err, errlen, "%s: written for launch '%.*s', not this launch '%s': remove it", path,
                    (int)strnlen(got->key, sizeof got->key), got->key, want->key);
    if (got->world_size != want->world_size)
        return errf(err, errlen, "%s: written for %lu ranks, but this launch has %lu: a leftover of an earlier "
                    "run? remove it", path, (unsigned long)got->world_size, (unsigned long)want->world_size);
    if (got->blob_len != want->blob_len)
        return errf(err, errlen, "%s: holds %llu bytes, expected %llu", path, (unsigned long long)got->blob_len,
                    (unsigned long long)want->blob_len);
    return 0;
}

/* Quick when rank 0 is already done (1 ms, doubling), and at most 20 opens a second per rank
 * while it is not: with hundreds of ranks polling, a shared file system's metadata server
 * would otherwise feel it. */
static void poll_pause(long *sleep_ns) {
    *sleep_ns = *sleep_ns ? *sleep_ns * 2 : 1000000L;
    if (*sleep_ns > 50000000L) *sleep_ns = 50000000L;
    struct timespec ts = {0, *sleep_ns};
    nanosleep(&ts, NULL);
}

static int read_blob(const char *path, const char *dir, const RdvHeader *h, void *blob, size_t len,
                     double timeout_s, char *err, size_t errlen) {
    const size_t want = sizeof *h + len;
    int dir_checked = 0;
    unsigned char *buf = mallocCheck(want);
    const double t0 = now_sec();
    long sleep_ns = 0;
    long long seen = -1;
    int rc;
    for (;;) {
        /* The directory may appear only once rank 0 has made it. */
        if (!dir_checked && access(dir, F_OK) == 0) {
            if ((rc = check_dir(dir, err, errlen)) != 0) break;
            dir_checked = 1;
        }
        rc = try_read(path, buf, want, &seen, err, errlen);
        if (rc > 0) {
            RdvHeader got;
            memcpy(&got, buf, sizeof got);
            rc = check_header(path, &got, h, err, errlen);
            if (rc == 0 && len) memcpy(blob, buf + sizeof got, len);
            break;
        }
        if (rc < 0) break;
        /* A file of the wrong size may still be replaced by rank 0's rename: keep waiting. */
        if (timeout_s > 0 && now_sec() - t0 > timeout_s) {
            if (seen < 0)
                rc = errf(err, errlen, "%s: not written by rank 0 within %g s: is %s on a file system every "
                          "node shares?", path, timeout_s, dir);
            else
                rc = errf(err, errlen, "%s: has %lld bytes, expected %zu, and rank 0 did not replace it within "
                          "%g s: a leftover of another program? remove it", path, seen, want, timeout_s);
            break;
        }
        poll_pause(&sleep_ns);
    }
    free(buf);
    return rc;
}

int rendezvous_share(const char *dir, const char *key, int rank, int world_size, void *blob, size_t len,
                     double timeout_s, char *err, size_t errlen) {
    CHECK(dir && key && world_size >= 1 && rank >= 0 && rank < world_size && (blob || len == 0));
    if (world_size == 1) return 0;
    if (!key_ok(key))
        return errf(err, errlen, "rendezvous key '%s': empty, longer than %d characters, or not [A-Za-z0-9._-]", key,
                    RENDEZVOUS_KEY_MAX);
    char path[4400];
    if (rdv_path(path, sizeof path, dir, key) != 0) return errf(err, errlen, "%s/.rendezvous-%s: path too long", dir, key);
    RdvHeader h;
    header_fill(&h, key, world_size, len);
    if (rank == 0) return write_blob(path, dir, &h, blob, len, err, errlen);
    return read_blob(path, dir, &h, blob, len, timeout_s, err, errlen);
}

int rendezvous_read_once(const char *path, const char *key, int world_size, void *blob, size_t len, char *err,
                         size_t errlen) {
    CHECK(key_ok(key) && world_size >= 1 && (blob || len == 0));
    RdvHeader h;
    header_fill(&h, key, world_size, len);
    const size_t want = sizeof h + len;
    unsigned char *buf = mallocCheck(want);
    long long seen = -1;
    int rc = try_read(path, buf, want, &seen, err, errlen);
    if (rc > 0) {
        RdvHeader got;
        memcpy(&got, buf, sizeof got);
        rc = check_header(path, &got, &h, err, errlen) == 0 ? 1 : -1;
        if (rc > 0 && len) memcpy(blob, buf + sizeof got, len);
    }
    free(buf);
    return rc;
}

void rendezvous_cleanup(const char *dir, const char *key, int rank) {
    if (rank != 0 || !dir || !key) return;
    char path[4400];
    if (rdv_path(path, sizeof path, dir, key) != 0) return;
    /* Absent is normal: one rank wrote nothing, or the share itself failed. */
    if (unlink(path) != 0 && errno != ENOENT)
        fprintf(stderr, "%s: warning: %s: cannot remove: %s\n", g_progname, path, strerror(errno));
}
