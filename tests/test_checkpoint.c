/* SPDX-License-Identifier: BSD-3-Clause */
/* test_checkpoint.c - checkpoints: bit-exact round trip, refusal of mismatched, truncated,
 * corrupted and foreign files with the model left untouched, fallback to the previous
 * checkpoint, pruning, the background writer (same bytes as a synchronous save, a snapshot
 * taken at submit), and a writer killed mid-write never leaving a partial ckpt-*.h5.
 *
 * usage: test_checkpoint            run every check (exit 0 when all pass)
 *        test_checkpoint --child-write PATH   (internal: the process that gets killed) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"
#include "model/optim.h"
#include "base/rng.h"
#include "helpers/tmpdir_testutil.h"
#include "base/util.h"

static int g_fails = 0;

/* Sanitizer builds: HDF5 1.10 itself leaks a metadata cache entry when an object header fails
 * its checksum (the flipped-byte checks provoke exactly that); our own allocations stay
 * checked. LeakSanitizer looks this hook up by name; other builds ignore it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

static void check(int ok, const char *what, const char *detail) {
    printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail && detail[0] ? " -- " : "", detail ? detail : "");
    fflush(stdout);
    if (!ok) g_fails++;
}

/* Every part of the state set to something a fresh model does not have. */
static void randomize(Model *m, Optimizer *o, TrainState *ts, uint64_t seed) {
    Rng r;
    rng_init(&r, seed, 1, 2);
    for (size_t i = 0; i < m->num_params; i++) m->params[i] = rng_normal(&r);
    for (size_t i = 0; i < m->num_buffers; i++) m->buffers[i] = 0.5f + rng_uniform(&r);
    /* by the layer each counter names: the first BN, then per block bn1, bn2 (beyond 32
     * bits) and the shortcut's */
    int blk = -1;
    for (int k = 0; k < m->n_bn; k++) {
        const char *name = m->bn_info[k].name;
        if (k == 0) m->bn_tracked[k] = 1000 + (int64_t)rng_below(&r, 1000);
        else if (strstr(name, ".bn1.")) {
            blk++;
            m->bn_tracked[k] = (int64_t)rng_below(&r, 100000);
        }
        else if (strstr(name, ".bn2.")) m->bn_tracked[k] = ((int64_t)1 << 40) + blk;
        else m->bn_tracked[k] = 7 + blk;
    }
    if (o) {
        for (size_t i = 0; i < o->n; i++) o->state[0][i] = rng_normal(&r);
        o->steps = 12345;
    }
    if (ts) {
        memset(ts, 0, sizeof *ts);
        ts->epoch = 3; ts->step_in_epoch = 17; ts->global_step = 3 * 100 + 17;
        ts->world_size = 4; ts->seed = 0x123456789ULL;
        ts->has_amp = 1; ts->amp[AMP_LOSS_SCALE] = 65536.0; ts->amp[AMP_GROWTH_TRACKER] = 123;
    }
    model_params_changed(m);
}

static int same_bn_counts(const Model *a, const Model *b) {
    return a->n_bn == b->n_bn && memcmp(a->bn_tracked, b->bn_tracked, (size_t)a->n_bn * sizeof *a->bn_tracked) == 0;
}

static int same_model(const Model *a, const Model *b) {
    return a->num_params == b->num_params && a->num_buffers == b->num_buffers &&
           memcmp(a->params, b->params, a->num_params * sizeof(float)) == 0 &&
           memcmp(a->buffers, b->buffers, a->num_buffers * sizeof(float)) == 0 && same_bn_counts(a, b);
}

static int same_ts(const TrainState *a, const TrainState *b) {
    return a->epoch == b->epoch && a->step_in_epoch == b->step_in_epoch && a->global_step == b->global_step &&
           a->world_size == b->world_size && a->seed == b->seed && a->has_amp == b->has_amp &&
           memcmp(a->amp, b->amp, sizeof a->amp) == 0;
}

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void copy_file(const char *src, const char *dst, long nbytes) {
    FILE *in = fopenCheck(src, "rb"), *out = fopenCheck(dst, "wb");
    char buf[65536];
    long left = nbytes;
    size_t n;
    while ((left < 0 || left > 0) && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (left >= 0 && (long)n > left) n = (size_t)left;
        CHECK(fwrite(buf, 1, n, out) == n);
        if (left > 0) left -= (long)n;
    }
    fclose(in);
    CHECK(fclose(out) == 0);
}

static int same_bytes(const char *a, const char *b) {
    long na = file_size(a), nb = file_size(b);
    if (na < 0 || na != nb) return 0;
    FILE *fa = fopenCheck(a, "rb"), *fb = fopenCheck(b, "rb");
    char x[65536], y[65536];
    int same = 1;
    size_t n;
    while (same && (n = fread(x, 1, sizeof x, fa)) > 0) same = fread(y, 1, n, fb) == n && memcmp(x, y, n) == 0;
    fclose(fa); fclose(fb);
    return same;
}

static void flip_byte(const char *path, long off) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, off) == 1);
    c ^= 0x5a;
    CHECK(pwrite(fd, &c, 1, off) == 1);
    close(fd);
}

/* Sets a 16-bit size field of the root attribute `name`'s message (version 1 or 3: version,
 * flags, then the name, datatype and dataspace sizes at 2, 4 and 6; the name follows at 8, or
 * at 9 after version 3's character set). */
