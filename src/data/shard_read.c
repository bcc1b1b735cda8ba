/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_read.c - reading one shard: its header validated against data/README.md before anything
 * is sized from it, then samples read by range, raw pixels or JPEG files with their index. */
#include "shard_read.h"
#include "shard_attrs.h"
#include "shard_class_names.h"

#include <math.h>
#include <string.h>

#include "base/h5check.h"
#include "base/h5open.h"
#include "base/hdf5_lock.h"
#include "base/util.h"

/* Every function below that calls HDF5 is a *_locked body run under hdf5_lock() by its public
 * wrapper: the library is not thread-safe and the checkpoint writer uses it from its own
 * thread. Each holds the lock for one file operation at most. */

/* Any split: used to report NNNNN/MMMMM for files given by path (inspect). */
static void parse_any_name(const char *name, int *index, int *count) {
    *index = *count = -1;
    const char *dash = strchr(name, '-');
    if (!dash) return;
    char split[32];
    size_t ls = (size_t)(dash - name);
    if (ls == 0 || ls >= sizeof split) return;
    memcpy(split, name, ls);
    split[ls] = '\0';
    if (!shard_parse_name(name, split, index, count)) *index = *count = -1;
}

static void describe_type(hid_t t, char *buf, size_t len) {
    H5T_class_t cls = H5Tget_class(t);
    size_t bits = H5Tget_size(t) * 8;
    if (cls == H5T_INTEGER)
        snprintf(buf, len, "%s%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int", bits);
    else if (cls == H5T_FLOAT)
        snprintf(buf, len, "float%zu", bits);
    else if (cls == H5T_STRING)
        snprintf(buf, len, "string");
    else
        snprintf(buf, len, "a non-numeric type");
}

static void describe_dims(const hsize_t *dims, int rank, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

static int open_file(const char *path, hid_t *file, char *err, size_t errlen) {
    shards_quiet_hdf5();
    /* regular file, HDF5 signature, metadata pre-walk: before HDF5 reads anything */
    if (h5open_check_file(path, "an HDF5 shard is expected", err, errlen) != 0) return -1;
    *file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*file < 0) return errf(err, errlen, "%s: cannot open as HDF5 (truncated or corrupt file)", path);
    return 0;
}

/* Opens dataset `name`, or explains that it is missing or why it is refused: a link to
 * another object or file, data kept outside the file, a damaged compact layout (h5open.h). */
static hid_t open_dataset(hid_t file, const char *path, const char *name, const char *what,
                          char *err, size_t errlen) {
    char why[512];
    int missing = 0;
    hid_t d = h5open_dataset(file, name, &missing, why, sizeof why);
    if (d >= 0) return d;
    if (missing) errf(err, errlen, "%s: dataset '%s' is missing (%s is required)", path, name, what);
    else errf(err, errlen, "%s: %s", path, why);
    return -1;
}

void shard_info_free(ShardInfo *info) { shard_attrs_free(&info->attrs); }

/* ---- JPEG shards --------------------------------------------------------------------------- */

/* Opens dataset `name` and checks it is an unsigned integer of `bytes` bytes and rank `rank`;
 * dims filled. `want` says what is required ("uint64 [N+1]"). */
static hid_t open_typed(hid_t file, const char *path, const char *name, size_t bytes, int rank,
                        hsize_t *dims, const char *want, char *err, size_t errlen) {
    hid_t d = open_dataset(file, path, name, want, err, errlen);
    if (d < 0) return -1;
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    int rk = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int ok = t >= 0 && rk >= 0 && rk <= H5S_MAX_RANK;
    hsize_t all[H5S_MAX_RANK];
    char tdesc[32] = "", ddesc[128] = "";
    if (ok) {
        H5Sget_simple_extent_dims(sp, all, NULL);
        describe_dims(all, rk, ddesc, sizeof ddesc);
        describe_type(t, tdesc, sizeof tdesc);
    }
    int type_ok = ok && H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == bytes && H5Tget_sign(t) == H5T_SGN_NONE;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (!ok) {
        H5Dclose(d);
        errf(err, errlen, "%s: cannot read the header of dataset '%s' (corrupt file?)", path, name);
        return -1;
    }
    if (!type_ok) {
        H5Dclose(d);
        errf(err, errlen, "%s: dataset '%s' has type %s but %s is required", path, name, tdesc, want);
        return -1;
    }
    if (rk != rank) {
        H5Dclose(d);
        errf(err, errlen, "%s: dataset '%s' has shape %s but %s is required", path, name, ddesc, want);
        return -1;
    }
    memcpy(dims, all, (size_t)rank * sizeof *dims);
    return d;
}

