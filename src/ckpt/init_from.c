/* SPDX-License-Identifier: BSD-3-Clause */
/* init_from.c - see init_from.h. */
#include "init_from.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/h5check.h"
#include "base/h5open.h"
#include "base/hdf5_lock.h"
#include "base/util.h"

typedef struct {
    const Model *m;
    char extra[128];   /* a dataset of the file the model does not have */
} Scan;

static int known(const Model *m, const char *name) {
    for (int i = 0; i < m->n_param_info; i++) if (!strcmp(m->param_info[i].name, name)) return 1;
    for (int i = 0; i < m->n_buffer_info; i++) if (!strcmp(m->buffer_info[i].name, name)) return 1;
    for (int i = 0; i < m->n_bn; i++) if (!strcmp(m->bn_info[i].name, name)) return 1;
    return 0;
}

/* /model is flat: its datasets are named by state_dict names, dots and all */
static herr_t visit(hid_t g, const char *name, const H5L_info_t *info, void *ctx) {
    Scan *s = ctx;
    (void)g;
    (void)info;
    if (!known(s->m, name) && strcmp(name, "n_averaged") != 0) {
        snprintf(s->extra, sizeof s->extra, "%s", name);
        return 1;
    }
    return 0;
}

/* The values of tensor t, read into v (floats) or c (its counter): what no training could
 * have left is refused here, naming the tensor, rather than met later as a divergence that
 * blames the learning rate or as a NaN test loss. 0, or -1 with why. */
static int check_values(const TensorInfo *t, const float *v, const int64_t *c, char *why, size_t whylen) {
    if (c) {
        if (*c >= 0) return 0;
        snprintf(why, whylen, "tensor \"%s\" holds a negative count %lld", t->name, (long long)*c);
        return -1;
    }
    for (size_t i = 0; i < t->numel; i++) {
        if (!isfinite(v[i])) {
            snprintf(why, whylen, "tensor \"%s\" holds %s at element %zu (damaged weights, or saved from a diverged run)",
                     t->name, isnan(v[i]) ? "NaN" : "an infinity", i);
            return -1;
        }
        if (t->role == TENSOR_BN_RUNNING_VAR && v[i] < 0.0f) {
            snprintf(why, whylen, "tensor \"%s\" holds a negative variance %g at element %zu", t->name, (double)v[i], i);
            return -1;
        }
    }
    return 0;
}

/* Reads /model/NAME into dst (n floats) when its shape is t's: 1; another shape: 0 (shape
 * into got); missing: -1; refused or unreadable: -2 with why. Its storage is checked before
 * anything is read (h5open_dataset: no link to another object or file, no data kept outside
 * the file; then every chunk present and of its size), and its values after. */
static int read_tensor(hid_t g, const TensorInfo *t, float *dst, int64_t *counter, char *got, size_t gotlen,
                       char *why, size_t whylen) {
    int missing = 0;
    hid_t ds = h5open_dataset(g, t->name, &missing, why, whylen);
    if (ds < 0) return missing ? -1 : -2;
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[8] = {0};
    const int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int same = nd == t->ndim && nd <= 4;
    if (nd >= 0 && nd <= 8) H5Sget_simple_extent_dims(sp, dims, NULL);
    for (int d = 0; same && d < nd; d++) same = dims[d] == (hsize_t)t->shape[d];
    char what[256];
    int rc = 0;
    if (nd < 0) {
        snprintf(why, whylen, "tensor \"%s\" has no readable shape", t->name);
        rc = -2;
    } else if (!same) {
        size_t o = 0;
        got[0] = '\0';
        for (int d = 0; d < nd && d < 8 && o + 16 < gotlen; d++)
            o += (size_t)snprintf(got + o, gotlen - o, "%s%llu", d ? "x" : "", (unsigned long long)dims[d]);
    } else if (h5check_allocated(ds, what, sizeof what) != 0 || h5check_chunks(ds, NULL, NULL, what, sizeof what) != 0) {
        snprintf(why, whylen, "tensor \"%s\" has %s", t->name, what);
        rc = -2;
    } else if (H5Dread(ds, counter ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       counter ? (void *)counter : (void *)dst) < 0) {
        /* a chunk whose Fletcher-32 checksum (a checkpoint's) does not match, among others */
        snprintf(why, whylen, "tensor \"%s\" cannot be read (damaged file?)", t->name);
        rc = -2;
    } else {
        rc = check_values(t, dst, counter, why, whylen) == 0 ? 1 : -2;
    }
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return rc;
}

