/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint_write.c - writing a checkpoint: the layout checkpoint.h describes, under a temporary
 * name that is renamed into place only once the file is complete and on disk, and the background
 * writer, which copies the state so that the training loop waits for a memcpy, not for the disk. */
#include "checkpoint.h"
#include "checkpoint_format.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hdf5_lock.h"
#include "base/util.h"

/* ---- the state written: a view of a live model, or of the writer's copy ----------------------- */

typedef struct {
    char name[sizeof ((TensorInfo *)0)->name];   /* "<bn>.num_batches_tracked" */
    int64_t value;
} BnCount;

typedef struct {
    int width, blocks, num_classes, image_size;
    size_t num_params, num_buffers;
    const TensorInfo *pinfo, *binfo;
    int n_pinfo, n_binfo;
    const float *params, *buffers;
    const OptimKind *opt_kind;          /* the optimizer whose state /optimizer holds */
    const float *opt_state[OPTIM_MAX_STATE];   /* its state tensors; NULL: written as zeros */
    float momentum_coef, weight_decay;
    long opt_steps;
    const BnCount *bn;
    int n_bn;
    TrainState ts;
    const float *rank_buffers;          /* ts.world_size rows of num_buffers; NULL: not written */
    const CkptEma *ema;                 /* NULL, or n_averaged 0: no /ema group */
    const CkptDataset *dataset;         /* NULL, or present 0: no /dataset group */
    const char *config_json;
    const char *arch;                   /* model_architecture */
} CkptState;

static void state_from_model(CkptState *s, const Model *m, const Optimizer *opt, const TrainState *ts,
                             const char *config_json, BnCount *bn) {
    memset(s, 0, sizeof *s);
    s->arch = model_architecture(m);
    s->width = m->width; s->blocks = m->blocks; s->num_classes = m->num_classes;
    s->image_size = m->image_size;
    s->num_params = m->num_params; s->num_buffers = m->num_buffers;
    s->pinfo = m->param_info; s->n_pinfo = m->n_param_info;
    s->binfo = m->buffer_info; s->n_binfo = m->n_buffer_info;
    s->params = m->params; s->buffers = m->buffers;
    s->opt_kind = optim_kind("sgd");   /* without an optimizer: SGD's zero momentum */
    if (opt) {
        CHECK(opt->n == m->num_params);
        s->opt_kind = opt->kind;
        for (int k = 0; k < opt->kind->n_state; k++) s->opt_state[k] = opt->state[k];
        s->momentum_coef = opt->momentum;
        s->weight_decay = (float)opt->weight_decay;
        s->opt_steps = opt->steps;
    }
    s->n_bn = model_bn_count(m);
    for (int k = 0; k < s->n_bn; k++) {
        snprintf_check(bn[k].name, sizeof bn[k].name, "%s", m->bn_info[k].name);
        bn[k].value = m->bn_tracked[k];
    }
    s->bn = bn;
    if (ts) s->ts = *ts;
    s->config_json = config_json;
}

/* ---- the file --------------------------------------------------------------------------------- */

typedef struct {
    hid_t file;
    const char *path;        /* the final name, for messages */
    char *err;
    size_t errlen;
} Writer;

/* Under hdf5_lock(), right after the failing call. */
static int w_fail(Writer *w, const char *what) {
    char reason[512];
    checkpoint_hdf5_reason(reason, sizeof reason);
    return errf(w->err, w->errlen, "%s: cannot write checkpoint (%s): %s", w->path, what, reason);
}

/* Creation properties without timestamps, so identical state gives identical bytes. */
static hid_t untimed_plist(hid_t cls) {
    hid_t p = H5Pcreate(cls);
    CHECK(p >= 0);
    CHECK(H5Pset_obj_track_times(p, 0) >= 0);
    return p;
}