/* The datasets of a JPEG shard: jpeg uint8 [B], offsets uint64 [N+1], sizes uint16 [N,2],
 * and the attribute image_size; info->n, image_size and jpeg_bytes filled. */
static int jpeg_header(hid_t file, const char *path, int expected_image_size, ShardInfo *info,
                       hid_t *dj, hid_t *doff, hid_t *dsz, char *err, size_t errlen) {
    hsize_t dims[2];
    char want[64];
    if (shard_attr_image_size(file, path, &info->image_size, err, errlen) != 0) return -1;
    if (expected_image_size > 0 && info->image_size != expected_image_size)
        return errf(err, errlen, "%s: attribute 'image_size' is %d but the configured image size is %d (a JPEG shard of shorter side %d is required)",
                    path, info->image_size, expected_image_size, expected_image_size);
    if ((*doff = open_typed(file, path, "offsets", 8, 1, dims, "uint64 [N+1]", err, errlen)) < 0) return -1;
    if (dims[0] < 2)
        return errf(err, errlen, "%s: dataset 'offsets' has shape [%llu] but uint64 [N+1] with N >= 1 samples is required",
                    path, (unsigned long long)dims[0]);
    if (dims[0] - 1 > SHARD_MAX_SAMPLES)
        return errf(err, errlen, "%s: dataset 'offsets' claims %llu samples; at most %d per shard are supported",
                    path, (unsigned long long)(dims[0] - 1), SHARD_MAX_SAMPLES);
    info->n = (size_t)(dims[0] - 1);
    snprintf(want, sizeof want, "uint16 [%zu,2]", info->n);
    if ((*dsz = open_typed(file, path, "sizes", 2, 2, dims, want, err, errlen)) < 0) return -1;
    if (dims[0] != info->n || dims[1] != 2)
        return errf(err, errlen, "%s: dataset 'sizes' has shape [%llu,%llu] but %s (height, width of each of the %zu samples) is required",
                    path, (unsigned long long)dims[0], (unsigned long long)dims[1], want, info->n);
    if ((*dj = open_typed(file, path, "jpeg", 1, 1, dims, "uint8 [B]", err, errlen)) < 0) return -1;
    /* Offsets increase strictly from 0 to B: at least a byte a sample. */
    if (dims[0] < info->n)
        return errf(err, errlen, "%s: dataset 'jpeg' holds %llu bytes for %zu samples (at least one byte a sample is required)",
                    path, (unsigned long long)dims[0], info->n);
    info->jpeg_bytes = (uint64_t)dims[0];
    return 0;
}

/* Checks the offsets of samples [start, start + count) of a shard of n samples and B bytes:
 * off [count+1], as stored. */
static int check_offsets(const char *path, const uint64_t *off, size_t start, size_t count, size_t n,
                         uint64_t B, char *err, size_t errlen) {
    if (start == 0 && off[0] != 0)
        return errf(err, errlen, "%s: sample 0: dataset 'offsets' starts at %llu (0 is required)", path, (unsigned long long)off[0]);
    for (size_t i = 0; i < count; i++)
        if (off[i + 1] <= off[i])
            return errf(err, errlen, "%s: sample %zu: dataset 'offsets' says it ends at byte %llu, not after its start %llu (offsets must increase strictly)",
                        path, start + i, (unsigned long long)off[i + 1], (unsigned long long)off[i]);
    if (start + count == n && off[count] != B)
        return errf(err, errlen, "%s: sample %zu: dataset 'offsets' ends at byte %llu but 'jpeg' holds %llu bytes (offsets[N] must be B)",
                    path, n - 1, (unsigned long long)off[count], (unsigned long long)B);
    if (off[count] > B)
        return errf(err, errlen, "%s: sample %zu: dataset 'offsets' says it ends at byte %llu, past the %llu bytes of 'jpeg'",
                    path, start + count - 1, (unsigned long long)off[count], (unsigned long long)B);
    return 0;
}

