/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint_read.c - opening, checking and loading a checkpoint: everything is read into scratch
 * memory and checked against the model before any of the caller's state changes, and a damaged
 * or foreign file is refused with one line that names what is wrong. */
#include "checkpoint.h"
#include "checkpoint_format.h"

#include <hdf5.h>
#include <math.h>
#include <string.h>

#include "base/h5check.h"
#include "base/h5open.h"
#include "base/hdf5_lock.h"
#include "base/util.h"
#include "data/shard_class_names.h"

static void describe_dims(const hsize_t *d, int rank, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)d[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

typedef struct {
    hid_t file;
    const char *path;
    char *err;
    size_t errlen;
    char arch[128];       /* the "architecture" attribute, read by r_header */
} Reader;

/* Where everything is read before it replaces anything in the caller's model. */
typedef struct {
    float *params, *buffers;
    const OptimKind *opt_kind;              /* the optimizer /optimizer/name names (SGD without it) */
    float *opt_state[OPTIM_MAX_STATE];      /* its state tensors */
    int64_t *nbt;           /* per BN layer, bn_info order */
    long opt_steps;
    TrainState ts;
    float *rank_buffers;    /* ts.world_size rows of num_buffers, when the file has them; else NULL */
    CkptEma ema;            /* /ema, when the file has it (ema.n_averaged > 0); else n_averaged 0 */
} Scratch;

static int r_fail(Reader *r, const char *what) {
    char reason[512];
    checkpoint_hdf5_reason(reason, sizeof reason);
    return errf(r->err, r->errlen, "%s: cannot read %s (corrupt file?): %s", r->path, what, reason);
}

/* Opens `path` read-only with its one-line failure reasons; under hdf5_lock(). */
static int r_open(Reader *r, const char *path, char *err, size_t errlen) {
    r->file = -1; r->path = path; r->err = err; r->errlen = errlen;
    /* regular file, HDF5 signature, metadata pre-walk: before HDF5 reads anything */
    if (h5open_check_file(path, "a ddptrain checkpoint was expected", err, errlen) != 0) return -1;
    hid_t fapl = checkpoint_file_access_plist();
    r->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (r->file < 0) {
        char reason[512];
        checkpoint_hdf5_reason(reason, sizeof reason);
        H5Pclose(fapl);
        return errf(err, errlen, "%s: cannot open the checkpoint (truncated or corrupt file?): %s", path, reason);
    }
    H5Pclose(fapl);
    return 0;
}

static void r_close(Reader *r) {
    if (r->file >= 0) H5Fclose(r->file);
    r->file = -1;
}

/* ddptrain writes every string fixed-length (string_type, checkpoint_write.c). A variable-length
 * one is refused unread: HDF5 1.10 fetches it from the file's global heap, where a damaged file
 * crashed (memcpy of a size from the file) or hung the reader (found by fuzz_checkpoint). */
#define CKPT_VLEN_REFUSED "is a variable-length string (ddptrain writes fixed-length ones; damaged or not written by ddptrain)"

/* A fixed-length string attribute of the root, one element, into buf; -1 when absent. */
static int r_attr_str(Reader *r, const char *name, char *buf, size_t len) {
    buf[0] = '\0';
    if (H5Aexists(r->file, name) <= 0) return -1;
    hid_t a = H5Aopen(r->file, name, H5P_DEFAULT);
    if (a < 0) return r_fail(r, name);
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    int rc = 0;
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING || np != 1) {
        rc = errf(r->err, r->errlen, "%s: attribute '%s' is not a single string", r->path, name);
    } else if (H5Tis_variable_str(ft) != 0) {
        rc = errf(r->err, r->errlen, "%s: attribute '%s' " CKPT_VLEN_REFUSED, r->path, name);
    } else {
        size_t n = H5Tget_size(ft);
        char *s = callocCheck(n + 1, 1);
        if (H5Aread(a, ft, s) < 0) rc = r_fail(r, name);     /* file type = memory type */
        else snprintf(buf, len, "%s", s);
        free(s);
    }
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

static int r_attr_i64(Reader *r, const char *name, long *out) {
    if (H5Aexists(r->file, name) <= 0)
        return errf(r->err, r->errlen, "%s: root attribute '%s' is missing (not a complete ddptrain checkpoint)", r->path, name);
    hid_t a = H5Aopen(r->file, name, H5P_DEFAULT);
    if (a < 0) return r_fail(r, name);
    hid_t t = H5Aget_type(a);
    int isint = t >= 0 && H5Tget_class(t) == H5T_INTEGER;
    int64_t v = 0;
    int rc = 0;
    if (!isint) rc = errf(r->err, r->errlen, "%s: root attribute '%s' is not an integer", r->path, name);
    else if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0) rc = r_fail(r, name);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    *out = (long)v;
    return rc;
}

