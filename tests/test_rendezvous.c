/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rendezvous.c - the file rendezvous of rendezvous.h, on the CPU, between forked processes:
 * rank 0's bytes reach every rank, leftovers of other launches are ignored or refused with the
 * file's name, a missing rank 0 ends in the timeout error instead of a hang, and the key tells
 * launches (and requeues) apart. The fallback that carries the NCCL id to torchrun-style ranks
 * runs on no machine the other tests have, so this is where it is checked. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/rendezvous.h"
#include "base/util.h"
#include "helpers/tmpdir_testutil.h"

static int g_fail = 0;
#define EXPECT(cond, ...) do { \
    if (cond) { printf("ok: "); printf(__VA_ARGS__); printf("\n"); } \
    else { printf("FAIL (%s:%d): ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); g_fail++; } \
} while (0)

enum { WORLD = 4, BLOB = 128 };   /* 128: the size of an ncclUniqueId */

static char g_dir[256];

static const char *const launcher_vars[] = {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT",
                                            "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT",
                                            "TORCHELASTIC_RESTART_COUNT", NULL};

static void clear_launcher_env(void) {
    for (int i = 0; launcher_vars[i]; i++) unsetenv(launcher_vars[i]);
}

static void path_of(char *path, size_t n, const char *dir, const char *key) {
    snprintf_check(path, n, "%s/.rendezvous-%s", dir, key);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopenCheck(path, "wb");
    CHECK(fwrite(data, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

/* The whole file into buf (at most cap bytes); returns its length. */
static size_t read_bytes(const char *path, void *buf, size_t cap) {
    FILE *f = fopenCheck(path, "rb");
    size_t n = fread(buf, 1, cap, f);
    CHECK(fclose(f) == 0);
    return n;
}

/* What a child rank sends back: small enough for one atomic pipe write. */
typedef struct {
    int rc;
    char err[512];
    unsigned char blob[BLOB];
} ChildResult;

typedef struct {
    pid_t pid;
    int fd;
} Child;

/* Rank `rank` as a child process: share, send the outcome, exit. */
static Child spawn_rank(const char *dir, const char *key, int rank, int world, double timeout_s) {
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);   /* or the child's exit would print the parent's buffered lines again */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        ChildResult r;
        memset(&r, 0, sizeof r);
        r.rc = rendezvous_share(dir, key, rank, world, r.blob, sizeof r.blob, timeout_s, r.err, sizeof r.err);
        ssize_t w = write(p[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 3);
    }
    close(p[1]);
    return (Child){pid, p[0]};
}

/* Collect a child's outcome; returns 0 when it exited cleanly and sent a full result. */
static int reap(Child c, ChildResult *r) {
    memset(r, 0, sizeof *r);
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = read(c.fd, (char *)r + got, sizeof *r - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(c.fd);
    int status = 0;
    CHECK(waitpid(c.pid, &status, 0) == c.pid);
    return got == sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void fill_random(unsigned char *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

/* ---- four ranks share a blob -------------------------------------------------------------- */

static void test_share(void) {
    const char *key = "test-share.0";
    char path[512], stale[512];
    path_of(path, sizeof path, g_dir, key);
    path_of(stale, sizeof stale, g_dir, "test-share-earlier.0");

    /* A complete file of another launch (another key) with other bytes: must be ignored. */
    unsigned char other[BLOB];
    fill_random(other, sizeof other, 7u);
    char err[1024] = "";
    CHECK(rendezvous_share(g_dir, "test-share-earlier.0", 0, WORLD, other, sizeof other, 1.0, err, sizeof err) == 0);
    /* A file under this very name but of the wrong size: readers must wait for rank 0's. */
    write_bytes(path, "leftover", 8);

    unsigned char blob[BLOB];
    fill_random(blob, sizeof blob, (unsigned)getpid() ^ (unsigned)time(NULL));
    Child kids[WORLD];
    for (int r = 1; r < WORLD; r++) kids[r] = spawn_rank(g_dir, key, r, WORLD, 5.0);
    /* Let the others start polling first, as on a real job where rank 0 is rarely first. */
    struct timespec ts = {0, 30 * 1000000L};
    nanosleep(&ts, NULL);
    double t0 = now_sec();
    int rc0 = rendezvous_share(g_dir, key, 0, WORLD, blob, sizeof blob, 5.0, err, sizeof err);
    EXPECT(rc0 == 0, "rank 0 wrote %s%s%s", path, rc0 ? ": " : "", rc0 ? err : "");
    int same = 0, clean = 0;
    for (int r = 1; r < WORLD; r++) {
        ChildResult res;
        int ok = reap(kids[r], &res) == 0;
        clean += ok;
        if (ok && res.rc == 0 && memcmp(res.blob, blob, sizeof blob) == 0) same++;
        else printf("     rank %d: exit %s, rc %d, %s\n", r, ok ? "clean" : "BAD", res.rc, res.err);
    }
    double dt = now_sec() - t0;
    EXPECT(clean == WORLD - 1 && same == WORLD - 1,
           "ranks 1..%d (forked) received rank 0's %d bytes identically (%d of %d), %.0f ms after rank 0 wrote",
           WORLD - 1, BLOB, same, WORLD - 1, dt * 1e3);
    EXPECT(same == WORLD - 1, "a wrong-size file under the same name was waited past, not read");
    EXPECT(exists(stale), "the file of another launch was left alone (and not read: the bytes differ)");

    rendezvous_cleanup(g_dir, key, 1);
    EXPECT(exists(path), "rendezvous_cleanup on rank 1 leaves the file");
    rendezvous_cleanup(g_dir, key, 0);
    EXPECT(!exists(path), "rendezvous_cleanup on rank 0 removes it");
    rendezvous_cleanup(g_dir, key, 0);   /* again: absent is normal, no warning expected */
    rendezvous_cleanup(g_dir, "test-share-earlier.0", 0);
}

/* ---- leftovers that must be refused ------------------------------------------------------- */

static void test_bad_headers(void) {
    unsigned char blob[BLOB], got[BLOB];
    fill_random(blob, sizeof blob, 11u);
    char path[512], err[1024];
    unsigned char file[4096];

    /* Right size, bad magic. */
    path_of(path, sizeof path, g_dir, "test-magic.0");
    CHECK(rendezvous_share(g_dir, "test-magic.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err) == 0);
    size_t n = read_bytes(path, file, sizeof file);
    file[0] ^= 0xff;
    write_bytes(path, file, n);
    int rc = rendezvous_share(g_dir, "test-magic.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "not a ddptrain rendezvous file"),
           "a file with a bad magic is refused, naming it: %s", rc ? err : "(accepted)");

    /* Right size, written for another world size (an earlier run under the same key). */
    path_of(path, sizeof path, g_dir, "test-world.0");
    CHECK(rendezvous_share(g_dir, "test-world.0", 0, 8, blob, sizeof blob, 1.0, err, sizeof err) == 0);
    rc = rendezvous_share(g_dir, "test-world.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "8 ranks"),
           "a file written for 8 ranks is refused by a 4-rank launch: %s", rc ? err : "(accepted)");

    /* Right size, another launch's key inside (a renamed or copied file). */
    char from[512];
    path_of(from, sizeof from, g_dir, "test-keyA.0");
    path_of(path, sizeof path, g_dir, "test-keyB.0");
    CHECK(rendezvous_share(g_dir, "test-keyA.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err) == 0);
    CHECK(rename(from, path) == 0);
    rc = rendezvous_share(g_dir, "test-keyB.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "test-keyA.0"),
           "a file holding another key is refused: %s", rc ? err : "(accepted)");

    /* A key that is not a file-name component. */
    rc = rendezvous_share(g_dir, "../escape", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "rendezvous key"), "a key with '/' is refused: %s", rc ? err : "(accepted)");

    /* One rank: nothing to exchange, nothing written. */
    path_of(path, sizeof path, g_dir, "test-single");
    rc = rendezvous_share(g_dir, "test-single", 0, 1, blob, sizeof blob, 1.0, err, sizeof err);
    EXPECT(rc == 0 && !exists(path), "one rank: returns at once and writes no file");

    /* Rank 0 creates the directory: the job directory usually does not exist yet. */
    char sub[512];
    snprintf_check(sub, sizeof sub, "%s/job/dir", g_dir);
    path_of(path, sizeof path, sub, "test-mkdir.0");
    rc = rendezvous_share(sub, "test-mkdir.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err);
    EXPECT(rc == 0 && exists(path), "rank 0 creates a missing directory %s%s%s", sub, rc ? ": " : "", rc ? err : "");
}

/* ---- files and directories other users could plant or read ----------------------------- */

static void test_hostile(void) {
    unsigned char blob[BLOB], got[BLOB];
    fill_random(blob, sizeof blob, 23u);
    char path[512], err[1024], victim[512], link[600];
    struct stat st;

    /* Rank 0's file is readable by the user only: it carries the communicator's secret. */
    path_of(path, sizeof path, g_dir, "test-mode.0");
    int rc = rendezvous_share(g_dir, "test-mode.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err);
    EXPECT(rc == 0 && stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "rank 0's file is created mode 0600 (got %04o)%s%s",
           rc == 0 ? (unsigned)(st.st_mode & 0777) : 0u, rc ? ": " : "", rc ? err : "");

    /* ... and a copy other users can read is not taken for it. */
    CHECK(chmod(path, 0644) == 0);
    rc = rendezvous_share(g_dir, "test-mode.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "other users"), "a file of mode 0644 is refused: %s", rc ? err : "(accepted)");

    /* A file of another owner (root can make one; others cannot, nor need to). */
    if (geteuid() == 0) {
        CHECK(chmod(path, 0600) == 0 && chown(path, 65534, 65534) == 0);
        rc = rendezvous_share(g_dir, "test-mode.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
        EXPECT(rc != 0 && strstr(err, path) && strstr(err, "another user"), "a file of another owner is refused: %s", rc ? err : "(accepted)");
    } else {
        printf("ok: (a file of another owner: not tried, needs root to make one)\n");
    }

    /* A directory others can write: anyone could plant or swap the file there. */
    char open_dir[512];
    snprintf_check(open_dir, sizeof open_dir, "%s/open", g_dir);
    CHECK(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
    rc = rendezvous_share(open_dir, "test-open.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, open_dir) && strstr(err, "writable by other users"),
           "rank 0 refuses a directory of mode 0777: %s", rc ? err : "(accepted)");
    rc = rendezvous_share(open_dir, "test-open.0", 1, WORLD, got, sizeof got, 1.0, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "writable by other users"), "so does a reader: %s", rc ? err : "(accepted)");

    /* Symlinks planted at the temporary names rank 0 writes through, and at the file itself. */
    snprintf_check(victim, sizeof victim, "%s/victim", g_dir);
    write_bytes(victim, "precious", 8);
    path_of(path, sizeof path, g_dir, "test-link.0");
    const char *fmts[] = {"%s.tmp.%d", "%s.tmp.%d.0"};
    for (int i = 0; i < 2; i++) {
        snprintf_check(link, sizeof link, fmts[i], path, (int)getpid());
        CHECK(symlink(victim, link) == 0);
    }
    rc = rendezvous_share(g_dir, "test-link.0", 0, WORLD, blob, sizeof blob, 1.0, err, sizeof err);
    char vb[16] = "";
    size_t vn = read_bytes(victim, vb, sizeof vb - 1);
    EXPECT(rc == 0 && vn == 8 && !memcmp(vb, "precious", 8), "symlinks at the temporary names are not followed%s%s",
           rc ? ": " : "", rc ? err : "");
    CHECK(unlink(path) == 0 && symlink(victim, path) == 0);
    rc = rendezvous_share(g_dir, "test-link.0", 1, WORLD, got, sizeof got, 0.2, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path), "a symlink in place of the file is refused: %s", rc ? err : "(accepted)");
}

/* ---- rank 0 never comes ------------------------------------------------------------------- */

static void test_timeout(void) {
    unsigned char got[BLOB];
    char path[512], err[1024] = "";
    path_of(path, sizeof path, g_dir, "test-nobody.0");
    double t0 = now_sec();
    int rc = rendezvous_share(g_dir, "test-nobody.0", 2, WORLD, got, sizeof got, 0.3, err, sizeof err);
    double dt = now_sec() - t0;
    EXPECT(rc != 0 && dt >= 0.3 && dt < 1.5, "no rank 0: rank 2 gives up after %.2f s (timeout 0.3 s)", dt);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "not written by rank 0 within 0.3 s") &&
           strstr(err, "file system every node shares"), "the error names the file and the likely cause: %s", err);

    /* A file that never reaches the expected size: the timeout says what was seen. */
    path_of(path, sizeof path, g_dir, "test-short.0");
    write_bytes(path, "short", 5);
    rc = rendezvous_share(g_dir, "test-short.0", 1, WORLD, got, sizeof got, 0.3, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, path) && strstr(err, "has 5 bytes"),
           "a wrong-size leftover that rank 0 never replaces: %s", err);
}

/* ---- the key ------------------------------------------------------------------------------ */

static void test_key(void) {
    char k1[RENDEZVOUS_KEY_MAX + 1], k2[RENDEZVOUS_KEY_MAX + 1], err[1024] = "";
    clear_launcher_env();
    int rc = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "SLURM_JOB_ID") && strstr(err, "MASTER_ADDR"),
           "4 ranks and no launcher identity: refused: %s", rc ? err : "(accepted)");
    rc = rendezvous_key(1, k1, sizeof k1, err, sizeof err);
    EXPECT(rc == 0 && strcmp(k1, "single") == 0, "1 rank and no launcher identity: key '%s'", rc ? err : k1);

    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    int a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    setenv("SLURM_RESTART_COUNT", "1", 1);
    int b = rendezvous_key(4, k2, sizeof k2, err, sizeof err);
    EXPECT(a == 0 && b == 0 && strcmp(k1, k2) != 0, "Slurm: a requeued job gets another key ('%s' vs '%s')", k1, k2);
    setenv("SLURM_STEP_ID", "1", 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a == 0 && strcmp(k1, k2) != 0, "Slurm: another step of the job gets another key ('%s')", k1);

    clear_launcher_env();
    setenv("MASTER_ADDR", "node-07", 1);
    setenv("MASTER_PORT", "29500", 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    setenv("TORCHELASTIC_RESTART_COUNT", "1", 1);
    b = rendezvous_key(4, k2, sizeof k2, err, sizeof err);
    EXPECT(a == 0 && b == 0 && strcmp(k1, k2) != 0, "torchrun: a restart gets another key ('%s' vs '%s')", k1, k2);
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a == 0 && strcmp(k1, k2) == 0, "torchrun: the default run id 'none' names no run (key '%s')", k1);
    setenv("TORCHELASTIC_RUN_ID", "f3a9c2", 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a == 0 && strstr(k1, "f3a9c2") && strcmp(k1, k2) != 0, "torchrun: a run id names the run ('%s')", k1);

    clear_launcher_env();
    setenv("MASTER_ADDR", "fe80::1/x", 1);
    setenv("MASTER_PORT", "29500", 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a == 0 && !strchr(k1, ':') && !strchr(k1, '/'), "an IPv6 master address gives a file-name-safe key ('%s')",
           k1);
    unsetenv("MASTER_PORT");
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a != 0, "MASTER_ADDR without MASTER_PORT is no identity: %s", a ? err : k1);

    clear_launcher_env();
    char longid[400];
    memset(longid, '7', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    setenv("SLURM_JOB_ID", longid, 1);
    a = rendezvous_key(4, k1, sizeof k1, err, sizeof err);
    EXPECT(a != 0 && strstr(err, "longer than"), "a key over %d characters is refused", RENDEZVOUS_KEY_MAX);
    clear_launcher_env();
}

int main(void) {
    alarm(30);   /* a hang is a failure, not a stuck `make check` */
    test_tmpdir(g_dir, sizeof g_dir, "test_rendezvous");
    printf("     directory %s\n", g_dir);
    double t0 = now_sec();
    test_share();
    test_bad_headers();
    test_hostile();
    test_timeout();
    test_key();
    test_rm_tree(g_dir);
    printf("     %.2f s\n", now_sec() - t0);
    printf(g_fail ? "%d check(s) failed\n" : "all checks passed\n", g_fail);
    return g_fail ? 1 : 0;
}