/* Checks sizes [count][2] of samples [start, start + count): the shorter side S, the longer
 * at most 2S. */
static int check_sizes(const char *path, const uint16_t *sz, size_t start, size_t count, int S,
                       char *err, size_t errlen) {
    for (size_t i = 0; i < count; i++) {
        int h = sz[2 * i], w = sz[2 * i + 1];
        int lo = h < w ? h : w, hi = h < w ? w : h;
        if (lo != S || hi > 2 * S)
            return errf(err, errlen, "%s: sample %zu: dataset 'sizes' says %dx%d (height x width), but the shorter side must be %d (attribute 'image_size') and the longer at most %d",
                        path, start + i, h, w, S, 2 * S);
    }
    return 0;
}

/* Reads elements [start, start + count) of a 1-D dataset, or rows of a 2-D one with `cols`
 * columns, as `mtype` into buf, after the chunk check. */
static int read_rows(hid_t d, const char *path, const char *name, hid_t mtype, int rank, hsize_t cols,
                     hsize_t start, hsize_t count, void *buf, char *err, size_t errlen) {
    hsize_t off[2] = {start, 0}, cnt[2] = {count, cols};
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(rank, cnt, NULL);
    herr_t r = (fs < 0 || ms < 0) ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    char why[160];
    int rc = 0;
    if (r >= 0 && h5check_chunks(d, off, cnt, why, sizeof why) != 0)
        rc = errf(err, errlen, "%s: dataset '%s' has %s (damaged file?)", path, name, why);
    else if (r < 0 || H5Dread(d, mtype, ms, fs, H5P_DEFAULT, buf) < 0)
        rc = errf(err, errlen, "%s: cannot read [%llu, %llu) of dataset '%s' (truncated or corrupt file)",
                  path, (unsigned long long)start, (unsigned long long)(start + count), name);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    return rc;
}

/* Reads and checks all offsets and sizes of a JPEG shard (shard_read_info with labels). */
static int check_jpeg_index(hid_t doff, hid_t dsz, const ShardInfo *info, char *err, size_t errlen) {
    const char *path = info->path;
    uint64_t *off = malloc((info->n + 1) * sizeof *off);
    uint16_t *sz = malloc(info->n * 2 * sizeof *sz);
    int rc = -1;
    if (!off || !sz)
        errf(err, errlen, "%s: cannot allocate %zu bytes for the offsets and sizes of %zu samples", path, info->n * 12 + 8, info->n);
    else if (read_rows(doff, path, "offsets", H5T_NATIVE_UINT64, 1, 1, 0, info->n + 1, off, err, errlen) == 0 &&
             read_rows(dsz, path, "sizes", H5T_NATIVE_UINT16, 2, 2, 0, info->n, sz, err, errlen) == 0 &&
             check_offsets(path, off, 0, info->n, info->n, info->jpeg_bytes, err, errlen) == 0 &&
             check_sizes(path, sz, 0, info->n, info->image_size, err, errlen) == 0)
        rc = 0;
    free(off);
    free(sz);
    return rc;
}