/* Whether object `name` exists, through hard links only: 1 or 0; -1 (with the one line in
 * r->err) when a component of its path is a soft or external link (h5open.h). */
static int r_has(Reader *r, const char *name) {
    char why[512];
    const int e = h5open_exists(r->file, name, why, sizeof why);
    if (e < 0) return errf(r->err, r->errlen, "%s: %s", r->path, why);
    return e;
}

/* The checkpoint checksum is not optional: every float tensor ddptrain writes is stored with
 * HDF5's Fletcher-32 filter (w_dataset in checkpoint_write.c), which HDF5 verifies on each
 * read. A tensor rewritten without it would load whatever its bytes became unchecked. */
static int r_checksummed(Reader *r, hid_t ds, const char *name) {
    hid_t dcpl = H5Dget_create_plist(ds);
    int found = 0;
    const int nf = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    for (int k = 0; k < nf && !found; k++) {
        unsigned flags = 0;
        size_t nelem = 0;
        found = H5Pget_filter2(dcpl, (unsigned)k, &flags, &nelem, NULL, 0, NULL, NULL) == H5Z_FILTER_FLETCHER32;
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    if (found) return 0;
    return errf(r->err, r->errlen, "%s: %s is stored without its Fletcher-32 checksum, which ddptrain's checkpoints "
                "require (rewritten or not written by ddptrain)", r->path, name);
}

/* Opens dataset `name`, checking it exists and (when want_class >= 0) its type class, and
 * returns its dims (rank in *rank; scalar = 0). */
static hid_t r_dataset(Reader *r, const char *name, H5T_class_t want_class, const char *want_desc,
                       hsize_t *dims, int *rank) {
    char why[512];
    int missing = 0;
    hid_t ds = h5open_dataset(r->file, name, &missing, why, sizeof why);
    if (ds < 0) {
        if (missing) errf(r->err, r->errlen, "%s: %s is missing (not a complete ddptrain checkpoint)", r->path, name);
        else errf(r->err, r->errlen, "%s: %s", r->path, why);
        return -1;
    }
    if (h5check_chunks(ds, NULL, NULL, why, sizeof why) != 0) {
        H5Dclose(ds);
        errf(r->err, r->errlen, "%s: %s has %s (damaged or not written by ddptrain)", r->path, name, why);
        return -1;
    }
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    int ok = t >= 0 && sp >= 0 && H5Tget_class(t) == want_class;
    /* An integer or float wider than 8 bytes is no number ddptrain wrote, and HDF5 converts
     * it through a buffer of that width: a fuzzed 4 GB-wide integer kept the reader busy
     * zeroing memory for minutes. */
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    if (ok && want_class != H5T_STRING && (width == 0 || width > 8)) ok = 0;
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (t >= 0) H5Tclose(t);
    if (ok && (nd < 0 || nd > 4)) ok = 0;
    if (ok) { *rank = nd; H5Sget_simple_extent_dims(sp, dims, NULL); }
    if (sp >= 0) H5Sclose(sp);
    if (!ok) {
        H5Dclose(ds);
        errf(r->err, r->errlen, "%s: %s is not %s", r->path, name, want_desc);
        return -1;
    }
    return ds;
}

static int r_tensor(Reader *r, const char *group, const TensorInfo *t, float *dst) {
    char name[160];
    snprintf_check(name, sizeof name, "%s/%s", group, t->name);
    hsize_t dims[4], want[4];
    int rank = 0;
    hid_t ds = r_dataset(r, name, H5T_FLOAT, "a float tensor", dims, &rank);
    if (ds < 0) return -1;
    if (r_checksummed(r, ds, name) != 0) {
        H5Dclose(ds);
        return -1;
    }
    int same = rank == t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        want[d] = (hsize_t)t->shape[d];
        if (same && dims[d] != want[d]) same = 0;
    }
    int rc = 0;
    if (!same) {
        char have_s[96], want_s[96];
        describe_dims(dims, rank, have_s, sizeof have_s);
        describe_dims(want, t->ndim, want_s, sizeof want_s);
        rc = errf(r->err, r->errlen, "%s: %s has shape %s but this model needs %s", r->path, name, have_s, want_s);
    } else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0) {
        rc = r_fail(r, name);
    }
    H5Dclose(ds);
    return rc;
}

