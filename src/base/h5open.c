/* SPDX-License-Identifier: BSD-3-Clause */
/* h5open.c - see h5open.h. */
#include "h5open.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5check.h"
#include "util.h"

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t LinkInfo;
#define link_info(loc, name, info) H5Lget_info2((loc), (name), (info), H5P_DEFAULT)
#else
typedef H5L_info_t LinkInfo;
#define link_info(loc, name, info) H5Lget_info((loc), (name), (info), H5P_DEFAULT)
#endif

int h5open_check_file(const char *path, const char *expected, char *err, size_t errlen) {
    h5open_deny_external_links();
    struct stat st;
    if (stat(path, &st) != 0) return errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    /* before any open(2): opening a FIFO for reading blocks until a writer comes */
    if (!S_ISREG(st.st_mode)) return errf(err, errlen, "%s: not a regular file (%s)", path, expected);
    if (access(path, R_OK) != 0) return errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
#if H5_VERSION_GE(1, 12, 0)
    const htri_t is_hdf5 = H5Fis_accessible(path, H5P_DEFAULT);
#else
    const htri_t is_hdf5 = H5Fis_hdf5(path);
#endif
    if (is_hdf5 <= 0) return errf(err, errlen, "%s: not an HDF5 file (corrupt or another format; %s)", path, expected);
    return h5check_file(path, err, errlen);   /* before HDF5 reads its metadata */
}

/* The traversal of an external link: always refused. HDF5 reports the failure as it would a
 * missing target file; the readers have named the link already (h5open_exists). */
static hid_t refuse_traversal(const char *link_name, hid_t cur_group, const void *lnkdata, size_t lnkdata_size,
                              hid_t lapl_id, hid_t dxpl_id) {
    (void)link_name; (void)cur_group; (void)lnkdata; (void)lnkdata_size; (void)lapl_id; (void)dxpl_id;
    return -1;
}

void h5open_deny_external_links(void) {
    /* H5Lregister replaces a class of the same id, built-in external links included (their id
     * is the first user-defined one). Registering again is a table update: done on every file
     * check rather than once, so that it holds even after the library was closed and reopened. */
    static const H5L_class_t denied = {
        H5L_LINK_CLASS_T_VERS, H5L_TYPE_EXTERNAL, "external link (not followed by ddptrain)",
        NULL, NULL, NULL, refuse_traversal, NULL, NULL};
    CHECK(H5Lregister(&denied) >= 0);
}

int h5open_exists(hid_t loc, const char *path, char *why, size_t whylen) {
    char prefix[1024];
    const size_t n = strlen(path);
    if (n == 0 || n >= sizeof prefix) return 0;
    /* one component at a time: each H5Lexists below resolves only components already known to
     * be hard links, and does not follow the last one */
    for (size_t end = path[0] == '/' ? 1 : 0; end <= n; end++) {
        if (end < n && path[end] != '/') continue;
        memcpy(prefix, path, end);
        prefix[end] = '\0';
        if (end == 0 || prefix[end - 1] == '/') continue;   /* "/" itself, or "a//b" */
        const htri_t e = H5Lexists(loc, prefix, H5P_DEFAULT);
        if (e <= 0) return 0;
        LinkInfo li;
        if (link_info(loc, prefix, &li) < 0) return 0;
        if (li.type == H5L_TYPE_HARD) continue;
        snprintf(why, whylen, "'%s' is %s", QUOTED(prefix),
                 li.type == H5L_TYPE_EXTERNAL ? "an external link (to an object of another file; not followed)"
                 : li.type == H5L_TYPE_SOFT   ? "a soft link (ddptrain reads objects by their own names only)"
                                              : "a user-defined link (not followed)");
        return -1;
    }
    return 1;
}

int h5open_check_storage(hid_t ds, char *why, size_t whylen) {
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) return 0;   /* HDF5's own read reports what is wrong */
    int rc = 0;
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL) {
        snprintf(why, whylen, "is a virtual dataset (elements mapped from other datasets or files; not read)");
        rc = -1;
    } else if (H5Pget_external_count(dcpl) != 0) {
        char name[256] = "";
        off_t offset = 0;
        hsize_t size = 0;
        if (H5Pget_external(dcpl, 0, sizeof name, name, &offset, &size) < 0) name[0] = '\0';
        name[sizeof name - 1] = '\0';
        snprintf(why, whylen, "keeps its data in an external file (%s; not read)", QUOTED(name));
        rc = -1;
    }
    H5Pclose(dcpl);
    return rc;
}

/* h5open_exists for an object about to be opened: 1 when it may be, else 0 (missing, *missing
 * set) or -1 (a link that is not a hard one), the reason in why. */
static int openable(hid_t loc, const char *path, int *missing, char *why, size_t whylen) {
    if (missing) *missing = 0;
    const int e = h5open_exists(loc, path, why, whylen);
    if (e == 0) {
        if (missing) *missing = 1;
        snprintf(why, whylen, "'%s' is missing", QUOTED(path));
    }
    return e;
}

hid_t h5open_dataset(hid_t loc, const char *path, int *missing, char *why, size_t whylen) {
    if (openable(loc, path, missing, why, whylen) <= 0) return -1;
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    if (ds < 0) {
        snprintf(why, whylen, "'%s' is not a readable dataset", QUOTED(path));
        return -1;
    }
    char what[384];
    if (h5open_check_storage(ds, what, sizeof what) != 0 || h5check_compact_storage(ds, what, sizeof what) != 0 ||
        h5check_contiguous(ds, what, sizeof what) != 0) {
        /* the h5check reasons are noun phrases, h5open_check_storage's a verb */
        snprintf(why, whylen, "dataset '%s' %s%s", QUOTED(path),
                 strncmp(what, "compact", 7) && strncmp(what, "contiguous", 10) ? "" : "has ", what);
        H5Dclose(ds);
        return -1;
    }
    return ds;
}

hid_t h5open_group(hid_t loc, const char *path, int *missing, char *why, size_t whylen) {
    if (openable(loc, path, missing, why, whylen) <= 0) return -1;
    hid_t g = H5Gopen2(loc, path, H5P_DEFAULT);
    if (g < 0) snprintf(why, whylen, "'%s' is not a readable group", QUOTED(path));
    return g;
}