static int shard_read_info_locked(ShardInfo *info, const char *path, int expected_image_size,
                    int expected_num_classes, int32_t **labels_out, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    if (labels_out) *labels_out = NULL;
    if (strlen(path) >= sizeof info->path) return errf(err, errlen, "%s: path too long", path);
    strcpy(info->path, path);
    const char *slash = strrchr(info->path, '/');
    info->name = slash ? slash + 1 : info->path;
    parse_any_name(info->name, &info->index, &info->count);

    hid_t file;
    if (open_file(path, &file, err, errlen) != 0) return -1;
    char want[64];
    if (expected_image_size > 0)
        snprintf(want, sizeof want, "[N,%d,%d,3] uint8", expected_image_size, expected_image_size);
    else
        snprintf(want, sizeof want, "[N,S,S,3] uint8");

    int rc = -1;
    hid_t di = -1, dl = -1, ti = -1, tl = -1, si = -1, sl = -1;
    hid_t dj = -1, doff = -1, dsz = -1;   /* a JPEG shard's */
    char tdesc[32], ddesc[128];
    hsize_t dims[H5S_MAX_RANK];
    int rank;

    if (shard_attr_encoding(file, path, &info->encoding, err, errlen) != 0) goto done;
    if (info->encoding == SHARD_ENC_JPEG) {
        if (jpeg_header(file, path, expected_image_size, info, &dj, &doff, &dsz, err, errlen) != 0) goto done;
    } else {
        /* images: uint8 [N,S,S,3] */
        if ((di = open_dataset(file, path, "images", want, err, errlen)) < 0) goto done;
        ti = H5Dget_type(di);
        si = H5Dget_space(di);
        if (ti < 0 || si < 0) { errf(err, errlen, "%s: cannot read the header of dataset 'images' (corrupt file?)", path); goto done; }
        rank = H5Sget_simple_extent_ndims(si);
        if (rank < 0 || rank > H5S_MAX_RANK) { errf(err, errlen, "%s: cannot read the shape of dataset 'images' (corrupt file?)", path); goto done; }
        H5Sget_simple_extent_dims(si, dims, NULL);
        describe_dims(dims, rank, ddesc, sizeof ddesc);
        describe_type(ti, tdesc, sizeof tdesc);
        if (!(H5Tget_class(ti) == H5T_INTEGER && H5Tget_size(ti) == 1 && H5Tget_sign(ti) == H5T_SGN_NONE)) {
            errf(err, errlen, "%s: dataset 'images' has type %s but %s is required", path, tdesc, want);
            goto done;
        }
        if (rank != 4 || dims[3] != 3 || dims[1] != dims[2] || dims[1] == 0) {
            errf(err, errlen, "%s: dataset 'images' has shape %s but %s is required", path, ddesc, want);
            goto done;
        }
        if (expected_image_size > 0 && dims[1] != (hsize_t)expected_image_size) {
            errf(err, errlen, "%s: images are %llux%llu but the configured image size is %d (%s is required)",
                 path, (unsigned long long)dims[1], (unsigned long long)dims[2], expected_image_size, want);
            goto done;
        }
        if (dims[0] == 0) { errf(err, errlen, "%s: dataset 'images' holds no samples (shape %s)", path, ddesc); goto done; }
        if (dims[1] > 65536) { errf(err, errlen, "%s: images of %llu pixels a side are not supported", path, (unsigned long long)dims[1]); goto done; }
        /* The sample count sizes every buffer (labels: n * 4 bytes, images: n * S*S*3): a header
         * may claim any count, e.g. 2^62 in chunks never written, whose products wrap. */
        if (dims[0] > SHARD_MAX_SAMPLES || dims[0] > (hsize_t)(SIZE_MAX / 2 / (dims[1] * dims[1] * 3))) {
            errf(err, errlen, "%s: dataset 'images' claims %llu samples of %llux%llu; at most %d per shard are supported",
                 path, (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[1], SHARD_MAX_SAMPLES);
            goto done;
        }
        info->n = (size_t)dims[0];
        info->image_size = (int)dims[1];
    }

    /* labels: integer [N] */
    if ((dl = open_dataset(file, path, "labels", "an integer dataset [N]", err, errlen)) < 0) goto done;
    tl = H5Dget_type(dl);
    sl = H5Dget_space(dl);
    if (tl < 0 || sl < 0) { errf(err, errlen, "%s: cannot read the header of dataset 'labels' (corrupt file?)", path); goto done; }
    rank = H5Sget_simple_extent_ndims(sl);
    if (rank < 0 || rank > H5S_MAX_RANK) { errf(err, errlen, "%s: cannot read the shape of dataset 'labels' (corrupt file?)", path); goto done; }
    H5Sget_simple_extent_dims(sl, dims, NULL);
    describe_dims(dims, rank, ddesc, sizeof ddesc);
    describe_type(tl, tdesc, sizeof tdesc);
    if (H5Tget_class(tl) != H5T_INTEGER || H5Tget_size(tl) > 8) {   /* wider: HDF5 converts through a buffer that wide */
        errf(err, errlen, "%s: dataset 'labels' has type %s but an integer type is required", path, tdesc);
        goto done;
    }
    if (rank != 1) {
        errf(err, errlen, "%s: dataset 'labels' has shape %s but [%zu] (one label per image) is required", path, ddesc, info->n);
        goto done;
    }
    if (dims[0] != info->n) {
        errf(err, errlen, "%s: dataset 'labels' has %llu entries but '%s' has %zu (one label per image is required)",
             path, (unsigned long long)dims[0], info->encoding == SHARD_ENC_JPEG ? "sizes" : "images", info->n);
        goto done;
    }

    /* attributes */
    ShardAttrs *at = &info->attrs;
    if (shard_attr_num_classes(file, path, &at->num_classes, err, errlen) != 0) goto done;
    if (expected_num_classes > 0 && at->num_classes != expected_num_classes) {
        errf(err, errlen, "%s: attribute 'num_classes' is %d but %d classes are configured", path, at->num_classes, expected_num_classes);
        goto done;
    }
    if (shard_class_names_read(file, path, at->num_classes, &at->class_names, err, errlen) != 0) goto done;
    int hm = H5Aexists(file, "mean") > 0, hs = H5Aexists(file, "std") > 0;
    if (hm != hs) {
        errf(err, errlen, "%s: attribute '%s' is present without '%s' (give both or neither)", path, hm ? "mean" : "std", hm ? "std" : "mean");
        goto done;
    }
    if (hm) {
        if (shard_attr_float3(file, path, "mean", at->mean, err, errlen) != 0) goto done;
        if (shard_attr_float3(file, path, "std", at->std, err, errlen) != 0) goto done;
        for (int c = 0; c < 3; c++)
            if (!(at->std[c] > 0.0f) || !(at->std[c] <= 1e6f)) {
                errf(err, errlen, "%s: attribute 'std' must be 3 positive finite numbers (got %g %g %g)",
                     path, (double)at->std[0], (double)at->std[1], (double)at->std[2]);
                goto done;
            } else if (!(fabsf(at->mean[c]) <= 1e6f)) {   /* false for NaN and infinities too */
                errf(err, errlen, "%s: attribute 'mean' must be 3 finite numbers (got %g %g %g)",
                     path, (double)at->mean[0], (double)at->mean[1], (double)at->mean[2]);
                goto done;
            }
        at->has_norm = 1;
    } else {
        for (int c = 0; c < 3; c++) { at->mean[c] = SHARD_DEFAULT_MEAN; at->std[c] = SHARD_DEFAULT_STD; }
    }

    /* A header may also claim samples the file does not hold (chunks never written read as
     * the fill value): each dataset must store at least what deflate at its best (1032:1)
     * could pack its samples into, or a 2 kB file would have the loader allocate and fill
     * gigabytes. */
    const int jp = info->encoding == SHARD_ENC_JPEG;
    const struct { hid_t d; const char *name; double bytes; } need[4] = {
        {dl, "labels", (double)info->n},
        {jp ? dj : di, jp ? "jpeg" : "images", jp ? (double)info->jpeg_bytes : (double)info->n * 3.0 * info->image_size * info->image_size},
        {doff, "offsets", 8.0 * ((double)info->n + 1)}, {dsz, "sizes", 4.0 * (double)info->n}};
    for (int k = 0; k < (jp ? 4 : 2); k++) {
        hsize_t stored = H5Dget_storage_size(need[k].d);
        if ((double)stored * 1100.0 < need[k].bytes) {
            errf(err, errlen, "%s: dataset '%s' stores %llu bytes for %zu samples (chunks never written? truncated?)",
                 path, need[k].name, (unsigned long long)stored, info->n);
            goto done;
        }
    }

    if (labels_out) {
        int32_t *lab = malloc(info->n * sizeof(int32_t));
        if (!lab) {
            errf(err, errlen, "%s: cannot allocate %zu bytes for the %zu labels", path, info->n * sizeof(int32_t), info->n);
            goto done;
        }
        char why[160];
        if (h5check_chunks(dl, NULL, NULL, why, sizeof why) != 0) {
            free(lab);
            errf(err, errlen, "%s: dataset 'labels' has %s (damaged file?)", path, why);
            goto done;
        }
        if (H5Dread(dl, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab) < 0) {
            free(lab);
            errf(err, errlen, "%s: cannot read dataset 'labels' (truncated or corrupt file)", path);
            goto done;
        }
        for (size_t i = 0; i < info->n; i++)
            if (lab[i] < 0 || lab[i] >= at->num_classes) {
                errf(err, errlen, "%s: label %d at index %zu is outside [0, %d) (num_classes is %d)",
                     path, lab[i], i, at->num_classes, at->num_classes);
                free(lab);
                goto done;
            }
        if (jp && check_jpeg_index(doff, dsz, info, err, errlen) != 0) {
            free(lab);
            goto done;
        }
        *labels_out = lab;
    }
    rc = 0;
done:
    if (si >= 0) H5Sclose(si);
    if (sl >= 0) H5Sclose(sl);
    if (ti >= 0) H5Tclose(ti);
    if (tl >= 0) H5Tclose(tl);
    if (di >= 0) H5Dclose(di);
    if (dl >= 0) H5Dclose(dl);
    if (dj >= 0) H5Dclose(dj);
    if (doff >= 0) H5Dclose(doff);
    if (dsz >= 0) H5Dclose(dsz);
    if (H5Fclose(file) < 0 && rc == 0) rc = errf(err, errlen, "%s: error closing the file (corrupt file?)", path);
    if (rc != 0) shard_attrs_free(&info->attrs);
    return rc;
}

static int shard_read_range_locked(const char *path, size_t start, size_t count, int image_size,
                     uint8_t *images, int32_t *labels, char *err, size_t errlen) {
    if (count == 0) return 0;
    hid_t file;
    if (open_file(path, &file, err, errlen) != 0) return -1;
    int rc = 0;
    const char *names[2] = {"images", "labels"};
    void *bufs[2] = {images, labels};
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (!bufs[k]) continue;
        hid_t d = open_dataset(file, path, names[k], k ? "an integer dataset [N]" : "uint8 [N,S,S,3]", err, errlen);
        if (d < 0) { rc = -1; break; }
        hid_t fs = H5Dget_space(d);
        hsize_t off[4] = {start, 0, 0, 0};
        hsize_t cnt[4] = {count, (hsize_t)image_size, (hsize_t)image_size, 3};
        int rank = k ? 1 : 4;
        hid_t ms = H5Screate_simple(rank, cnt, NULL);
        herr_t r = (fs < 0 || ms < 0) ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
        char why[160];
        if (r >= 0 && h5check_chunks(d, off, cnt, why, sizeof why) != 0) {
            rc = errf(err, errlen, "%s: dataset '%s' has %s (damaged file?)", path, names[k], why);
            r = 0;
        } else if (r >= 0) r = H5Dread(d, k ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, bufs[k]);
        if (r < 0) rc = errf(err, errlen, "%s: cannot read samples [%zu, %zu) of dataset '%s' (truncated or corrupt file)",
                             path, start, start + count, names[k]);
        if (ms >= 0) H5Sclose(ms);
        if (fs >= 0) H5Sclose(fs);
        H5Dclose(d);
    }
    H5Fclose(file);
    return rc;
}