static int w_group(Writer *w, const char *name) {
    hdf5_lock();
    hid_t gcpl = untimed_plist(H5P_GROUP_CREATE);
    /* Links kept in the (checksummed) object header rather than a fractal heap, whose blocks
     * carry no checksum: a damaged name must not go unnoticed either. */
    CHECK(H5Pset_link_phase_change(gcpl, 65535, 65535) >= 0);
    hid_t g = H5Gcreate2(w->file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    int rc = g < 0 ? w_fail(w, name) : 0;
    if (g >= 0) H5Gclose(g);
    H5Pclose(gcpl);
    hdf5_unlock();
    return rc;
}

/* A dataset written whole: type `ftype` in the file, `mtype` in memory. Float tensors get one
 * chunk with a Fletcher-32 checksum (chunking is what the filter needs). */
static int w_dataset(Writer *w, const char *name, hid_t ftype, hid_t mtype, int ndim,
                     const hsize_t *dims, const void *data, int checksum) {
    hdf5_lock();
    hid_t sp = ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndim, dims, NULL);
    CHECK(sp >= 0);
    hid_t dcpl = untimed_plist(H5P_DATASET_CREATE);
    if (checksum) {
        CHECK(H5Pset_chunk(dcpl, ndim, dims) >= 0);
        CHECK(H5Pset_fletcher32(dcpl) >= 0);
    } else if (H5Sget_simple_extent_npoints(sp) * (hssize_t)H5Tget_size(ftype) < 16384) {
        /* Small values (step counts, the configuration) live inside the object header, which
         * the file format checksums; filters need chunks, too costly for 8 bytes. */
        CHECK(H5Pset_layout(dcpl, H5D_COMPACT) >= 0);
    }
    int rc = 0;
    hid_t ds = H5Dcreate2(w->file, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0) rc = w_fail(w, name);
    else if (H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) rc = w_fail(w, name);
    if (ds >= 0 && H5Dclose(ds) < 0 && rc == 0) rc = w_fail(w, name);
    H5Pclose(dcpl);
    H5Sclose(sp);
    hdf5_unlock();
    return rc;
}

static int w_tensor(Writer *w, const char *group, const TensorInfo *t, const float *data) {
    char name[160];
    snprintf_check(name, sizeof name, "%s/%s", group, t->name);
    hsize_t dims[4];
    for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
    float *zeros = data ? NULL : callocCheck(t->numel, sizeof(float));
    int rc = w_dataset(w, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, t->ndim, dims, data ? data : zeros, 1);
    free(zeros);
    return rc;
}

static int w_i64(Writer *w, const char *name, int64_t v) {
    return w_dataset(w, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, NULL, &v, 0);
}

static hid_t string_type(size_t len) {
    hid_t t = H5Tcopy(H5T_C_S1);
    CHECK(t >= 0);
    CHECK(H5Tset_size(t, len + 1) >= 0);     /* NUL-terminated: readers need not guess */
    CHECK(H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0);
    return t;
}

static int w_string(Writer *w, const char *name, const char *s) {
    hid_t t = string_type(strlen(s));
    int rc = w_dataset(w, name, t, t, 0, NULL, s, 0);
    H5Tclose(t);
    return rc;
}

/* An attribute on the object at `obj_name` ("/" for the root). */
static int w_attr(Writer *w, const char *obj_name, const char *name, hid_t ftype, hid_t mtype,
                  const void *data) {
    hdf5_lock();
    hid_t sp = H5Screate(H5S_SCALAR);
    CHECK(sp >= 0);
    int rc = 0;
    hid_t a = H5Acreate_by_name(w->file, obj_name, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) rc = w_fail(w, name);
    else if (H5Awrite(a, mtype, data) < 0) rc = w_fail(w, name);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    hdf5_unlock();
    return rc;
}