static int r_i64(Reader *r, const char *name, int64_t *out) {
    hsize_t dims[4];
    int rank = 0;
    hid_t ds = r_dataset(r, name, H5T_INTEGER, "an integer", dims, &rank);
    if (ds < 0) return -1;
    int rc = 0;
    if (rank != 0 && !(rank == 1 && dims[0] == 1))
        rc = errf(r->err, r->errlen, "%s: %s is not a single integer", r->path, name);
    else if (H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
        rc = r_fail(r, name);
    H5Dclose(ds);
    return rc;
}

static int r_long(Reader *r, const char *name, long *out) {
    int64_t v = 0;
    int rc = r_i64(r, name, &v);
    *out = (long)v;
    return rc;
}

/* Format, version and architecture: is this a ddptrain checkpoint this build can read? */
static int r_header(Reader *r) {
    char s[128];
    if (H5Aexists(r->file, "format") <= 0)
        return errf(r->err, r->errlen, "%s: not a ddptrain checkpoint (no 'format' attribute)", r->path);
    if (r_attr_str(r, "format", s, sizeof s)) return -1;
    if (strcmp(s, CKPT_FORMAT) != 0)
        return errf(r->err, r->errlen, "%s: not a ddptrain checkpoint (format is '%s', expected '%s')", r->path, s, CKPT_FORMAT);
    long version;
    if (r_attr_i64(r, "format_version", &version)) return -1;
    if (version < 1 || version > CKPT_FORMAT_VERSION)
        return errf(r->err, r->errlen, "%s: checkpoint format_version %ld is not supported by this ddptrain (it reads version %d)",
                    r->path, version, CKPT_FORMAT_VERSION);
    if (r_attr_str(r, "architecture", s, sizeof s) != 0)
        return errf(r->err, r->errlen, "%s: checkpoint has no 'architecture' attribute", r->path);
    snprintf(r->arch, sizeof r->arch, "%s", s);
    return 0;
}

static int r_check_group_size(Reader *r, const char *group, long expected) {
    const int has = r_has(r, group);
    if (has < 0) return -1;
    if (has == 0)
        return errf(r->err, r->errlen, "%s: group %s is missing (not a complete ddptrain checkpoint)", r->path, group);
    H5G_info_t gi;
    if (H5Gget_info_by_name(r->file, group, &gi, H5P_DEFAULT) < 0) return r_fail(r, group);
    if ((long)gi.nlinks != expected)
        return errf(r->err, r->errlen, "%s: %s holds %lu entries but this model has %ld", r->path, group,
                    (unsigned long)gi.nlinks, expected);
    return 0;
}

/* /train_state/rank_buffers into s->rank_buffers: [world_size, num_buffers] floats, the world
 * size /train_state records (read before). Its size is checked against the file's before
 * anything is allocated, so a damaged world size cannot ask for more memory than the file. */
static int r_rank_buffers(Reader *r, const Model *m, Scratch *s) {
    const char *name = "/train_state/rank_buffers";
    hsize_t d[4];
    int rank = 0;
    hid_t ds = r_dataset(r, name, H5T_FLOAT, "a float array", d, &rank);
    if (ds < 0) return -1;
    if (r_checksummed(r, ds, name) != 0) {
        H5Dclose(ds);
        return -1;
    }
    const long ws = s->ts.world_size;
    int rc = 0;
    if (rank != 2 || ws < 1 || d[0] != (hsize_t)ws || d[1] != (hsize_t)m->num_buffers) {
        char have[96];
        describe_dims(d, rank, have, sizeof have);
        rc = errf(r->err, r->errlen, "%s: %s has shape %s but a checkpoint of %ld rank(s) of this model needs [%ld,%zu]",
                  r->path, name, have, ws, ws, m->num_buffers);
    } else {
        hsize_t fsize = 0;
        const double bytes = (double)ws * (double)m->num_buffers * sizeof(float);
        if (H5Fget_filesize(r->file, &fsize) < 0) rc = r_fail(r, name);
        else if (bytes > (double)fsize || (double)H5Dget_storage_size(ds) < bytes)
            rc = errf(r->err, r->errlen, "%s: %s is incomplete (truncated or corrupt file?)", r->path, name);
    }
    if (rc == 0) {
        s->rank_buffers = mallocCheck((size_t)ws * m->num_buffers * sizeof(float));
        if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->rank_buffers) < 0) rc = r_fail(r, name);
    }
    H5Dclose(ds);
    return rc;
}

/* /ema into s->ema: the moving average of the weights and buffers, as /model holds them. */
/* A model's state under `group` (/model, /ema): every parameter and buffer tensor, and each
 * batch norm's num_batches_tracked into nbt. */
