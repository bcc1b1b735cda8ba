/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_attrs.c - the attributes a shard carries (num_classes, mean and std, encoding, image_size;
 * class_names are shard_class_names.c's): read from any writer's file, h5py's included, and
 * checked, so that a bad value is refused with one line naming it before it sizes a buffer. */
#include "shard_attrs.h"

#include <string.h>

#include "base/util.h"

void shard_attrs_free(ShardAttrs *a) {
    if (a->class_names) {
        for (int k = 0; k < a->num_classes; k++) free(a->class_names[k]);
        free(a->class_names);
    }
    a->class_names = NULL;
}

void shard_attrs_copy(ShardAttrs *dst, const ShardAttrs *src) {
    *dst = *src;
    dst->class_names = NULL;
    if (src->class_names) {
        dst->class_names = callocCheck((size_t)src->num_classes, sizeof(char *));
        for (int k = 0; k < src->num_classes; k++) {
            dst->class_names[k] = strdup(src->class_names[k]);
            CHECK(dst->class_names[k] != NULL);
        }
    }
}

/* Number of elements of an attribute's dataspace (scalar = 1), or -1. */
static long long attr_npoints(hid_t a) {
    hid_t s = H5Aget_space(a);
    if (s < 0) return -1;
    hssize_t n = H5Sget_simple_extent_npoints(s);
    H5Sclose(s);
    return (long long)n;
}

int shard_attr_num_classes(hid_t file, const char *path, int *out, char *err, size_t errlen) {
    if (H5Aexists(file, "num_classes") <= 0)
        return errf(err, errlen, "%s: attribute 'num_classes' is missing (an integer, the number of classes, is required)", path);
    hid_t a = H5Aopen(file, "num_classes", H5P_DEFAULT);
    if (a < 0) return errf(err, errlen, "%s: cannot open attribute 'num_classes' (corrupt file?)", path);
    hid_t t = H5Aget_type(a);
    int isint = t >= 0 && H5Tget_class(t) == H5T_INTEGER;
    long long np = attr_npoints(a);
    int v = 0;
    herr_t r = (isint && np == 1) ? H5Aread(a, H5T_NATIVE_INT, &v) : -1;
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    if (!isint || np != 1)
        return errf(err, errlen, "%s: attribute 'num_classes' must be a single integer", path);
    if (r < 0) return errf(err, errlen, "%s: cannot read attribute 'num_classes' (corrupt file?)", path);
    if (v < 1 || v > SHARD_MAX_CLASSES)
        return errf(err, errlen, "%s: attribute 'num_classes' is %d but must be in [1, %d]", path, v, SHARD_MAX_CLASSES);
    *out = v;
    return 0;
}

int shard_attr_float3(hid_t file, const char *path, const char *name, float out[3], char *err, size_t errlen) {
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0) return errf(err, errlen, "%s: cannot open attribute '%s' (corrupt file?)", path, name);
    hid_t t = H5Aget_type(a);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    int numeric = cls == H5T_FLOAT || cls == H5T_INTEGER;
    long long np = attr_npoints(a);
    herr_t r = (numeric && np == 3) ? H5Aread(a, H5T_NATIVE_FLOAT, out) : -1;
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    if (!numeric || np != 3)
        return errf(err, errlen, "%s: attribute '%s' must be 3 floats (one per channel, in units of pixel/255)", path, name);
    if (r < 0) return errf(err, errlen, "%s: cannot read attribute '%s' (corrupt file?)", path, name);
    return 0;
}

/* A string attribute of one element (variable- or fixed-length, as h5py or ddptrain-data
 * writes it) into buf; -1 with err when it is not one or cannot be read. */
static int read_string_attr(hid_t file, const char *path, const char *name, char *buf, size_t len,
                            char *err, size_t errlen) {
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0) return errf(err, errlen, "%s: cannot open attribute '%s' (corrupt file?)", path, name);
    hid_t ft = H5Aget_type(a);
    long long np = attr_npoints(a);
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING || np != 1) {
        if (ft >= 0) H5Tclose(ft);
        H5Aclose(a);
        return errf(err, errlen, "%s: attribute '%s' must be a single string", path, name);
    }
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_cset(mt, H5Tget_cset(ft));
    herr_t r;
    buf[0] = '\0';
    if (H5Tis_variable_str(ft) > 0) {
        H5Tset_size(mt, H5T_VARIABLE);
        char *v = NULL;
        r = H5Aread(a, mt, &v);
        if (r >= 0) {
            snprintf(buf, len, "%s", v ? v : "");
            hid_t sp = H5Aget_space(a);
#if H5_VERSION_GE(1, 12, 0)
            H5Treclaim(mt, sp, H5P_DEFAULT, &v);
#else
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, &v);
#endif
            H5Sclose(sp);
        }
    } else {
        size_t sz = H5Tget_size(ft);
        if (sz >= len) sz = len - 1;   /* longer than any value we accept: cut, then refused */
        H5Tset_size(mt, sz + 1);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        r = H5Aread(a, mt, buf);
        buf[sz] = '\0';
    }
    H5Tclose(mt);
    H5Tclose(ft);
    H5Aclose(a);
    if (r < 0) return errf(err, errlen, "%s: cannot read attribute '%s' (corrupt file?)", path, name);
    return 0;
}

/* The file attribute `encoding`: absent or "raw" is SHARD_ENC_RAW, "jpeg" SHARD_ENC_JPEG. */
int shard_attr_encoding(hid_t file, const char *path, int *out, char *err, size_t errlen) {
    *out = SHARD_ENC_RAW;
    if (H5Aexists(file, "encoding") <= 0) return 0;
    char v[64];
    if (read_string_attr(file, path, "encoding", v, sizeof v, err, errlen) != 0) return -1;
    if (strcmp(v, "raw") == 0) return 0;
    if (strcmp(v, "jpeg") == 0) {
        *out = SHARD_ENC_JPEG;
        return 0;
    }
    return errf(err, errlen, "%s: attribute 'encoding' is %s but must be \"raw\" or \"jpeg\"", path, QUOTED(v));
}

/* The file attribute `image_size` of a JPEG shard: S, every image's shorter side. */
int shard_attr_image_size(hid_t file, const char *path, int *out, char *err, size_t errlen) {
    if (H5Aexists(file, "image_size") <= 0)
        return errf(err, errlen, "%s: attribute 'image_size' is missing (a JPEG shard needs it: an integer, the shorter side of every image)", path);
    hid_t a = H5Aopen(file, "image_size", H5P_DEFAULT);
    if (a < 0) return errf(err, errlen, "%s: cannot open attribute 'image_size' (corrupt file?)", path);
    hid_t t = H5Aget_type(a);
    int isint = t >= 0 && H5Tget_class(t) == H5T_INTEGER;
    long long np = attr_npoints(a);
    long long v = 0;
    herr_t r = (isint && np == 1) ? H5Aread(a, H5T_NATIVE_LLONG, &v) : -1;
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    if (!isint || np != 1) return errf(err, errlen, "%s: attribute 'image_size' must be a single integer", path);
    if (r < 0) return errf(err, errlen, "%s: cannot read attribute 'image_size' (corrupt file?)", path);
    if (v < 1 || v > SHARD_MAX_JPEG_SIZE)
        return errf(err, errlen, "%s: attribute 'image_size' is %lld but must be in [1, %d]", path, v, SHARD_MAX_JPEG_SIZE);
    *out = (int)v;
    return 0;
}
