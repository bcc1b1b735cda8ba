/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_class_names.c - a shard's class names in the attribute or the dataset `class_names`
 * (shard_class_names.h): written where they fit, read from either, from any writer's file,
 * h5py's included, and checked before a name sizes a buffer or reaches the terminal. */
#include "shard_class_names.h"

#include <string.h>

#include "base/h5open.h"
#include "base/h5check.h"
#include "base/util.h"

/* Offset of the first C0 or C1 control character (raw, or C1 as UTF-8) in s, or -1. */
static long control_char_at(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    for (long i = 0; u[i]; i++) {
        if (u[i] < 0x20 || u[i] == 0x7f) return i;
        if (u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) return i;   /* U+0080..U+009F */
    }
    return -1;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* A variable-length UTF-8 string attribute of n elements, as h5py writes a list of str. */
static int write_attribute(hid_t file, int n, char *const *names) {
    hsize_t dims = (hsize_t)n;
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    H5Tset_cset(st, H5T_CSET_UTF8);
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t a = sp < 0 ? -1 : H5Acreate2(file, "class_names", st, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, st, names);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    H5Tclose(st);
    return r < 0 ? -1 : 0;
}

/* The dataset: fixed-length strings as wide as the longest name (a variable-length one would
 * keep the names in a global heap, one more structure for a reader to trust). */
static int write_dataset(hid_t file, int n, char *const *names) {
    size_t width = 1;
    for (int k = 0; k < n; k++) {
        const size_t len = strlen(names[k]);
        if (len > width) width = len;
    }
    char *buf = callocCheck((size_t)n, width);   /* NUL-padded */
    for (int k = 0; k < n; k++) memcpy(buf + (size_t)k * width, names[k], strlen(names[k]));
    hsize_t dims = (hsize_t)n;
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, width);
    H5Tset_strpad(st, H5T_STR_NULLPAD);
    H5Tset_cset(st, H5T_CSET_UTF8);
    hid_t sp = H5Screate_simple(1, &dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);   /* byte-identical shards for the same input */
    hid_t d = sp < 0 ? -1 : H5Dcreate2(file, "class_names", st, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    herr_t r = d < 0 ? -1 : H5Dwrite(d, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    if (d >= 0 && H5Dclose(d) < 0) r = -1;
    H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    H5Tclose(st);
    free(buf);
    return r < 0 ? -1 : 0;
}

int shard_class_names_write(hid_t file, int num_classes, char *const *names) {
    CHECK(num_classes >= 1 && num_classes <= SHARD_MAX_CLASSES);
    for (int k = 0; k < num_classes; k++)   /* what the reader below accepts */
        CHECK(strlen(names[k]) <= SHARD_MAX_CLASS_NAME && control_char_at(names[k]) < 0);
    return num_classes <= SHARD_ATTR_MAX_CLASS_NAMES ? write_attribute(file, num_classes, names)
                                                     : write_dataset(file, num_classes, names);
}

/* ---- reading ------------------------------------------------------------------------------- */

/* The attribute or the dataset, read through the same code. */
typedef struct {
    hid_t id;
    int dataset;
    const char *what;   /* "attribute 'class_names'" or "dataset 'class_names'", for messages */
} Names;

static hid_t names_type(const Names *s) { return s->dataset ? H5Dget_type(s->id) : H5Aget_type(s->id); }
static hid_t names_space(const Names *s) { return s->dataset ? H5Dget_space(s->id) : H5Aget_space(s->id); }
static herr_t names_read(const Names *s, hid_t mt, void *buf) {
    return s->dataset ? H5Dread(s->id, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : H5Aread(s->id, mt, buf);
}

/* What a dataset must be before it is read (an attribute is bounded by its header message,
 * which h5check_file walked): one dimension, fixed-length names of at most
 * SHARD_MAX_CLASS_NAME bytes,
 * storage that holds them (chunks never written would have the reader allocate for nothing,
 * as shard_read.c refuses for the samples) and that HDF5 1.10 copies safely. */
static int check_dataset(const Names *s, hid_t ft, const char *path, int num_classes, char *err, size_t errlen) {
    char why[160];
    if (h5check_compact_storage(s->id, why, sizeof why) != 0 || h5check_chunks(s->id, NULL, NULL, why, sizeof why) != 0)
        return errf(err, errlen, "%s: %s has %s (damaged file?)", path, s->what, why);
    hid_t sp = names_space(s);
    const int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (rank != 1)
        return errf(err, errlen, "%s: %s must be one-dimensional (%d names, one per class)", path, s->what, num_classes);
    /* Variable-length strings live in global heap collections, which HDF5 1.10 reads
     * unchecked: a fuzzed one kept the reader busy past the fuzzer's 25 s (a fixed-length one holds
     * its bytes in one block, bounded below). The attribute may hold them: its header message
     * bounds it to a few thousand. */
    if (H5Tis_variable_str(ft) != 0)
        return errf(err, errlen, "%s: %s holds variable-length strings (fixed-length ones are expected, as h5py writes np.array(names, dtype=\"S\"))",
                    path, s->what);
    const size_t width = H5Tget_size(ft);
    if (width == 0 || width > SHARD_MAX_CLASS_NAME)
        return errf(err, errlen, "%s: %s holds strings of %zu bytes (at most %d are supported)", path, s->what, width,
                    SHARD_MAX_CLASS_NAME);
    const hsize_t stored = H5Dget_storage_size(s->id);
    if ((double)stored * 1100.0 < (double)num_classes * (double)width)
        return errf(err, errlen, "%s: %s stores %llu bytes for %d names (never written? truncated?)", path, s->what,
                    (unsigned long long)stored, num_classes);
    return 0;
}

/* Reads num_classes strings of s into a new array; -1 with err. */
static int read_names(const Names *s, const char *path, int num_classes, char ***out, char *err, size_t errlen) {
    *out = NULL;
    hid_t ft = names_type(s), sp = names_space(s);
    const long long np = sp >= 0 ? (long long)H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING) {
        if (ft >= 0) H5Tclose(ft);
        return errf(err, errlen, "%s: %s must be strings (one per class)", path, s->what);
    }
    if (np != num_classes) {
        H5Tclose(ft);
        return errf(err, errlen, "%s: %s has %lld names but num_classes is %d", path, s->what, np, num_classes);
    }
    if (s->dataset && check_dataset(s, ft, path, num_classes, err, errlen) != 0) {
        H5Tclose(ft);
        return -1;
    }
    char **names = callocCheck((size_t)num_classes, sizeof(char *));
    hid_t mt = H5Tcopy(H5T_C_S1);
    /* Same character set as the file: HDF5 refuses to convert between ASCII and UTF-8. */
    H5Tset_cset(mt, H5Tget_cset(ft));
    herr_t r;
    if (H5Tis_variable_str(ft) > 0) {
        H5Tset_size(mt, H5T_VARIABLE);
        char **buf = callocCheck((size_t)num_classes, sizeof(char *));
        r = names_read(s, mt, buf);
        if (r >= 0) {
            for (int k = 0; k < num_classes; k++) names[k] = strdup(buf[k] ? buf[k] : "");
            hid_t msp = names_space(s);
#if H5_VERSION_GE(1, 12, 0)
            H5Treclaim(mt, msp, H5P_DEFAULT, buf);
#else
            H5Dvlen_reclaim(mt, msp, H5P_DEFAULT, buf);
#endif
            H5Sclose(msp);
        }
        free(buf);
    } else {
        size_t sz = H5Tget_size(ft);
        H5Tset_size(mt, sz + 1);      /* room for the terminator a NULLPAD string lacks */
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        char *buf = callocCheck((size_t)num_classes, sz + 1);
        r = names_read(s, mt, buf);
        if (r >= 0)
            for (int k = 0; k < num_classes; k++) names[k] = strndup(buf + (size_t)k * (sz + 1), sz);
        free(buf);
    }
    H5Tclose(mt);
    H5Tclose(ft);
    if (r < 0) {
        free(names);
        return errf(err, errlen, "%s: cannot read %s (corrupt file?)", path, s->what);
    }
    for (int k = 0; k < num_classes; k++) CHECK(names[k] != NULL);
    /* Names reach the terminal (inspect, logs): an escape sequence in a file must not. */
    for (int k = 0; k < num_classes; k++) {
        long bad = control_char_at(names[k]);
        if (bad >= 0) {
            errf(err, errlen, "%s: %s: name %d holds a control character (0x%02x at byte %ld)",
                 path, s->what, k, (unsigned char)names[k][bad], bad);
            for (int j = 0; j < num_classes; j++) free(names[j]);
            free(names);
            return -1;
        }
    }
    *out = names;
    return 0;
}

int shard_class_names_read(hid_t file, const char *path, int num_classes, char ***out, char *err,
                           size_t errlen) {
    *out = NULL;
    char why[512];
    const int in_attr = H5Aexists(file, "class_names") > 0, link = h5open_exists(file, "class_names", why, sizeof why);
    if (link < 0) return errf(err, errlen, "%s: %s", path, why);   /* an external or soft link: not followed */
    const int in_dataset = link > 0;
    if (in_attr && in_dataset)
        return errf(err, errlen, "%s: both an attribute and a dataset 'class_names' (one of them is expected)", path);
    if (!in_attr && !in_dataset) return 0;
    Names s = {-1, in_dataset, in_dataset ? "dataset 'class_names'" : "attribute 'class_names'"};
    why[0] = '\0';
    s.id = in_dataset ? h5open_dataset(file, "class_names", NULL, why, sizeof why) : H5Aopen(file, "class_names", H5P_DEFAULT);
    if (s.id < 0)
        return errf(err, errlen, "%s: cannot open %s (%s)", path, s.what,
                    why[0] ? why : in_dataset ? "a dataset of strings, one per class, is expected" : "corrupt file?");
    int rc = read_names(&s, path, num_classes, out, err, errlen);
    if (in_dataset) H5Dclose(s.id);
    else H5Aclose(s.id);
    return rc;
}