static int r_state(Reader *r, const Model *m, const char *group, float *params, float *buffers, int64_t *nbt) {
    for (int i = 0; i < m->n_param_info; i++)
        if (r_tensor(r, group, &m->param_info[i], params + m->param_info[i].offset)) return -1;
    for (int i = 0; i < m->n_buffer_info; i++)
        if (r_tensor(r, group, &m->buffer_info[i], buffers + m->buffer_info[i].offset)) return -1;
    for (int k = 0; k < model_bn_count(m); k++) {
        char name[160];
        snprintf_check(name, sizeof name, "%s/%s", group, m->bn_info[k].name);
        if (r_i64(r, name, &nbt[k])) return -1;
    }
    return 0;
}

static int r_ema(Reader *r, const Model *m, Scratch *s) {
    const int n_bn = model_bn_count(m);
    if (r_check_group_size(r, "/ema", 1 + m->n_param_info + m->n_buffer_info + n_bn)) return -1;
    CkptEma *e = &s->ema;
    e->params = mallocCheck(m->num_params * sizeof(float));
    e->buffers = mallocCheck(m->num_buffers * sizeof(float));
    e->nbt = callocCheck((size_t)n_bn, sizeof(int64_t));
    long n = 0;
    if (r_long(r, "/ema/n_averaged", &n)) return -1;
    if (r_state(r, m, "/ema", e->params, e->buffers, e->nbt)) return -1;
    for (int k = 0; k < n_bn; k++)
        if (e->nbt[k] < 0) n = -1;
    /* the decay, informational: 0 when absent or unreadable */
    double d = 0.0;
    if (H5Aexists_by_name(r->file, "/ema", "decay", H5P_DEFAULT) > 0) {
        hid_t at = H5Aopen_by_name(r->file, "/ema", "decay", H5P_DEFAULT, H5P_DEFAULT);
        if (at >= 0) {
            hid_t t = H5Aget_type(at);
            if (t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Aread(at, H5T_NATIVE_DOUBLE, &d) < 0) d = 0.0;
            if (t >= 0) H5Tclose(t);
            H5Aclose(at);
        }
    }
    if (n < 1 || n > CKPT_MAX_STEP)
        return errf(r->err, r->errlen, "%s: /ema holds a value out of range (damaged or not written by ddptrain)", r->path);
    e->n_averaged = n;
    e->decay = d;
    return 0;
}

/* /optimizer/name: the optimizer whose state /optimizer holds, one of the table's (optim.h);
 * SGD in files written before it was recorded. */
static int r_opt_name(Reader *r, Scratch *s) {
    const int has = r_has(r, "/optimizer/name");
    if (has < 0) return -1;
    s->opt_kind = optim_kind("sgd");
    if (!has) return 0;
    hsize_t d[4];
    int rank = 0;
    hid_t ds = r_dataset(r, "/optimizer/name", H5T_STRING, "a string", d, &rank);
    if (ds < 0) return -1;
    int rc = 0;
    hid_t ft = H5Dget_type(ds);
    char name[64] = "";
    if (rank != 0 && !(rank == 1 && d[0] == 1)) rc = errf(r->err, r->errlen, "%s: /optimizer/name is not a single string", r->path);
    else if (ft < 0 || H5Tis_variable_str(ft) != 0)
        rc = errf(r->err, r->errlen, "%s: /optimizer/name " CKPT_VLEN_REFUSED, r->path);
    else if (H5Tget_size(ft) >= sizeof name)
        rc = errf(r->err, r->errlen, "%s: /optimizer/name is longer than any optimizer's name", r->path);
    else if (H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, name) < 0) rc = r_fail(r, "/optimizer/name");
    if (ft >= 0) H5Tclose(ft);
    H5Dclose(ds);
    if (rc) return rc;
    name[sizeof name - 1] = '\0';
    s->opt_kind = optim_kind(name);
    if (!s->opt_kind) {
        char shown[64];
        for (size_t i = 0; i < sizeof shown; i++) shown[i] = name[i] && (name[i] < 32 || name[i] > 126) ? '?' : name[i];
        return errf(r->err, r->errlen, "%s: /optimizer/name is '%s', no optimizer this ddptrain knows (damaged, or written by "
                    "a newer one)", r->path, shown);
    }
    return 0;
}

/* /optimizer: its name, the step count and every state tensor of that optimizer, and nothing
 * else. */
static int r_optimizer(Reader *r, const Model *m, Scratch *s) {
    if (r_opt_name(r, s)) return -1;
    const OptimKind *k = s->opt_kind;
    const int named = r_has(r, "/optimizer/name") == 1;
    if (r_check_group_size(r, "/optimizer", 1 + named + k->n_state)) return -1;
    if (r_long(r, "/optimizer/steps", &s->opt_steps)) return -1;
    for (int j = 0; j < k->n_state; j++) {
        char group[64];
        snprintf_check(group, sizeof group, "/optimizer/%s", k->state[j]);
        if (r_check_group_size(r, group, m->n_param_info)) return -1;
        s->opt_state[j] = mallocCheck(m->num_params * sizeof(float));
        for (int i = 0; i < m->n_param_info; i++)
            if (r_tensor(r, group, &m->param_info[i], s->opt_state[j] + m->param_info[i].offset)) return -1;
    }
    return 0;
}