int init_from_file(Model *m, const char *path, char *note, size_t notelen, char *err, size_t errlen) {
    const Backend *be = m->be;
    float *p = mallocCheck(m->num_params * sizeof(float));
    float *b = mallocCheck((m->num_buffers ? m->num_buffers : 1) * sizeof(float));
    int64_t *nbt = mallocCheck((size_t)(m->n_bn ? m->n_bn : 1) * sizeof(int64_t));
    be->download(p, m->params, m->num_params * sizeof(float));
    be->download(b, m->buffers, m->num_buffers * sizeof(float));
    memcpy(nbt, m->bn_tracked, (size_t)m->n_bn * sizeof(int64_t));
    char kept[1024] = "";
    size_t ko = 0;
    int n_loaded = 0, n_kept = 0, rc = -1;
    char why[1024];
    hid_t f = -1, g = -1;
    hdf5_lock();
    /* the checks every HDF5 file ddptrain reads gets (h5open.h): a regular file (a FIFO
     * would hang the open), HDF5's signature, the metadata pre-walk (a damaged B-tree crashed
     * HDF5's own walk), before HDF5 opens it */
    if (h5open_check_file(path, "a ddptrain checkpoint or a torch_to_ddptrain.py weights file is expected", why,
                          sizeof why) != 0) {
        snprintf(err, errlen, "--init_from %s", why);
        goto out;
    }
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        snprintf(err, errlen, "--init_from %s: cannot be opened as HDF5", QUOTED(path));
        goto out;
    }
    int missing = 0;
    g = h5open_group(f, "model", &missing, why, sizeof why);
    if (g < 0 && missing) {
        snprintf(err, errlen, "--init_from %s: no /model group (a ddptrain checkpoint, or a state_dict written by "
                 "torch_to_ddptrain.py)", QUOTED(path));
        goto out;
    }
    if (g < 0) {
        snprintf(err, errlen, "--init_from %s: %s", QUOTED(path), why);
        goto out;
    }
    Scan scan = {m, ""};
    if (H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, visit, &scan) > 0) {
        snprintf(err, errlen, "--init_from %s: tensor \"%s\" is not in this network (%s): weights of another one?",
                 QUOTED(path), scan.extra, m->net.name);
        goto out;
    }
    for (int pass = 0; pass < 3; pass++) {
        const TensorInfo *info = pass == 0 ? m->param_info : pass == 1 ? m->buffer_info : m->bn_info;
        const int n = pass == 0 ? m->n_param_info : pass == 1 ? m->n_buffer_info : m->n_bn;
        for (int i = 0; i < n; i++) {
            const TensorInfo *t = &info[i];
            char got[96];
            const int r = read_tensor(g, t, pass == 0 ? p + t->offset : pass == 1 ? b + t->offset : NULL,
                                      pass == 2 ? nbt + t->offset : NULL, got, sizeof got, why, sizeof why);
            if (r == -2) {
                snprintf(err, errlen, "--init_from %s: %s", QUOTED(path), why);
                goto out;
            }
            if (r < 0) {
                snprintf(err, errlen, "--init_from %s: no readable tensor \"%s\" in /model: weights of another network "
                         "than %s?", QUOTED(path), t->name, m->net.name);
                goto out;
            }
            if (r == 1) { n_loaded++; continue; }
            n_kept++;
            if (ko + 128 < sizeof kept)
                ko += (size_t)snprintf(kept + ko, sizeof kept - ko, "%s%s (%s in the file)", ko ? ", " : "", t->name, got);
        }
    }
    rc = 0;
out:
    if (g >= 0) H5Gclose(g);
    if (f >= 0) H5Fclose(f);
    hdf5_unlock();
    if (rc == 0) {
        be->upload(m->params, p, m->num_params * sizeof(float));
        be->upload(m->buffers, b, m->num_buffers * sizeof(float));
        memcpy(m->bn_tracked, nbt, (size_t)m->n_bn * sizeof(int64_t));
        model_params_changed(m);
        snprintf(note, notelen, "%d tensors loaded%s%s", n_loaded, n_kept ? "; kept at their initialisation, another shape: " : "",
                 kept);
    }
    free(p);
    free(b);
    free(nbt);
    return rc;
}
