/* SPDX-License-Identifier: BSD-3-Clause */
/* init_from.c - see init_from.h. */
#include "init_from.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads /model/NAME into dst (n floats) when its shape is t's: 1; another shape: 0 (shape
 * into got); missing or unreadable: -1. */
static int read_tensor(hid_t g, const TensorInfo *t, float *dst, int64_t *counter, char *got, size_t gotlen) {
    if (H5Lexists(g, t->name, H5P_DEFAULT) <= 0) return -1;
    hid_t ds = H5Dopen2(g, t->name, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[8] = {0};
    const int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int same = nd == t->ndim && nd <= 4;
    if (nd >= 0 && nd <= 8) H5Sget_simple_extent_dims(sp, dims, NULL);
    for (int d = 0; same && d < nd; d++) same = dims[d] == (hsize_t)t->shape[d];
    int rc = 0;
    if (nd < 0) {
        rc = -1;
    } else if (!same) {
        size_t o = 0;
        got[0] = '\0';
        for (int d = 0; d < nd && d < 8 && o + 16 < gotlen; d++)
            o += (size_t)snprintf(got + o, gotlen - o, "%s%llu", d ? "x" : "", (unsigned long long)dims[d]);
    } else if (counter) {
        rc = H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counter) >= 0 ? 1 : -1;
    } else {
        rc = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) >= 0 ? 1 : -1;
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
    hdf5_lock();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t g = f >= 0 && H5Lexists(f, "model", H5P_DEFAULT) > 0 ? H5Gopen2(f, "model", H5P_DEFAULT) : -1;
    if (f < 0) {
        snprintf(err, errlen, "--init_from %s: cannot be opened as HDF5", QUOTED(path));
        goto out;
    }
    if (g < 0) {
        snprintf(err, errlen, "--init_from %s: no /model group (a ddptrain checkpoint, or a state_dict written by "
                 "torch_to_ddptrain.py)", QUOTED(path));
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
                                      pass == 2 ? nbt + t->offset : NULL, got, sizeof got);
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