/* Everything in the file into s, checked against m. Under hdf5_lock(). */
static int r_all(Reader *r, const Model *m, Scratch *s) {
    if (r_header(r)) return -1;
    const char *arch = model_architecture(m);
    if (strcmp(r->arch, arch) != 0)
        return errf(r->err, r->errlen, "%s: checkpoint is of architecture '%s' but this run is %s", r->path, r->arch, arch);
    struct { const char *name; long want; } dims[4] = {
        {"width", m->width}, {"blocks", m->blocks}, {"num_classes", m->num_classes}, {"image_size", m->image_size}};
    for (int i = 0; i < 4; i++) {
        long v;
        if (r_attr_i64(r, dims[i].name, &v)) return -1;
        if (v != dims[i].want)
            return errf(r->err, r->errlen, "%s: checkpoint is %s %s %ld but this run is %s %ld", r->path,
                        arch, dims[i].name, v, dims[i].name, dims[i].want);
    }
    long np;
    if (r_attr_i64(r, "num_params", &np)) return -1;
    if (np != (long)m->num_params)
        return errf(r->err, r->errlen, "%s: checkpoint has %ld parameters but this model has %zu", r->path, np, m->num_params);

    int n_bn = model_bn_count(m);
    if (r_check_group_size(r, "/model", m->n_param_info + m->n_buffer_info + n_bn)) return -1;
    if (r_state(r, m, "/model", s->params, s->buffers, s->nbt)) return -1;

    if (r_optimizer(r, m, s)) return -1;

    TrainState *ts = &s->ts;
    memset(ts, 0, sizeof *ts);
    long ws, seed;
    if (r_long(r, "/train_state/epoch", &ts->epoch) || r_long(r, "/train_state/step_in_epoch", &ts->step_in_epoch) ||
        r_long(r, "/train_state/global_step", &ts->global_step) || r_long(r, "/train_state/world_size", &ws) ||
        r_long(r, "/train_state/seed", &seed))
        return -1;
    /* Values steer allocation and the data position: anything a run could not have written is
     * refused here with the dataset's name, not met later as an internal error. */
    const char *bad = ts->epoch < 0 || ts->epoch > CKPT_MAX_STEP ? "/train_state/epoch"
                    : ts->step_in_epoch < 0 || ts->step_in_epoch > CKPT_MAX_STEP ? "/train_state/step_in_epoch"
                    : ts->global_step < 0 || ts->global_step > CKPT_MAX_STEP ? "/train_state/global_step"
                    : ws < 1 || ws > CKPT_MAX_WORLD ? "/train_state/world_size"
                    : s->opt_steps < 0 || s->opt_steps > CKPT_MAX_STEP ? "/optimizer/steps" : NULL;
    for (int k = 0; !bad && k < n_bn; k++)
        if (s->nbt[k] < 0) bad = "a num_batches_tracked of /model";
    if (bad)
        return errf(r->err, r->errlen, "%s: %s holds a value out of range (damaged or not written by ddptrain)", r->path, bad);
    ts->world_size = (int)ws;
    ts->seed = (uint64_t)seed;
    int has;
    if ((has = r_has(r, "/train_state/batch_size")) < 0) return -1;
    if (has) {
        int64_t id;
        if (r_long(r, "/train_state/batch_size", &ts->batch_size) ||
            r_long(r, "/train_state/grad_accum_steps", &ts->grad_accum_steps) ||
            r_long(r, "/train_state/data_samples", &ts->data_samples) ||
            r_long(r, "/train_state/data_shards", &ts->data_shards) || r_i64(r, "/train_state/data_id", &id))
            return -1;
        ts->data_id = (uint64_t)id;
        if (ts->batch_size < 1 || ts->grad_accum_steps < 1 || ts->data_samples < 1 || ts->data_shards < 1)
            return errf(r->err, r->errlen, "%s: /train_state/batch_size etc. hold a value out of range (damaged or not "
                        "written by ddptrain)", r->path);
    }
    if ((has = r_has(r, "/train_state/data_chunk_images")) < 0) return -1;
    if (has) {
        if (r_long(r, "/train_state/data_chunk_images", &ts->data_chunk_images) ||
            r_long(r, "/train_state/data_window_chunks", &ts->data_window_chunks))
            return -1;
        /* both 0 (in memory) or both positive (streamed) */
        if (ts->data_chunk_images < 0 || ts->data_chunk_images > CKPT_MAX_STEP || ts->data_window_chunks < 0 ||
            ts->data_window_chunks > CKPT_MAX_STEP || (ts->data_chunk_images == 0) != (ts->data_window_chunks == 0))
            return errf(r->err, r->errlen, "%s: /train_state/data_chunk_images and data_window_chunks hold values out of "
                        "range (damaged or not written by ddptrain)", r->path);
        ts->has_data_order = 1;
    }
    if ((has = r_has(r, "/train_state/amp")) < 0) return -1;
    if (has) {
        hsize_t d[4];
        int rank = 0;
        hid_t ds = r_dataset(r, "/train_state/amp", H5T_FLOAT, "a float array", d, &rank);
        if (ds < 0) return -1;
        int rc = 0;
        if (rank != 1 || d[0] < 1 || d[0] > AMP_STATE_N)
            rc = errf(r->err, r->errlen, "%s: /train_state/amp must hold 1 to %d numbers", r->path, AMP_STATE_N);
        else if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, ts->amp) < 0)
            rc = r_fail(r, "/train_state/amp");
        H5Dclose(ds);
        if (rc) return rc;
        /* A loss scale of 0, inf or NaN would zero or poison every gradient. */
        if (!(ts->amp[AMP_LOSS_SCALE] > 0 && ts->amp[AMP_LOSS_SCALE] <= 1e38) ||
            !(ts->amp[AMP_GROWTH_TRACKER] >= 0 && ts->amp[AMP_GROWTH_TRACKER] <= 1e9))
            return errf(r->err, r->errlen, "%s: /train_state/amp holds a value out of range (loss scale %g, growth tracker %g)",
                        r->path, ts->amp[AMP_LOSS_SCALE], ts->amp[AMP_GROWTH_TRACKER]);
        ts->has_amp = 1;
    }
    if ((has = r_has(r, "/train_state/rank_buffers")) < 0 || (has && r_rank_buffers(r, m, s))) return -1;
    if ((has = r_has(r, "/ema")) < 0 || (has && r_ema(r, m, s))) return -1;
    return 0;
}