static int w_attr_i64(Writer *w, const char *obj, const char *name, int64_t v) {
    return w_attr(w, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

static int w_attr_f32(Writer *w, const char *obj, const char *name, float v) {
    return w_attr(w, obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &v);
}

static int w_attr_f64(Writer *w, const char *obj, const char *name, double v) {
    return w_attr(w, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

static int w_attr_str(Writer *w, const char *obj, const char *name, const char *s) {
    hid_t t = string_type(strlen(s));
    int rc = w_attr(w, obj, name, t, t, s);
    H5Tclose(t);
    return rc;
}

/* A model's state under `group` (/model, /ema): every parameter and buffer tensor, and each
 * batch norm's num_batches_tracked, from nbt, or from the state's own counters when NULL. */
static int w_state(Writer *w, const CkptState *s, const char *group, const float *params, const float *buffers,
                   const int64_t *nbt) {
    int rc = 0;
    for (int i = 0; i < s->n_pinfo && !rc; i++) rc = w_tensor(w, group, &s->pinfo[i], params + s->pinfo[i].offset);
    for (int i = 0; i < s->n_binfo && !rc; i++) rc = w_tensor(w, group, &s->binfo[i], buffers + s->binfo[i].offset);
    for (int k = 0; k < s->n_bn && !rc; k++) {
        char name[160];
        snprintf_check(name, sizeof name, "%s/%s", group, s->bn[k].name);
        rc = w_i64(w, name, nbt ? nbt[k] : s->bn[k].value);
    }
    return rc;
}

/* /dataset: the normalisation and the class names, all under Fletcher-32 as the tensors are.
 * The names as fixed-length strings, as wide as the longest: a variable-length string would
 * live in the global heap, which the reader refuses (CKPT_VLEN_REFUSED, checkpoint_read.c). */
static int w_dataset_group(Writer *w, const CkptDataset *d) {
    const hsize_t three = 3;
    int rc = w_group(w, "/dataset");
    rc = rc ? rc : w_dataset(w, "/dataset/mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, &three, d->mean, 1);
    rc = rc ? rc : w_dataset(w, "/dataset/std", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, &three, d->std, 1);
    if (rc || !d->class_names) return rc;
    size_t width = 1;
    for (int k = 0; k < d->num_classes; k++)
        if (strlen(d->class_names[k]) > width) width = strlen(d->class_names[k]);
    char *buf = callocCheck((size_t)d->num_classes, width);   /* NUL-padded */
    for (int k = 0; k < d->num_classes; k++) memcpy(buf + (size_t)k * width, d->class_names[k], strlen(d->class_names[k]));
    hid_t t = H5Tcopy(H5T_C_S1);
    CHECK(t >= 0);
    CHECK(H5Tset_size(t, width) >= 0);
    CHECK(H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0);
    CHECK(H5Tset_cset(t, H5T_CSET_UTF8) >= 0);
    const hsize_t n = (hsize_t)d->num_classes;
    rc = w_dataset(w, "/dataset/class_names", t, t, 1, &n, buf, 1);
    H5Tclose(t);
    free(buf);
    return rc;
}

/* Everything but the file's creation and closing; stops at the first failure. */
static int write_contents(Writer *w, const CkptState *s) {
    int rc = 0;
    rc = rc ? rc : w_attr_str(w, "/", "format", CKPT_FORMAT);
    rc = rc ? rc : w_attr_i64(w, "/", "format_version", CKPT_FORMAT_VERSION);
    rc = rc ? rc : w_attr_str(w, "/", "architecture", s->arch);
    rc = rc ? rc : w_attr_i64(w, "/", "width", s->width);
    rc = rc ? rc : w_attr_i64(w, "/", "blocks", s->blocks);
    rc = rc ? rc : w_attr_i64(w, "/", "num_classes", s->num_classes);
    rc = rc ? rc : w_attr_i64(w, "/", "image_size", s->image_size);
    rc = rc ? rc : w_attr_i64(w, "/", "num_params", (int64_t)s->num_params);
    rc = rc ? rc : w_string(w, "/config", s->config_json ? s->config_json : "{}");

    rc = rc ? rc : w_group(w, "/model");
    rc = rc ? rc : w_state(w, s, "/model", s->params, s->buffers, NULL);

    rc = rc ? rc : w_group(w, "/optimizer");
    rc = rc ? rc : w_attr_f32(w, "/optimizer", "momentum", s->momentum_coef);
    rc = rc ? rc : w_attr_f32(w, "/optimizer", "weight_decay", s->weight_decay);
    rc = rc ? rc : w_string(w, "/optimizer/name", s->opt_kind->name);
    rc = rc ? rc : w_i64(w, "/optimizer/steps", s->opt_steps);
    for (int k = 0; k < s->opt_kind->n_state && !rc; k++) {
        char group[64];
        snprintf_check(group, sizeof group, "/optimizer/%s", s->opt_kind->state[k]);
        const float *st = s->opt_state[k];
        rc = w_group(w, group);
        for (int i = 0; i < s->n_pinfo && !rc; i++) rc = w_tensor(w, group, &s->pinfo[i], st ? st + s->pinfo[i].offset : NULL);
    }

    rc = rc ? rc : w_group(w, "/train_state");
    rc = rc ? rc : w_i64(w, "/train_state/epoch", s->ts.epoch);
    rc = rc ? rc : w_i64(w, "/train_state/step_in_epoch", s->ts.step_in_epoch);
    rc = rc ? rc : w_i64(w, "/train_state/global_step", s->ts.global_step);
    rc = rc ? rc : w_i64(w, "/train_state/world_size", s->ts.world_size);
    rc = rc ? rc : w_i64(w, "/train_state/seed", (int64_t)s->ts.seed);
    if (s->ts.batch_size > 0) {
        rc = rc ? rc : w_i64(w, "/train_state/batch_size", s->ts.batch_size);
        rc = rc ? rc : w_i64(w, "/train_state/grad_accum_steps", s->ts.grad_accum_steps);
        rc = rc ? rc : w_i64(w, "/train_state/data_samples", s->ts.data_samples);
        rc = rc ? rc : w_i64(w, "/train_state/data_shards", s->ts.data_shards);
        rc = rc ? rc : w_i64(w, "/train_state/data_id", (int64_t)s->ts.data_id);
    }
    if (s->ts.has_data_order) {
        rc = rc ? rc : w_i64(w, "/train_state/data_chunk_images", s->ts.data_chunk_images);
        rc = rc ? rc : w_i64(w, "/train_state/data_window_chunks", s->ts.data_window_chunks);
    }
    if (s->ts.has_amp && !rc) {
        hsize_t n = AMP_STATE_N;
        rc = w_dataset(w, "/train_state/amp", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &n, s->ts.amp, 0);
    }
    if (s->rank_buffers && !rc) {
        CHECK(s->ts.world_size >= 1);
        hsize_t d[2] = {(hsize_t)s->ts.world_size, (hsize_t)s->num_buffers};
        rc = w_dataset(w, "/train_state/rank_buffers", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d, s->rank_buffers, 1);
    }
    if (s->ema && s->ema->n_averaged > 0 && !rc) {
        const CkptEma *e = s->ema;
        rc = w_group(w, "/ema");
        rc = rc ? rc : w_attr_f64(w, "/ema", "decay", e->decay);
        rc = rc ? rc : w_i64(w, "/ema/n_averaged", e->n_averaged);
        rc = rc ? rc : w_state(w, s, "/ema", e->params, e->buffers, e->nbt);
    }
    if (s->dataset && s->dataset->present && !rc) rc = w_dataset_group(w, s->dataset);
    return rc;
}

static void dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf_check(dir, len, ".");
    else if (slash == path) snprintf_check(dir, len, "/");
    else snprintf_check(dir, len, "%.*s", (int)(slash - path), path);
}


/* Temp file, contents, flush, close, fsync, rename, fsync the directory. */
static int write_file(const char *path, const CkptState *s, char *err, size_t errlen) {
    char tmp[CKPT_PATH_MAX + 32], dir[CKPT_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    Writer w = {.file = -1, .path = path, .err = err, .errlen = errlen};

    hdf5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = checkpoint_file_access_plist();
    hid_t fcpl = untimed_plist(H5P_FILE_CREATE);   /* the root group's times too */
    /* Exclusive (O_CREAT|O_EXCL): a file or symlink someone planted under the temporary name
     * is never written through; a taken name moves on to the next. */
    struct stat st;
    int rc = 0;
    for (int k = 0; k < TMP_NAME_ATTEMPTS && w.file < 0 && rc == 0; k++) {
        if (tmp_name(tmp, sizeof tmp, path, k) != 0) rc = errf(err, errlen, "%s: path too long", path);
        else if ((w.file = H5Fcreate(tmp, H5F_ACC_EXCL, fcpl, fapl)) < 0 && lstat(tmp, &st) != 0)
            rc = w_fail(&w, "creating the file");
    }
    if (rc == 0 && w.file < 0) rc = errf(err, errlen, "%s: cannot write checkpoint: %d temporary names beside it are taken", path, TMP_NAME_ATTEMPTS);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    hdf5_unlock();
    if (rc) return rc;

    rc = write_contents(&w, s);

    hdf5_lock();
    if (rc == 0 && H5Fflush(w.file, H5F_SCOPE_GLOBAL) < 0) rc = w_fail(&w, "flushing");
    if (H5Fclose(w.file) < 0 && rc == 0) rc = w_fail(&w, "closing");
    hdf5_unlock();

    /* H5Fflush only reaches the page cache; a node crash after the rename could otherwise
     * leave a file of zeros under the real name. */
    if (rc == 0 && fsync_path(tmp, O_RDONLY) != 0)
        rc = errf(err, errlen, "%s: cannot write checkpoint (fsync): %s", path, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = errf(err, errlen, "%s: cannot write checkpoint (rename from %s): %s", path, tmp, strerror(errno));
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    /* The rename itself is only durable once the directory is. */
    if (fsync_path(dir, O_RDONLY | O_DIRECTORY) != 0)
        return errf(err, errlen, "%s: cannot write checkpoint (fsync of directory %s): %s", path, dir, strerror(errno));
    return 0;
}

int checkpoint_save_ranks(const char *path, const Model *m, const Optimizer *opt, const TrainState *ts,
                          const float *rank_buffers, const char *config_json, char *err, size_t errlen) {
    CHECK(!rank_buffers || (ts && ts->world_size >= 1));
    BnCount *bn = callocCheck((size_t)model_bn_count(m), sizeof *bn);
    CkptState s;
    state_from_model(&s, m, opt, ts, config_json, bn);
    s.rank_buffers = rank_buffers;
    int rc = write_file(path, &s, err, errlen);
    free(bn);
    return rc;
}

int checkpoint_save(const char *path, const Model *m, const Optimizer *opt, const TrainState *ts,
                    const char *config_json, char *err, size_t errlen) {
    return checkpoint_save_ranks(path, m, opt, ts, NULL, config_json, err, errlen);
}

/* ---- background writer -------------------------------------------------------------------------- */

/* The writer's own copy of everything a checkpoint holds, reused between writes. */
typedef struct {
    CkptState st;
    float *params, *buffers;
    float *opt_state[OPTIM_MAX_STATE];   /* allocated as an optimizer needs them */
    float *rank_buffers;            /* every rank's running statistics, when submitted */
    size_t rank_buffers_n;          /* floats allocated there */
    CkptEma ema;                    /* copy of the moving average, when submitted */
    size_t num_params, num_buffers;
    TensorInfo *pinfo, *binfo;
    BnCount *bn;
    char *config;
} Snapshot;

static void snapshot_free(Snapshot *s) {
    free(s->params); free(s->buffers); free(s->rank_buffers);
    for (int k = 0; k < OPTIM_MAX_STATE; k++) free(s->opt_state[k]);
    free(s->ema.params); free(s->ema.buffers); free(s->ema.nbt);
    free(s->pinfo); free(s->binfo); free(s->bn); free(s->config);
    memset(s, 0, sizeof *s);
}

static void snapshot_take(Snapshot *s, const Model *m, const Optimizer *opt, const TrainState *ts, const float *rank_buffers,
                          const CkptEma *ema, const char *config_json) {
    if (s->num_params != m->num_params || s->num_buffers != m->num_buffers) {
        snapshot_free(s);
        s->num_params = m->num_params;
        s->num_buffers = m->num_buffers;
        s->params = mallocCheck(m->num_params * sizeof(float));
        s->buffers = mallocCheck(m->num_buffers * sizeof(float));
        s->pinfo = mallocCheck((size_t)m->n_param_info * sizeof *s->pinfo);
        s->binfo = mallocCheck((size_t)m->n_buffer_info * sizeof *s->binfo);
        s->bn = mallocCheck((size_t)model_bn_count(m) * sizeof *s->bn);
        s->ema.params = mallocCheck(m->num_params * sizeof(float));
        s->ema.buffers = mallocCheck(m->num_buffers * sizeof(float));
        s->ema.nbt = mallocCheck((size_t)model_bn_count(m) * sizeof(int64_t));
    }
    state_from_model(&s->st, m, opt, ts, NULL, s->bn);   /* fills s->bn from the live model */
    memcpy(s->params, m->params, m->num_params * sizeof(float));
    memcpy(s->buffers, m->buffers, m->num_buffers * sizeof(float));
    memcpy(s->pinfo, m->param_info, (size_t)m->n_param_info * sizeof *s->pinfo);
    memcpy(s->binfo, m->buffer_info, (size_t)m->n_buffer_info * sizeof *s->binfo);
    s->st.params = s->params;
    s->st.buffers = s->buffers;
    s->st.pinfo = s->pinfo;
    s->st.binfo = s->binfo;
    for (int k = 0; opt && k < opt->kind->n_state; k++) {
        if (!s->opt_state[k]) s->opt_state[k] = mallocCheck(m->num_params * sizeof(float));
        memcpy(s->opt_state[k], opt->state[k], m->num_params * sizeof(float));
        s->st.opt_state[k] = s->opt_state[k];
    }
    if (rank_buffers) {
        CHECK(ts && ts->world_size >= 1);
        const size_t n = (size_t)ts->world_size * m->num_buffers;
        if (n > s->rank_buffers_n) {
            free(s->rank_buffers);
            s->rank_buffers = mallocCheck(n * sizeof(float));
            s->rank_buffers_n = n;
        }
        memcpy(s->rank_buffers, rank_buffers, n * sizeof(float));
        s->st.rank_buffers = s->rank_buffers;
    }
    if (ema && ema->n_averaged > 0) {
        s->ema.n_averaged = ema->n_averaged;
        s->ema.decay = ema->decay;
        memcpy(s->ema.params, ema->params, m->num_params * sizeof(float));
        memcpy(s->ema.buffers, ema->buffers, m->num_buffers * sizeof(float));
        memcpy(s->ema.nbt, ema->nbt, (size_t)model_bn_count(m) * sizeof(int64_t));
        s->st.ema = &s->ema;
    }
    free(s->config);
    s->config = NULL;
    if (config_json) {
        s->config = strdup(config_json);
        CHECK(s->config != NULL);
    }
    s->st.config_json = s->config;
}

void checkpoint_writer_init(CheckpointWriter *w, int keep) {
    memset(w, 0, sizeof *w);
    w->keep = keep;
    w->snap = callocCheck(1, sizeof(Snapshot));
}

static void *writer_main(void *arg) {
    CheckpointWriter *w = arg;
    Snapshot *s = w->snap;
    double t0 = now_sec();
    char dir[CKPT_PATH_MAX];
    dir_of(w->path, dir, sizeof dir);
    int rc = write_file(w->path, &s->st, w->err, sizeof w->err);
    if (rc == 0) rc = checkpoint_set_latest(dir, w->path, w->err, sizeof w->err);
    if (rc == 0 && w->keep > 0 && checkpoint_prune(dir, w->keep, w->err, sizeof w->err) < 0) rc = -1;
    w->status = rc;
    w->last_write_sec = now_sec() - t0;
    return NULL;
}

int checkpoint_writer_wait(CheckpointWriter *w, char *err, size_t errlen) {
    if (!w->pending) return 0;
    CHECK(pthread_join(w->thread, NULL) == 0);
    w->pending = 0;
    if (w->status != 0) errf(err, errlen, "%s", w->err);
    return w->status;
}

int checkpoint_writer_submit_ema(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                                 const TrainState *ts, const float *rank_buffers, const CkptEma *ema,
                                 const char *config_json, char *err, size_t errlen) {
    int prev = checkpoint_writer_wait(w, err, errlen);
    double t0 = now_sec();
    if (strlen(path) >= sizeof w->path) fail_at(__FILE__, __LINE__, "checkpoint path too long", path);
    snprintf(w->path, sizeof w->path, "%s", path);
    snapshot_take(w->snap, m, opt, ts, rank_buffers, ema, config_json);
    ((Snapshot *)w->snap)->st.dataset = &w->dataset;
    w->status = 0;
    w->err[0] = '\0';
    CHECK(helper_thread_create(&w->thread, writer_main, w) == 0);
    w->pending = 1;
    w->last_submit_sec = now_sec() - t0;
    return prev;
}

int checkpoint_writer_submit_ranks(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                                   const TrainState *ts, const float *rank_buffers, const char *config_json,
                                   char *err, size_t errlen) {
    return checkpoint_writer_submit_ema(w, path, m, opt, ts, rank_buffers, NULL, config_json, err, errlen);
}

int checkpoint_writer_submit(CheckpointWriter *w, const char *path, const Model *m, const Optimizer *opt,
                             const TrainState *ts, const char *config_json, char *err, size_t errlen) {
    return checkpoint_writer_submit_ranks(w, path, m, opt, ts, NULL, config_json, err, errlen);
}

void checkpoint_writer_set_dataset(CheckpointWriter *w, const CkptDataset *d) {
    CHECK(!w->pending);   /* set before the first write: a writing thread reads it */
    ckpt_dataset_free(&w->dataset);
    if (d && d->present) ckpt_dataset_copy(&w->dataset, d);
}

void checkpoint_writer_free(CheckpointWriter *w) {
    char err[16];
    checkpoint_writer_wait(w, err, sizeof err);
    ckpt_dataset_free(&w->dataset);
    if (w->snap) {
        snapshot_free(w->snap);
        free(w->snap);
    }
    w->snap = NULL;
}