static void set_attr_size_field(const char *path, const char *name, int field_off, unsigned v) {
    const long n = file_size(path);
    unsigned char *b = mallocCheck((size_t)n);
    FILE *f = fopenCheck(path, "rb");
    CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    const size_t len = strlen(name) + 1;
    long at = -1;
    for (long i = 9; i + (long)len <= n && at < 0; i++)
        for (int h = 8; h <= 9 && at < 0; h++)
            if (memcmp(b + i, name, len) == 0 && b[i - h] == (h == 8 ? 1 : 3) && b[i - h + 2] == len && b[i - h + 3] == 0)
                at = i - h;
    CHECK(at >= 0);
    free(b);
    unsigned char le[2] = {(unsigned char)(v & 0xff), (unsigned char)(v >> 8)};
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, le, 2, at + field_off) == 2);
    close(fd);
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

typedef struct { int n; char path[8][CKPT_PATH_MAX]; char reason[8][1024]; } Skips;

static void on_skip(void *ctx, const char *path, const char *reason) {
    Skips *s = ctx;
    if (s->n < 8) {
        snprintf(s->path[s->n], sizeof s->path[0], "%s", path);
        snprintf(s->reason[s->n], sizeof s->reason[0], "%s", reason);
    }
    s->n++;
}

static int count_files(const char *dir, const char *prefix, const char *contains) {
    char cmd[CKPT_PATH_MAX + 64];
    snprintf_check(cmd, sizeof cmd, "ls -1 '%s'", dir);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, p))
        if (starts_with(line, prefix) && (!contains || strstr(line, contains))) n++;
    pclose(p);
    return n;
}

/* The process the kill test starts: says "ready" on stdout, then writes one width-64 checkpoint. */
static int child_write(const char *path) {
    Model m;
    Optimizer o;
    TrainState ts;
    model_init(&m, 64, 2, 10, 32, 1);
    sgd_init(&o, m.num_params, 0.9f, 1e-4f);
    randomize(&m, &o, &ts, 99);
    char err[1024];
    CHECK(write(1, "r", 1) == 1);
    int rc = checkpoint_save(path, &m, &o, &ts, "{}", err, sizeof err);
    optim_free(&o);
    model_free(&m);
    return rc == 0 ? 0 : 1;
}

/* ---- hostile files: a saved checkpoint edited through HDF5, as a tool or a person could ---- */

static void set_i64(const char *path, const char *name, int64_t v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0);
    H5Dclose(d);
    H5Fclose(f);
}