static void scratch_init(Scratch *s, const Model *m) {
    memset(s, 0, sizeof *s);
    s->params = mallocCheck(m->num_params * sizeof(float));
    s->buffers = mallocCheck(m->num_buffers * sizeof(float));
    s->nbt = callocCheck((size_t)model_bn_count(m), sizeof(int64_t));
}

static void scratch_free(Scratch *s) {
    free(s->params); free(s->buffers); free(s->nbt); free(s->rank_buffers);
    for (int k = 0; k < OPTIM_MAX_STATE; k++) free(s->opt_state[k]);
    free(s->ema.params); free(s->ema.buffers); free(s->ema.nbt);
    memset(s, 0, sizeof *s);
}

static int read_checked(const char *path, const Model *m, Scratch *s, char *err, size_t errlen) {
    Reader r;
    hdf5_lock();
    int rc = r_open(&r, path, err, errlen);
    if (rc == 0) rc = r_all(&r, m, s);
    r_close(&r);
    hdf5_unlock();
    return rc;
}

int checkpoint_verify(const char *path, const Model *m, char *err, size_t errlen) {
    Scratch s;
    scratch_init(&s, m);
    int rc = read_checked(path, m, &s, err, errlen);
    scratch_free(&s);
    return rc;
}

int checkpoint_load_ema(const char *path, Model *m, Optimizer *opt, TrainState *ts, int rank, int world_size,
                        int *own, CkptEma *ema, char *err, size_t errlen) {
    if (opt) CHECK(opt->n == m->num_params);
    CHECK(world_size >= 1 && rank >= 0 && rank < world_size);
    Scratch s;
    scratch_init(&s, m);
    int rc = read_checked(path, m, &s, err, errlen);
    if (own) *own = 0;
    if (rc == 0 && opt && s.opt_kind != opt->kind)
        rc = errf(err, errlen, "%s: the checkpoint holds the state of optimizer %s, not of this run's %s (--optimizer)", path,
                  s.opt_kind->name, opt->kind->name);
    if (rc == 0) {
        memcpy(m->params, s.params, m->num_params * sizeof(float));
        const int mine = own && s.rank_buffers && s.ts.world_size == world_size;
        memcpy(m->buffers, mine ? s.rank_buffers + (size_t)rank * m->num_buffers : s.buffers,
               m->num_buffers * sizeof(float));
        if (mine) *own = 1;
        memcpy(m->bn_tracked, s.nbt, (size_t)model_bn_count(m) * sizeof *m->bn_tracked);
        if (opt) {
            for (int k = 0; k < opt->kind->n_state; k++) memcpy(opt->state[k], s.opt_state[k], m->num_params * sizeof(float));
            opt->steps = s.opt_steps;
        }
        if (ts) *ts = s.ts;
        if (ema) {
            ema->n_averaged = s.ema.n_averaged;
            if (s.ema.n_averaged > 0) {
                ema->decay = s.ema.decay;
                memcpy(ema->params, s.ema.params, m->num_params * sizeof(float));
                memcpy(ema->buffers, s.ema.buffers, m->num_buffers * sizeof(float));
                memcpy(ema->nbt, s.ema.nbt, (size_t)model_bn_count(m) * sizeof(int64_t));
            }
        }
        model_params_changed(m);
    }
    scratch_free(&s);
    return rc;
}