static int shard_read_jpeg_range_locked(const char *path, size_t start, size_t count, uint64_t *offsets,
                                        uint16_t *sizes, uint8_t **bytes, int32_t *labels, char *err,
                                        size_t errlen) {
    if (bytes) *bytes = NULL;
    CHECK(count >= 1 && offsets != NULL);
    hid_t file;
    if (open_file(path, &file, err, errlen) != 0) return -1;
    ShardInfo info;
    memset(&info, 0, sizeof info);
    snprintf(info.path, sizeof info.path, "%s", path);
    hid_t dj = -1, doff = -1, dsz = -1, dl = -1;
    uint16_t *sz = NULL;
    uint8_t *buf = NULL;
    int rc = -1;
    if (shard_attr_encoding(file, path, &info.encoding, err, errlen) != 0) goto done;
    if (info.encoding != SHARD_ENC_JPEG) {
        errf(err, errlen, "%s: not a JPEG shard (attribute 'encoding' is not \"jpeg\")", path);
        goto done;
    }
    if (jpeg_header(file, path, 0, &info, &dj, &doff, &dsz, err, errlen) != 0) goto done;
    if (start > info.n || count > info.n - start) {
        errf(err, errlen, "%s: samples [%zu, %zu) asked for, but the shard holds %zu (changed since it was opened?)",
             path, start, start + count, info.n);
        goto done;
    }
    if (read_rows(doff, path, "offsets", H5T_NATIVE_UINT64, 1, 1, start, count + 1, offsets, err, errlen) != 0 ||
        check_offsets(path, offsets, start, count, info.n, info.jpeg_bytes, err, errlen) != 0)
        goto done;
    sz = sizes ? sizes : malloc(count * 2 * sizeof *sz);
    if (!sz) {
        errf(err, errlen, "%s: cannot allocate the sizes of %zu samples", path, count);
        goto done;
    }
    if (read_rows(dsz, path, "sizes", H5T_NATIVE_UINT16, 2, 2, start, count, sz, err, errlen) != 0 ||
        check_sizes(path, sz, start, count, info.image_size, err, errlen) != 0)
        goto done;
    if (labels) {
        /* Range-checked by the caller against num_classes, as shard_read_range's. */
        if ((dl = open_dataset(file, path, "labels", "an integer dataset [N]", err, errlen)) < 0 ||
            read_rows(dl, path, "labels", H5T_NATIVE_INT32, 1, 1, start, count, labels, err, errlen) != 0)
            goto done;
    }
    const uint64_t first = offsets[0], len = offsets[count] - first;
    if (bytes) {
        buf = len <= SIZE_MAX ? malloc((size_t)len) : NULL;
        if (!buf) {
            errf(err, errlen, "%s: cannot allocate %llu bytes for samples [%zu, %zu)", path, (unsigned long long)len,
                 start, start + count);
            goto done;
        }
        if (read_rows(dj, path, "jpeg", H5T_NATIVE_UINT8, 1, 1, first, len, buf, err, errlen) != 0) goto done;
    }
    for (size_t i = 0; i <= count; i++) offsets[i] -= first;
    if (bytes) *bytes = buf;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    if (sz != sizes) free(sz);
    if (dj >= 0) H5Dclose(dj);
    if (doff >= 0) H5Dclose(doff);
    if (dsz >= 0) H5Dclose(dsz);
    if (dl >= 0) H5Dclose(dl);
    H5Fclose(file);
    return rc;
}

/* ---- locked entry points ------------------------------------------------------------------- */

int shard_read_info(ShardInfo *info, const char *path, int expected_image_size,
                    int expected_num_classes, int32_t **labels_out, char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_read_info_locked(info, path, expected_image_size, expected_num_classes, labels_out, err, errlen);
    hdf5_unlock();
    return rc;
}

int shard_read_range(const char *path, size_t start, size_t count, int image_size,
                     uint8_t *images, int32_t *labels, char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_read_range_locked(path, start, count, image_size, images, labels, err, errlen);
    hdf5_unlock();
    return rc;
}

int shard_read_jpeg_range(const char *path, size_t start, size_t count, uint64_t *offsets,
                          uint16_t *sizes, uint8_t **bytes, int32_t *labels, char *err,
                          size_t errlen) {
    hdf5_lock();
    int rc = shard_read_jpeg_range_locked(path, start, count, offsets, sizes, bytes, labels, err, errlen);
    hdf5_unlock();
    return rc;
}