/* Dataset `name` replaced by a scalar integer `width` bytes wide. */
static void set_wide_int(const char *path, const char *name, size_t width) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0 && H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_STD_I64LE);
    CHECK(t >= 0 && H5Tset_size(t, width) >= 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    unsigned char *buf = callocCheck(width, 1);
    CHECK(d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Dclose(d); H5Sclose(sp); H5Tclose(t); H5Fclose(f);
}

/* /config replaced by a 1-D dataset of `n` fixed-length strings of 16 bytes. */
static void set_config_array(const char *path, int n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0 && H5Ldelete(f, "/config", H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 16);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "/config", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    char *buf = callocCheck((size_t)n, 16);
    for (int i = 0; i < n; i++) memset(buf + 16 * i, 'a' + i % 26, 16);
    CHECK(d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    free(buf);
    H5Dclose(d); H5Sclose(sp); H5Tclose(t);
    H5Fclose(f);
}

/* /config replaced by a variable-length string (what h5py writes for a str). */
static void set_config_vlen(const char *path) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0 && H5Ldelete(f, "/config", H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, "/config", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *v = "{}";
    CHECK(d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0);
    H5Dclose(d); H5Sclose(sp); H5Tclose(t);
    H5Fclose(f);
}

/* The objects of group `src` copied into group `dst`, groups made anew (so in `dst`'s file
 * format), datasets copied whole. */
static void copy_tree(hid_t src, hid_t dst) {
    H5G_info_t gi;
    CHECK(H5Gget_info(src, &gi) >= 0);
    for (hsize_t i = 0; i < gi.nlinks; i++) {
        char name[256];
        CHECK(H5Lget_name_by_idx(src, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) > 0);
        hid_t o = H5Oopen(src, name, H5P_DEFAULT);
        CHECK(o >= 0);
        if (H5Iget_type(o) == H5I_GROUP) {
            hid_t g = H5Gcreate2(dst, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            CHECK(g >= 0);
            copy_tree(o, g);
            H5Gclose(g);
        } else {
            CHECK(H5Ocopy(src, name, dst, name, H5P_DEFAULT, H5P_DEFAULT) >= 0);
        }
        H5Oclose(o);
    }
}

static herr_t copy_attr(hid_t loc, const char *name, const H5A_info_t *info, void *dst) {
    (void)info;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    void *buf = callocCheck(H5Aget_storage_size(a) + 1, 1);
    CHECK(a >= 0 && H5Aread(a, t, buf) >= 0);
    hid_t b = H5Acreate2(*(hid_t *)dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(b >= 0 && H5Awrite(b, t, buf) >= 0);
    free(buf);
    H5Aclose(b); H5Sclose(sp); H5Tclose(t); H5Aclose(a);
    return 0;
}

/* Checkpoint `src` rewritten to `dst` with old-style groups (a symbol table message: a v1
 * B-tree of symbol table nodes, names in a local heap), as h5py and HDF5's defaults write
 * groups (ddptrain's own checkpoints hold link messages instead), with lengths of
 * `sizeof_len` bytes in the file's metadata (HDF5's default: 8). */
static void rewrite_old_style(const char *src, const char *dst, size_t sizeof_len) {
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    CHECK(fcpl >= 0 && H5Pset_sizes(fcpl, 8, sizeof_len) >= 0);
    hid_t s = H5Fopen(src, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Fcreate(dst, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    CHECK(s >= 0 && d >= 0);
    copy_tree(s, d);
    CHECK(H5Aiterate2(s, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attr, &d) >= 0);
    H5Fclose(s);
    H5Fclose(d);
}

static haddr_t header_addr(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    haddr_t addr;
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t oi;
    CHECK(H5Oget_info_by_name3(f, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
    memcpy(&addr, &oi.token, sizeof addr);   /* the native format's token is the address */
#else
    H5O_info_t oi;
    CHECK(H5Oget_info_by_name2(f, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
    addr = oi.addr;
#endif
    H5Fclose(f);
    return addr;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The address of the v1 B-tree of old-style group `name` (8-byte addresses and lengths, as
 * HDF5's defaults write): from the symbol table message (type 0x0011) in the first chunk of
 * its version 1 object header (16 bytes of prefix, then messages of an 8-byte header). */
static uint64_t group_btree(const char *path, const char *name) {
    const haddr_t at = header_addr(path, name);
    unsigned char h[512];
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && pread(fd, h, sizeof h, (off_t)at) == (ssize_t)sizeof h && h[0] == 1);
    close(fd);
    size_t len = h[8] | (size_t)h[9] << 8, pos = 16;
    while (pos + 8 <= 16 + len && pos + 8 <= sizeof h) {
        const unsigned type = h[pos] | (unsigned)h[pos + 1] << 8, size = h[pos + 2] | (unsigned)h[pos + 3] << 8;
        if (type == 0x0011 && pos + 16 <= sizeof h) return le64(h + pos + 8);
        pos += 8 + size;
    }
    CHECK(!"a symbol table message");
    return 0;
}

/* `n` bytes at `off` set to `v`, little-endian. */
static void set_le_at(const char *path, uint64_t off, uint64_t v, int n) {
    unsigned char b[8];
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0 && pwrite(fd, b, (size_t)n, (off_t)off) == n);
    close(fd);
}

static uint64_t get_u64_at(const char *path, uint64_t off) {
    unsigned char b[8];
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && pread(fd, b, 8, (off_t)off) == 8);
    close(fd);
    return le64(b);
}

/* One byte of the data (not the header) of dataset `name` inverted: only a full read sees it. */
static void damage_data(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0, off[4];
    unsigned mask;
    hid_t sp = H5Dget_space(d);
    CHECK(d >= 0 && H5Dget_chunk_info(d, sp, 0, off, &mask, &addr, &size) >= 0 && size > 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    flip_byte(path, (long)(addr + size / 2));
}

int main(int argc, char **argv) {
    g_progname = "test_checkpoint";
    if (argc == 3 && strcmp(argv[1], "--child-write") == 0) return child_write(argv[2]);

    char dir[256], path[CKPT_PATH_MAX], p2[CKPT_PATH_MAX], err[1024], msg[2048];
    test_tmpdir(dir, sizeof dir, "ckpt_test");

    Model m, m2;
    Optimizer o, o2;
    TrainState ts, ts2;
    model_init(&m, 8, 1, 10, 16, 2);
    model_init(&m2, 8, 1, 10, 16, 2);
    sgd_init(&o, m.num_params, 0.9f, 1e-4f);
    sgd_init(&o2, m2.num_params, 0.9f, 1e-4f);
    randomize(&m, &o, &ts, 1);
    const char *cfg = "{\"width\": 8, \"blocks\": 1, \"lr\": 0.01}";

    /* 1. round trip */
    checkpoint_path(path, sizeof path, dir, 10);
    int rc = checkpoint_save(path, &m, &o, &ts, cfg, err, sizeof err);
    check(rc == 0, "save width 8", rc ? err : path);
    memset(&ts2, 0, sizeof ts2);
    rc = checkpoint_load(path, &m2, &o2, &ts2, err, sizeof err);
    check(rc == 0, "load", rc ? err : NULL);
    check(same_model(&m, &m2), "round trip: parameters, BN running statistics and num_batches_tracked bit-exact", NULL);
    check(memcmp(o.state[0], o2.state[0], o.n * sizeof(float)) == 0 && o.steps == o2.steps,
          "round trip: momentum buffer bit-exact and SGD step count", NULL);
    check(same_ts(&ts, &ts2), "round trip: train state (epoch, step_in_epoch, global_step, world_size, seed, amp)", NULL);
    char *cj = checkpoint_read_config(path, err, sizeof err);
    check(cj && strcmp(cj, cfg) == 0, "round trip: configuration JSON", cj ? cj : err);
    free(cj);
    {   /* without AMP state and without an optimizer: zero momentum, steps 0 */
        TrainState t0 = ts;
        t0.has_amp = 0;
        memset(t0.amp, 0, sizeof t0.amp);
        snprintf_check(p2, sizeof p2, "%s/noopt.h5", dir);
        rc = checkpoint_save(p2, &m, NULL, &t0, NULL, err, sizeof err);
        rc = rc ? rc : checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
        int zero = 1;
        for (size_t i = 0; i < o2.n; i++) zero &= o2.state[0][i] == 0.0f;
        check(rc == 0 && zero && o2.steps == 0 && same_ts(&t0, &ts2), "save without optimizer or AMP state loads as fresh SGD, has_amp 0", rc ? err : NULL);
    }

    /* 2. deterministic bytes: the same state saved twice gives the same file */
    snprintf_check(p2, sizeof p2, "%s/again.h5", dir);
    rc = checkpoint_save(p2, &m, &o, &ts, cfg, err, sizeof err);
    check(rc == 0 && same_bytes(path, p2), "same state saved twice: identical bytes", rc ? err : NULL);

    /* 3. wrong width (and blocks) refused, model untouched */
    {
        Model w16;
        Optimizer ow16;
        model_init(&w16, 16, 1, 10, 16, 2);
        sgd_init(&ow16, w16.num_params, 0.9f, 1e-4f);
        randomize(&w16, &ow16, NULL, 5);
        Model keep;
        model_init(&keep, 16, 1, 10, 16, 2);
        memcpy(keep.params, w16.params, w16.num_params * sizeof(float));
        memcpy(keep.buffers, w16.buffers, w16.num_buffers * sizeof(float));
        float *mom = mallocCheck(ow16.n * sizeof(float));
        memcpy(mom, ow16.state[0], ow16.n * sizeof(float));
        TrainState tk = {.epoch = 77}, tcopy = tk;
        int64_t keep_nbt = w16.bn_tracked[0];
        err[0] = '\0';
        rc = checkpoint_load(path, &w16, &ow16, &tk, err, sizeof err);
        snprintf_check(msg, sizeof msg, "%s: checkpoint is MiniResNet width 8 but this run is width 16", path);
        check(rc != 0 && strcmp(err, msg) == 0, "width 8 checkpoint into a width 16 model refused", err);
        check(w16.bn_tracked[0] == keep_nbt && memcmp(keep.params, w16.params, w16.num_params * sizeof(float)) == 0 &&
              memcmp(keep.buffers, w16.buffers, w16.num_buffers * sizeof(float)) == 0 &&
              memcmp(mom, ow16.state[0], ow16.n * sizeof(float)) == 0 && same_ts(&tk, &tcopy),
              "refused load left model, optimizer and train state unchanged", NULL);
        free(mom);
        model_free(&keep);
        optim_free(&ow16);
        model_free(&w16);

        Model b2;
        model_init(&b2, 8, 2, 10, 16, 1);
        rc = checkpoint_load(path, &b2, NULL, NULL, err, sizeof err);
        check(rc != 0 && strstr(err, "blocks 1 but this run is blocks 2") && starts_with(err, path), "blocks 1 checkpoint into a blocks 2 model refused", err);
        model_free(&b2);
        Model c100;
        model_init(&c100, 8, 1, 100, 16, 1);
        rc = checkpoint_load(path, &c100, NULL, NULL, err, sizeof err);
        check(rc != 0 && strstr(err, "num_classes 10 but this run is num_classes 100"), "10-class checkpoint into a 100-class model refused", err);
        model_free(&c100);
    }

    /* 4. damaged and foreign files refused with one line naming the file; model untouched */
    randomize(&m2, &o2, &ts2, 3);
    Model snap;
    model_init(&snap, 8, 1, 10, 16, 1);
    memcpy(snap.params, m2.params, m2.num_params * sizeof(float));
    memcpy(snap.buffers, m2.buffers, m2.num_buffers * sizeof(float));
    snap.bn_tracked[0] = m2.bn_tracked[0];
    long size = file_size(path);
    struct { const char *label; long cut; } cuts[] = {{"cut in half", size / 2}, {"last byte missing", size - 1}, {"only 100 bytes", 100}, {"empty", 0}};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf_check(p2, sizeof p2, "%s/trunc.h5", dir);
        copy_file(path, p2, cuts[i].cut);
        err[0] = '\0';
        rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
        snprintf_check(msg, sizeof msg, "truncated file (%s, %ld of %ld bytes) refused", cuts[i].label, cuts[i].cut, size);
        check(rc != 0 && starts_with(err, p2) && !strchr(err, '\n'), msg, err);
    }
    snprintf_check(p2, sizeof p2, "%s/garbage.h5", dir);
    {
        FILE *f = fopenCheck(p2, "wb");
        Rng r;
        rng_init(&r, 4, 4, 4);
        for (int i = 0; i < 100000; i++) fputc((int)rng_below(&r, 256), f);
        fclose(f);
    }
    rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
    check(rc != 0 && starts_with(err, p2) && strstr(err, "not an HDF5 file"), "garbage file refused", err);
    snprintf_check(p2, sizeof p2, "%s/missing.h5", dir);
    rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
    check(rc != 0 && starts_with(err, p2) && strstr(err, "No such file"), "missing file refused", err);
    /* One flipped byte anywhere - tensor data or HDF5 metadata - is caught by a checksum, or
     * landed in an unused byte and the load gives exactly the saved state: never wrong values. */
    snprintf_check(p2, sizeof p2, "%s/flipped.h5", dir);
    int caught = 0, harmless = 0, tries = 0;
    char first[1024] = "";
    Model fm;
    Optimizer fo;
    TrainState fts;
    model_init(&fm, 8, 1, 10, 16, 1);
    sgd_init(&fo, fm.num_params, 0.9f, 1e-4f);
    for (long off = 0; off < size; off += size / 401 + 1, tries++) {
        copy_file(path, p2, -1);
        flip_byte(p2, off);
        err[0] = '\0';
        if (checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err) != 0) {
            caught += starts_with(err, p2);
            if (off > size / 2 && !first[0]) snprintf(first, sizeof first, "%s", err);
        } else if (checkpoint_load(p2, &fm, &fo, &fts, err, sizeof err) == 0 && same_model(&fm, &m) &&
                   memcmp(fo.state[0], o.state[0], o.n * sizeof(float)) == 0 && fo.steps == o.steps && same_ts(&fts, &ts)) {
            harmless++;
            randomize(&m2, &o2, &ts2, 3);   /* the load replaced it; restore for the check below */
        } else {
            printf("  flipped byte at offset %ld of %ld loaded WRONG values\n", off, size);
        }
    }
    optim_free(&fo);
    model_free(&fm);
    snprintf_check(msg, sizeof msg, "%d positions: %d refused, %d in unused bytes (loads the saved state exactly); e.g. %s",
                   tries, caught, harmless, first);
    check(caught + harmless == tries && caught > tries * 9 / 10, "one flipped byte anywhere: refused, never wrong values", msg);
    check(memcmp(snap.params, m2.params, m2.num_params * sizeof(float)) == 0 &&
          memcmp(snap.buffers, m2.buffers, m2.num_buffers * sizeof(float)) == 0 &&
          snap.bn_tracked[0] == m2.bn_tracked[0],
          "model unchanged after every refused load", NULL);
    model_free(&snap);

    /* 5. find_latest falls back past a corrupt newest checkpoint */
    char cdir[300];
    snprintf_check(cdir, sizeof cdir, "%s/checkpoints", dir);
    CHECK(mkdir_p(cdir) == 0);
    Skips sk = {0};
    char found[CKPT_PATH_MAX];
    rc = checkpoint_find_latest(cdir, &m, found, sizeof found, on_skip, &sk, err, sizeof err);
    check(rc == 1 && sk.n == 0, "find_latest in an empty directory: none", err);
    char p10[CKPT_PATH_MAX], p20[CKPT_PATH_MAX], p30[CKPT_PATH_MAX];
    checkpoint_path(p10, sizeof p10, cdir, 10);
    checkpoint_path(p20, sizeof p20, cdir, 20);
    checkpoint_path(p30, sizeof p30, cdir, 30);
    for (int s = 10; s <= 30; s += 10) {
        ts.global_step = s;
        checkpoint_path(p2, sizeof p2, cdir, s);
        CHECK(checkpoint_save(p2, &m, &o, &ts, cfg, err, sizeof err) == 0);
        CHECK(checkpoint_set_latest(cdir, p2, err, sizeof err) == 0);
    }
    rc = checkpoint_find_latest(cdir, &m, found, sizeof found, on_skip, &sk, err, sizeof err);
    check(rc == 0 && strcmp(found, p30) == 0 && sk.n == 0, "find_latest: the newest, named by latest", found);
    snprintf_check(p2, sizeof p2, "%s/x", dir);
    copy_file(p30, p2, file_size(p30) / 2);
    CHECK(rename(p2, p30) == 0);
    sk.n = 0;
    rc = checkpoint_find_latest(cdir, &m, found, sizeof found, on_skip, &sk, err, sizeof err);
    snprintf_check(msg, sizeof msg, "found %s; skipped %d: %s", rc == 0 ? found : err, sk.n, sk.n ? sk.reason[0] : "");
    check(rc == 0 && strcmp(found, p20) == 0 && sk.n == 1 && strcmp(sk.path[0], p30) == 0,
          "find_latest falls back to the previous checkpoint past a truncated newest one", msg);
    /* latest naming an older checkpoint wins over newer files (the run resumed from it) */
    CHECK(checkpoint_set_latest(cdir, p10, err, sizeof err) == 0);
    sk.n = 0;
    rc = checkpoint_find_latest(cdir, &m, found, sizeof found, on_skip, &sk, err, sizeof err);
    check(rc == 0 && strcmp(found, p10) == 0 && sk.n == 0, "find_latest honours the latest pointer", found);
    /* a checkpoint of another width is passed over too */
    {
        Model w16;
        model_init(&w16, 16, 1, 10, 16, 1);
        sk.n = 0;
        rc = checkpoint_find_latest(cdir, &w16, found, sizeof found, on_skip, &sk, err, sizeof err);
        check(rc == -1 && sk.n == 3 && strstr(err, "none of the 3"), "find_latest with no compatible checkpoint: error", err);
        model_free(&w16);
    }
    CHECK(checkpoint_set_latest(cdir, p30, err, sizeof err) == 0);

    /* 6. prune keeps the newest K valid checkpoints */
    for (int s = 40; s <= 60; s += 10) {
        checkpoint_path(p2, sizeof p2, cdir, s);
        CHECK(checkpoint_save(p2, &m, &o, &ts, cfg, err, sizeof err) == 0);
    }
    checkpoint_path(p2, sizeof p2, cdir, 70);
    copy_file(p10, p2, 200);                                /* a broken newest file */
    snprintf_check(p2, sizeof p2, "%s/ckpt-000000080.h5.tmp.99999", cdir);
    copy_file(p10, p2, 300);                                /* a dead writer's leftover */
    CHECK(checkpoint_set_latest(cdir, p20, err, sizeof err) == 0);
    rc = checkpoint_prune(cdir, 2, err, sizeof err);
    int k50, k60, k20, n_ckpt = count_files(cdir, "ckpt-", NULL), n_tmp = count_files(cdir, "ckpt-", ".tmp.");
    checkpoint_path(p2, sizeof p2, cdir, 50); k50 = exists(p2);
    checkpoint_path(p2, sizeof p2, cdir, 60); k60 = exists(p2);
    k20 = exists(p20);
    snprintf_check(msg, sizeof msg, "removed %d, left %d ckpt files", rc, n_ckpt);
    check(rc == 5 && k50 && k60 && k20 && n_ckpt == 3 && n_tmp == 0,
          "prune keep 2: newest 2 valid (50, 60) + the one latest names (20); broken 70, older ones and stale tmp removed", msg);

    /* 7. background writer: same bytes as a synchronous save; snapshot taken at submit */
    {
        char wdir[300], wpath[CKPT_PATH_MAX], spath[CKPT_PATH_MAX];
        snprintf_check(wdir, sizeof wdir, "%s/wdir", dir);
        CHECK(mkdir_p(wdir) == 0);
        ts.global_step = 100;
        checkpoint_path(wpath, sizeof wpath, wdir, 100);
        snprintf_check(spath, sizeof spath, "%s/sync.h5", dir);
        CHECK(checkpoint_save(spath, &m, &o, &ts, cfg, err, sizeof err) == 0);
        float *saved = mallocCheck(m.num_params * sizeof(float));
        memcpy(saved, m.params, m.num_params * sizeof(float));
        CheckpointWriter w;
        checkpoint_writer_init(&w, 2);
        rc = checkpoint_writer_submit(&w, wpath, &m, &o, &ts, cfg, err, sizeof err);
        /* training goes on: the parameters change while the file is written */
        for (size_t i = 0; i < m.num_params; i++) m.params[i] += 1.0f;
        /* and another thread reads HDF5 meanwhile (serialised by hdf5_lock) */
        int verifies = 0;
        for (int i = 0; i < 3; i++) verifies += checkpoint_verify(spath, &m2, err, sizeof err) == 0;
        rc = rc ? rc : checkpoint_writer_wait(&w, err, sizeof err);
        check(rc == 0 && verifies == 3, "background write completes while the caller reads HDF5", rc ? err : NULL);
        int same = same_bytes(spath, wpath);
        if (!same) {   /* keep it for a look */
            snprintf_check(p2, sizeof p2, "%s/background.h5", dir);
            copy_file(wpath, p2, -1);
        }
        check(same, "background write: same bytes as a synchronous save of the submitted state", same ? NULL : p2);
        char latest[CKPT_PATH_MAX + 16], line[256] = "";
        snprintf_check(latest, sizeof latest, "%s/latest", wdir);
        FILE *f = fopen(latest, "r");
        if (f) { if (!fgets(line, sizeof line, f)) line[0] = '\0'; fclose(f); }
        check(strcmp(line, "ckpt-000000100.h5\n") == 0, "background write: latest points at it", NULL);
        memcpy(m.params, saved, m.num_params * sizeof(float));
        /* four more: the writer's prune keeps 2 */
        for (int s = 200; s <= 500; s += 100) {
            ts.global_step = s;
            checkpoint_path(wpath, sizeof wpath, wdir, s);
            rc = checkpoint_writer_submit(&w, wpath, &m, &o, &ts, cfg, err, sizeof err);
            CHECK(rc == 0);
        }
        rc = checkpoint_writer_wait(&w, err, sizeof err);
        check(rc == 0 && count_files(wdir, "ckpt-", NULL) == 2, "background writer prunes to keep=2", rc ? err : NULL);
        /* a failing write reports one line through wait */
        snprintf_check(wpath, sizeof wpath, "%s/no/such/dir/ckpt-000000600.h5", dir);
        checkpoint_writer_submit(&w, wpath, &m, &o, &ts, cfg, err, sizeof err);
        rc = checkpoint_writer_wait(&w, err, sizeof err);
        check(rc != 0 && starts_with(err, wpath) && strstr(err, "No such file or directory"), "failed background write reported", err);
        checkpoint_writer_free(&w);
        free(saved);
    }

    /* 8. timing at width 64 (2.8M parameters): stall at submit vs the whole write */
    {
        Model big;
        Optimizer ob;
        TrainState tb;
        model_init(&big, 64, 2, 10, 32, 1);
        sgd_init(&ob, big.num_params, 0.9f, 1e-4f);
        randomize(&big, &ob, &tb, 7);
        char bdir[300], bpath[CKPT_PATH_MAX];
        snprintf_check(bdir, sizeof bdir, "%s/big", dir);
        CHECK(mkdir_p(bdir) == 0);
        checkpoint_path(bpath, sizeof bpath, bdir, 1);
        double t0 = now_sec();
        rc = checkpoint_save(bpath, &big, &ob, &tb, cfg, err, sizeof err);
        double t_sync = now_sec() - t0;
        CheckpointWriter w;
        checkpoint_writer_init(&w, 2);
        double best_submit = 1e9, worst_submit = 0, write_s = 0;
        for (int s = 2; s <= 4 && rc == 0; s++) {
            checkpoint_path(bpath, sizeof bpath, bdir, s);
            rc = checkpoint_writer_submit(&w, bpath, &big, &ob, &tb, cfg, err, sizeof err);
            if (w.last_submit_sec < best_submit) best_submit = w.last_submit_sec;
            if (w.last_submit_sec > worst_submit) worst_submit = w.last_submit_sec;
            rc = rc ? rc : checkpoint_writer_wait(&w, err, sizeof err);
            write_s = w.last_write_sec;
        }
        snprintf_check(msg, sizeof msg, "%zu params, %.1f MB file: synchronous save %.1f ms; submit (stall) %.1f-%.1f ms; background write %.1f ms",
                       big.num_params, file_size(bpath) / 1e6, 1e3 * t_sync, 1e3 * best_submit, 1e3 * worst_submit, 1e3 * write_s);
        check(rc == 0 && 2 * best_submit < t_sync, "width 64: submit is much cheaper than the write", msg);
        checkpoint_writer_free(&w);
        optim_free(&ob);
        model_free(&big);
    }

    /* 9. a writer killed mid-write leaves no partial ckpt-*.h5; the previous one still loads */
    {
        char kdir[300], prev[CKPT_PATH_MAX], next[CKPT_PATH_MAX];
        snprintf_check(kdir, sizeof kdir, "%s/killed", dir);
        CHECK(mkdir_p(kdir) == 0);
        checkpoint_path(prev, sizeof prev, kdir, 40);
        checkpoint_path(next, sizeof next, kdir, 50);
        CHECK(checkpoint_save(prev, &m, &o, &ts, cfg, err, sizeof err) == 0);
        CHECK(checkpoint_set_latest(kdir, prev, err, sizeof err) == 0);
        Model big;
        model_init(&big, 64, 2, 10, 32, 1);
        int midway = 0, partial = 0, finished = 0, prev_ok = 1, trials = 0;
        for (int delay_us = 0; delay_us <= 256000; delay_us = delay_us ? delay_us * 2 : 500, trials++) {
            unlink(next);
            int pfd[2];
            CHECK(pipe(pfd) == 0);
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                dup2(pfd[1], 1);
                close(pfd[0]);
                execl("/proc/self/exe", argv[0], "--child-write", next, (char *)NULL);
                _exit(127);
            }
            close(pfd[1]);
            char c;
            CHECK(read(pfd[0], &c, 1) == 1);
            close(pfd[0]);
            struct timespec d = {0, (long)delay_us * 1000L};
            nanosleep(&d, NULL);
            kill(pid, SIGKILL);
            int st;
            CHECK(waitpid(pid, &st, 0) == pid);
            char tmp[CKPT_PATH_MAX + 32];
            snprintf_check(tmp, sizeof tmp, "%s.tmp.%d.0", next, (int)pid);
            if (exists(tmp)) midway++;
            if (exists(next)) {
                if (checkpoint_verify(next, &big, err, sizeof err) == 0) finished++;
                else partial++;
            }
            prev_ok &= checkpoint_verify(prev, &m, err, sizeof err) == 0;
        }
        snprintf_check(msg, sizeof msg, "%d kills: %d mid-write (tmp file left), %d after completion, %d partial", trials, midway, finished, partial);
        check(midway > 0 && partial == 0 && prev_ok, "killed writer: never a partial ckpt-*.h5, previous checkpoint still loads", msg);
        unlink(next);
        Skips ks = {0};
        rc = checkpoint_find_latest(kdir, &m, found, sizeof found, on_skip, &ks, err, sizeof err);
        check(rc == 0 && strcmp(found, prev) == 0, "after the kills find_latest returns the previous checkpoint", rc ? err : found);
        rc = checkpoint_prune(kdir, 3, err, sizeof err);
        check(rc == midway && count_files(kdir, "ckpt-", ".tmp.") == 0, "prune removes the killed writers' temporary files", NULL);
        model_free(&big);
    }

    /* 9. hostile files */
    {
        char hdir[300], hp[CKPT_PATH_MAX], victim[CKPT_PATH_MAX], link[CKPT_PATH_MAX + 64];
        snprintf_check(hdir, sizeof hdir, "%s/hostile", dir);
        CHECK(mkdir_p(hdir) == 0);
        ts.global_step = 5;
        ts.step_in_epoch = 1;
        checkpoint_path(hp, sizeof hp, hdir, 5);
        CHECK(checkpoint_save(hp, &m, &o, &ts, cfg, err, sizeof err) == 0);
        /* a 1-D /config of 4 strings was read into a one-string buffer */
        snprintf_check(p2, sizeof p2, "%s/config4.h5", hdir);
        copy_file(hp, p2, file_size(hp));
        set_config_array(p2, 4);
        cj = checkpoint_read_config(p2, err, sizeof err);
        check(!cj && strstr(err, "/config is not a single string"), "a 1-D /config of 4 strings: refused", cj ? cj : err);
        free(cj);
        /* variable-length strings are read through HDF5's global heap, where a damaged file
         * crashed or hung HDF5 1.10: refused unread */
        copy_file(hp, p2, file_size(hp));
        set_config_vlen(p2);
        cj = checkpoint_read_config(p2, err, sizeof err);
        check(!cj && strstr(err, "variable-length"), "a variable-length /config: refused unread", cj ? cj : err);
        free(cj);
        /* Attribute sizes that run past their message: HDF5 1.10's H5Aexists read past a heap
         * buffer (fuzz_checkpoint, under ASan; one such file crashed the reader). Refused
         * before HDF5 decodes them (h5check.h). */
        const struct { int off; unsigned v; const char *want; } fields[] = {
            {6, 0x2000, "a dataspace of 8192 bytes overruns its message"},
            {4, 0x2000, "a datatype of 8192 bytes overruns its message"},
            {2, 0x4000, "an attribute name of 16384 bytes"}};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            copy_file(hp, p2, file_size(hp));
            set_attr_size_field(p2, "format", fields[i].off, fields[i].v);
            memset(&ts2, 0, sizeof ts2);
            rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
            snprintf_check(msg, sizeof msg, "size field at %d = %u: %s", fields[i].off, fields[i].v, rc ? err : "loaded");
            check(rc != 0 && starts_with(err, p2) && strstr(err, fields[i].want), "an attribute overrunning its message: refused before HDF5 reads it", msg);
        }
        /* Old-style groups (what h5py writes), with 8- and 4-byte lengths: the root group's
         * header is found after a link name offset of the length's size (once looked for at
         * the address's size, and the file refused). */
        char p3[CKPT_PATH_MAX + 16];
        snprintf_check(p3, sizeof p3, "%s/old_style.h5", hdir);
        for (size_t len = 4; len <= 8; len += 4) {
            rewrite_old_style(hp, p3, len);
            memset(&ts2, 0, sizeof ts2);
            rc = checkpoint_load(p3, &m2, &o2, &ts2, err, sizeof err);
            snprintf_check(msg, sizeof msg, "lengths of %zu bytes: %s", len, rc ? err : "loaded");
            check(rc == 0 && same_model(&m, &m2) && same_ts(&ts, &ts2), "a checkpoint rewritten with old-style groups loads", msg);
        }
        /* Their B-trees and symbol table nodes (the fuzz seeds' too): HDF5 1.10 follows the
         * addresses there unchecked, and a B-tree child at the undefined address crashed
         * H5Gget_info (fuzz_checkpoint). Refused before HDF5 opens the file. */
        const uint64_t tree = group_btree(p3, "/train_state"), snod = get_u64_at(p3, tree + 32);
        const struct { uint64_t off, v; int bytes; const char *want; } nodes[] = {
            /* the B-tree's first child: after 24 bytes of node header and the first key */
            {tree + 32, UINT64_MAX, 8, "group '/train_state': a symbol table node at an undefined address"},
            {tree + 32, (uint64_t)file_size(p3), 8, "group '/train_state': a symbol table node of 328 bytes at"},
            /* that symbol table node's count: HDF5 1.10 decodes it into an array of 2 * 4 */
            {snod + 6, 9, 2, "group '/train_state': a symbol table node of 9 entries (at most 8)"},
        };
        for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
            copy_file(p3, p2, file_size(p3));
            set_le_at(p2, nodes[i].off, nodes[i].v, nodes[i].bytes);
            memset(&ts2, 0, sizeof ts2);
            rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
            snprintf_check(msg, sizeof msg, "%d bytes at %llu = %llu: %s", nodes[i].bytes, (unsigned long long)nodes[i].off,
                           (unsigned long long)nodes[i].v, rc ? err : "loaded");
            check(rc != 0 && starts_with(err, p2) && strstr(err, nodes[i].want), "a damaged group B-tree or symbol table node: refused before HDF5 follows it", msg);
        }
        /* An integer wider than 8 bytes: HDF5 converts it through a buffer that wide (a fuzzed
         * 4 GB-wide one kept the loader zeroing memory for minutes) */
        copy_file(hp, p2, file_size(hp));
        set_wide_int(p2, "/train_state/epoch", 16);
        rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
        check(rc != 0 && strstr(err, "/train_state/epoch is not an integer"), "a 16-byte integer: refused unread", rc ? err : "loaded");
        /* /train_state values out of range: once loaded, then a CHECK abort (negative step) */
        const struct { const char *ds; int64_t v; } vals[] = {
            {"/train_state/global_step", -3}, {"/train_state/epoch", -1}, {"/train_state/step_in_epoch", -1},
            {"/train_state/world_size", 0}, {"/train_state/world_size", (int64_t)1 << 40},
            {"/optimizer/steps", -1}};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            copy_file(hp, p2, file_size(hp));
            set_i64(p2, vals[i].ds, vals[i].v);
            memset(&ts2, 0, sizeof ts2);
            rc = checkpoint_load(p2, &m2, &o2, &ts2, err, sizeof err);
            snprintf_check(msg, sizeof msg, "%s = %lld: %s", vals[i].ds, (long long)vals[i].v, rc ? err : "loaded");
            check(rc != 0 && strstr(err, vals[i].ds) && strstr(err, "out of range"), "a train state out of range: refused", msg);
        }
        /* a symlink planted at the temporary names is never written through */
        snprintf_check(victim, sizeof victim, "%s/victim", hdir);
        FILE *vf = fopen(victim, "w");
        CHECK(vf && fputs("precious\n", vf) >= 0 && fclose(vf) == 0);
        checkpoint_path(p2, sizeof p2, hdir, 6);
        const char *fmts[] = {"%s.tmp.%d", "%s.tmp.%d.0"};
        for (int i = 0; i < 2; i++) {
            snprintf_check(link, sizeof link, fmts[i], p2, (int)getpid());
            CHECK(symlink(victim, link) == 0);
            char latest_tmp[CKPT_PATH_MAX + 64], lp[CKPT_PATH_MAX];
            snprintf_check(lp, sizeof lp, "%s/latest", hdir);
            snprintf_check(latest_tmp, sizeof latest_tmp, fmts[i], lp, (int)getpid());
            CHECK(symlink(victim, latest_tmp) == 0);
        }
        ts.global_step = 6;
        rc = checkpoint_save(p2, &m, &o, &ts, cfg, err, sizeof err);
        int rc2 = checkpoint_set_latest(hdir, p2, err, sizeof err);
        char vbuf[64] = "";
        vf = fopen(victim, "r");
        CHECK(vf && fgets(vbuf, sizeof vbuf, vf));
        fclose(vf);
        check(rc == 0 && rc2 == 0 && strcmp(vbuf, "precious\n") == 0 && checkpoint_verify(p2, &m, err, sizeof err) == 0,
              "symlinks planted at the checkpoint's and latest's temporary names: not followed", vbuf);
        /* prune: a newest file with damaged data does not count as kept */
        char p7[CKPT_PATH_MAX];
        checkpoint_path(p7, sizeof p7, hdir, 7);
        ts.global_step = 7;
        CHECK(checkpoint_save(p7, &m, &o, &ts, cfg, err, sizeof err) == 0);
        damage_data(p7, "/model/fc.weight");
        CHECK(checkpoint_set_latest(hdir, p7, err, sizeof err) == 0);   /* as the writer does */
        rc2 = checkpoint_verify(p7, &m, err, sizeof err);
        rc = checkpoint_prune(hdir, 1, err, sizeof err);
        snprintf_check(msg, sizeof msg, "removed %d; 6 %s, 7 %s", rc, exists(p2) ? "kept" : "removed", exists(p7) ? "kept" : "removed");
        check(rc2 != 0 && exists(p2) && checkpoint_verify(p2, &m, err, sizeof err) == 0,
              "prune keep 1 with damaged data in the newest: the last good checkpoint stays", msg);
        ts.step_in_epoch = 0;
    }

    optim_free(&o); optim_free(&o2);
    model_free(&m); model_free(&m2);
    if (g_fails == 0) {
        test_rm_tree(dir);
        printf("all checks passed\n");
        return 0;
    }
    printf("%d check(s) failed (files kept in %s)\n", g_fails, dir);
    return 1;
}
