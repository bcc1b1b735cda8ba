/* SPDX-License-Identifier: BSD-3-Clause */
/* checkpoint_format.c - what reading and writing a checkpoint share: the HDF5 settings and
 * error reasons (both must open files with the same format bounds, or a written file would not
 * read), and the /dataset record's memory, which the reader fills and the writer keeps a copy of.
 * Here rather than on either side, so that the calls between the files of src/ckpt run one way:
 * checkpoint_write.c -> checkpoint_dir.c -> checkpoint_read.c -> checkpoint_format.c. */
#include "checkpoint_format.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "data/shard_format.h"

static herr_t innermost_cb(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0 && e->desc) snprintf((char *)data, 512, "%s", e->desc);
    return 0;
}

/* Why the last HDF5 call failed, in a few words. The innermost entry of the error stack is the
 * specific one ("truncated file: eof = ..."); when it comes from a system call it embeds
 * "error message = '<strerror>'", which is all a user needs (e.g. "No space left on device").
 * Must run under hdf5_lock() right after the failing call: the next call clears the stack. */
void checkpoint_hdf5_reason(char *buf, size_t len) {
    char desc[512] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_cb, desc);
    const char *key = "error message = '";
    const char *p = strstr(desc, key);
    if (p) {
        p += strlen(key);
        const char *q = strchr(p, '\'');
        int n = q ? (int)(q - p) : (int)strlen(p);
        snprintf(buf, len, "%.*s", n, p);
    } else {
        snprintf(buf, len, "%s", desc[0] ? desc : "unknown HDF5 error");
    }
}

hid_t checkpoint_file_access_plist(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(fapl >= 0);
    /* Closing the file closes whatever an error path left open. */
    CHECK(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0);
    /* The 1.10 file format checksums the superblock and object headers and keeps a one-chunk
     * dataset's index in its header, so with Fletcher-32 on the data a damaged byte is caught
     * wherever it is (tests/test_checkpoint.c flips them); HDF5 >= 1.10 (any recent h5py)
     * reads it. */
    CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0);
#if (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7) || H5_VERSION_GE(1, 12, 1)
    /* Cluster file systems mounted without flock (some Lustre, NFS setups) make HDF5's file
     * lock fail with ENOSYS and the open with it; the rename protocol needs no lock. */
    CHECK(H5Pset_file_locking(fapl, 1, 1) >= 0);
#endif
    return fapl;
}

void ckpt_dataset_free(CkptDataset *d) {
    for (int k = 0; d->class_names && k < d->num_classes; k++) free(d->class_names[k]);
    free(d->class_names);
    memset(d, 0, sizeof *d);
}

void ckpt_dataset_copy(CkptDataset *dst, const CkptDataset *src) {
    *dst = *src;
    dst->class_names = NULL;
    if (!src->class_names) return;
    CHECK(src->num_classes >= 1);
    dst->class_names = callocCheck((size_t)src->num_classes, sizeof(char *));
    for (int k = 0; k < src->num_classes; k++) {
        CHECK(strlen(src->class_names[k]) <= SHARD_MAX_CLASS_NAME);
        dst->class_names[k] = strdup(src->class_names[k]);
        CHECK(dst->class_names[k] != NULL);
    }
}