int checkpoint_load_rank(const char *path, Model *m, Optimizer *opt, TrainState *ts, int rank, int world_size,
                         int *own, char *err, size_t errlen) {
    return checkpoint_load_ema(path, m, opt, ts, rank, world_size, own, NULL, err, errlen);
}

int checkpoint_load(const char *path, Model *m, Optimizer *opt, TrainState *ts, char *err, size_t errlen) {
    return checkpoint_load_rank(path, m, opt, ts, 0, 1, NULL, err, errlen);
}

/* /dataset/mean or /dataset/std: 3 numbers under the checksum. */
static int r_float3(Reader *r, const char *name, float out[3]) {
    hsize_t d[4];
    int rank = 0;
    hid_t ds = r_dataset(r, name, H5T_FLOAT, "a float array", d, &rank);
    if (ds < 0) return -1;
    int rc = r_checksummed(r, ds, name);
    if (rc == 0 && (rank != 1 || d[0] != 3))
        rc = errf(r->err, r->errlen, "%s: %s must hold 3 numbers, one per channel", r->path, name);
    else if (rc == 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
        rc = r_fail(r, name);
    H5Dclose(ds);
    return rc;
}

/* /dataset into d. The names go through the shards' reader of a `class_names` dataset (its
 * checks: one dimension, fixed-length strings of a bounded width, storage that holds them, no
 * control character), as many as the root's num_classes. */
static int r_dataset_group(Reader *r, CkptDataset *d) {
    long k;
    if (r_attr_i64(r, "num_classes", &k)) return -1;
    if (k < 1 || k > SHARD_MAX_CLASSES)
        return errf(r->err, r->errlen, "%s: root attribute 'num_classes' %ld is out of range", r->path, k);
    if (r_float3(r, "/dataset/mean", d->mean) || r_float3(r, "/dataset/std", d->std)) return -1;
    for (int c = 0; c < 3; c++)
        if (!isfinite(d->mean[c]) || !isfinite(d->std[c]) || !(d->std[c] > 0.0f))
            return errf(r->err, r->errlen, "%s: /dataset/mean or /dataset/std holds a value out of range (a finite mean "
                        "and a positive std per channel are expected)", r->path);
    /* An attribute of names would be variable-length strings, which live in the global heap
     * (CKPT_VLEN_REFUSED): ddptrain writes a dataset. */
    if (H5Aexists_by_name(r->file, "/dataset", "class_names", H5P_DEFAULT) != 0)
        return errf(r->err, r->errlen, "%s: /dataset holds an attribute 'class_names' (ddptrain writes a dataset of "
                    "fixed-length strings; damaged or not written by ddptrain)", r->path);
    const int has = r_has(r, "/dataset/class_names");
    if (has < 0) return -1;
    d->num_classes = (int)k;
    if (has) {
        char why[512], where[CKPT_PATH_MAX + 16];
        hid_t g = h5open_group(r->file, "/dataset", NULL, why, sizeof why);
        if (g < 0) return errf(r->err, r->errlen, "%s: /dataset: %s", r->path, why);
        snprintf(where, sizeof where, "%s: /dataset", r->path);
        const int rc = shard_class_names_read(g, where, (int)k, &d->class_names, r->err, r->errlen);
        H5Gclose(g);
        if (rc != 0) return -1;
    }
    d->present = 1;
    return 0;
}

int checkpoint_read_dataset(const char *path, CkptDataset *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    Reader r;
    hdf5_lock();
    int rc = r_open(&r, path, err, errlen);
    if (rc == 0) rc = r_header(&r);
    int has = 0;
    if (rc == 0 && (has = r_has(&r, "/dataset")) < 0) rc = -1;
    if (rc == 0 && has) rc = r_dataset_group(&r, d);
    r_close(&r);
    hdf5_unlock();
    if (rc != 0) ckpt_dataset_free(d);
    return rc;
}

char *checkpoint_read_config(const char *path, char *err, size_t errlen) {
    Reader r;
    char *out = NULL;
    hdf5_lock();
    if (r_open(&r, path, err, errlen) == 0 && r_header(&r) == 0) {
        hsize_t d[4];
        int rank = 0;
        hid_t ds = r_dataset(&r, "/config", H5T_STRING, "a string", d, &rank);
        /* One string: the buffers below hold one element, whatever the file claims. */
        if (ds >= 0 && rank != 0 && !(rank == 1 && d[0] == 1)) {
            errf(err, errlen, "%s: /config is not a single string", path);
            H5Dclose(ds);
            ds = -1;
        }
        if (ds >= 0) {
            hid_t ft = H5Dget_type(ds);
            if (H5Tis_variable_str(ft) != 0) {
                errf(err, errlen, "%s: /config " CKPT_VLEN_REFUSED, path);
            } else {
                char *s = callocCheck(H5Tget_size(ft) + 1, 1);
                if (H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) { r_fail(&r, "/config"); free(s); }
                else out = s;
            }
            H5Tclose(ft);
            H5Dclose(ds);
        }
    }
    r_close(&r);
    hdf5_unlock();
    return out;
}

/* Every dataset read in full, so each chunk's checksum is checked: what the prune needs to
 * tell a good file from one whose data is damaged, without the model the loader checks
 * shapes against. A dataset claiming more bytes than the file holds is damage too. */
typedef struct {
    Reader *r;
    hsize_t fsize;
    int rc;
} DeepProbe;

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t ObjInfo;
#else
typedef H5O_info_t ObjInfo;
#endif

static herr_t deep_probe_visit(hid_t obj, const char *name, const ObjInfo *info, void *data) {
    DeepProbe *p = data;
    if (info->type != H5O_TYPE_DATASET) return 0;
    /* reached through hard links only (H5Ovisit follows no other), but its storage may still
     * be another file's */
    hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
    if (ds < 0) { p->rc = r_fail(p->r, name); return 1; }
    char why[512];
    if (h5open_check_storage(ds, why, sizeof why) != 0) {
        H5Dclose(ds);
        p->rc = errf(p->r->err, p->r->errlen, "%s: dataset '/%s' %s (not written by ddptrain)", p->r->path, name, why);
        return 1;
    }
    if (h5check_compact_storage(ds, why, sizeof why) != 0 || h5check_chunks(ds, NULL, NULL, why, sizeof why) != 0) {
        H5Dclose(ds);
        p->rc = errf(p->r->err, p->r->errlen, "%s: /%s has %s (damaged or not written by ddptrain)", p->r->path, name, why);
        return 1;
    }
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t tsz = t >= 0 ? H5Tget_size(t) : 0;
    const H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    const int str = cls == H5T_STRING;
    if (cls != H5T_FLOAT && cls != H5T_INTEGER && !str) {
        /* Nothing else is in a ddptrain checkpoint, and a variable-length type would be read
         * through HDF5's global heap (see CKPT_VLEN_REFUSED). */
        p->rc = errf(p->r->err, p->r->errlen, "%s: /%s is neither numbers nor a string (not written by ddptrain)", p->r->path, name);
    } else if (np < 0 || tsz == 0 || (double)np * (double)tsz > (double)p->fsize + 1e6) {
        p->rc = errf(p->r->err, p->r->errlen, "%s: /%s claims more data than the file holds (corrupt file?)", p->r->path, name);
    } else if (!str && np > 0) {
        void *buf = malloc((size_t)np * tsz);
        if (!buf) p->rc = errf(p->r->err, p->r->errlen, "%s: /%s: cannot allocate %zu bytes", p->r->path, name, (size_t)np * tsz);
        else if (H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) p->rc = r_fail(p->r, name);
        free(buf);
    }
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return p->rc ? 1 : 0;
}

int checkpoint_probe_data(const char *path, char *err, size_t errlen) {
    Reader r;
    hdf5_lock();
    int rc = r_open(&r, path, err, errlen);
    if (rc == 0) rc = r_header(&r);
    if (rc == 0) {
        DeepProbe p = {&r, 0, 0};
        if (H5Fget_filesize(r.file, &p.fsize) < 0) rc = r_fail(&r, "the file size");
#if H5_VERSION_GE(1, 12, 0)
        else if (H5Ovisit3(r.file, H5_INDEX_NAME, H5_ITER_NATIVE, deep_probe_visit, &p, H5O_INFO_BASIC) < 0 && !p.rc)
#else
        else if (H5Ovisit2(r.file, H5_INDEX_NAME, H5_ITER_NATIVE, deep_probe_visit, &p, H5O_INFO_BASIC) < 0 && !p.rc)
#endif
            rc = r_fail(&r, "the object tree");
        if (p.rc) rc = p.rc;
    }
    r_close(&r);
    hdf5_unlock();
    return rc;
}
